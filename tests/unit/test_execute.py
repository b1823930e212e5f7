"""harness.run.execute without worker processes: a stand-in Worker answers as a real one would."""

from pathlib import Path

from harness.models.resolve import ResolvedModel
from harness.run import execute as execute_mod
from harness.run import plan as plan_mod
from harness.run.execute import Executor
from harness.run.plan import build_plan
from harness.runners.platform import Platform
from tests.unit.test_compare import make_case


class RaisingWorker:
    """Loads anything; every case raises, its traceback naming the runner that raised it."""

    made: list["RaisingWorker"] = []

    def __init__(self, runner, env, log_path, threads=None):
        self.runner, self.log_path = runner, Path(log_path)
        self.alive, self.rss_mb, self.proc = False, None, None
        self.lane, self.loads, self.recycles = None, 0, 0
        RaisingWorker.made.append(self)

    def start(self, timeout):
        self.alive = True
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as f:
            f.write(f"started {self.runner}\n")

    def request(self, msg, timeout, what):
        if msg["op"] == "run":
            return {"ok": False, "error": "boom", "traceback": f"Traceback: {self.runner} boom"}
        return {"ok": True, "info": {}}

    def note_memory(self, ans):
        pass

    def stop(self):
        self.alive = False


def test_a_worker_traceback_lands_in_that_workers_own_log_with_lanes_side_by_side(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(
        plan_mod, "resolve", lambda src, base: ResolvedModel(tmp_path, "fp-m", "local")
    )
    monkeypatch.setattr(execute_mod, "Worker", RaisingWorker)
    monkeypatch.setattr(execute_mod.os, "cpu_count", lambda: 4)  # two lanes on any host
    RaisingWorker.made = []
    plan = build_plan([make_case()], Platform("cpu"), tmp_path)
    got = Executor(plan, tmp_path / "run", jobs=2).run()
    assert {o.status for o in got.values()} == {"error"} and len(got) == 2
    logs = {w.runner: w.log_path for w in RaisingWorker.made}
    assert sorted(logs) == ["hf", "vllm-v1"]
    for runner, log in logs.items():
        assert log.name.startswith(f"{runner}.") and log.name != f"{runner}.log"  # a lane's log
        text = log.read_text()
        assert text.index(f"started {runner}") < text.index(f"Traceback: {runner} boom")
    assert sorted(p.name for p in (tmp_path / "run" / "logs").iterdir()) == sorted(
        log.name for log in logs.values()
    )  # no log of a worker that never was
