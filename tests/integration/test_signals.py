"""A run that stops when told: SIGINT and SIGTERM (and a second SIGINT = now) at each stage end
the run with a partial report that keeps every result obtained, and no process left behind.

Each test waits for an event that names the stage (a build process, a worker's log line, a
server's log line) before it signals; the only bound is a generous hang guard, and the measured
time to exit is printed (`-s` shows it), never asserted. "No process left" is every process
carrying this test's marker in its environment (inherited by workers, servers, engine cores and
their helpers): none may remain once the run has exited.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, SUBPROCESS_GUARD

DATA = Path(__file__).parent / "data"
MARK = "PARITY_SIGNAL_TEST"
HANG_GUARD = 120.0  # seconds from a signal to exit: only so that a hang fails the test
STAGE_GUARD = float(SUBPROCESS_GUARD)  # to reach a stage: a hang guard (power: runs before it)
FAULTS = """
defaults: {runners: [hf, fake], task: embed, inputs: short-texts, family: faults}
families:
  faults:
    reference: st-embed
    model: {source: synthetic, arch: BertModel, seed: SEED, pooling: mean, normalize: true}
    tolerances:
      float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}
      bfloat16: {cosine_distance: 1.0e-2, max_abs: 5.0e-2}
      float16: {cosine_distance: 1.0e-3, max_abs: 2.0e-2}
cases:
  - {id: a-echo, engine: {behaviour: echo, dim: 64}}
  - {id: b-stage, engine: {behaviour: BEHAVIOUR, say: AT-THE-STAGE}}
"""
# a worker that never finishes starting: imports done, no `ready` sent (test-only, via site)
SLOW_START = """
import time
with open("/proc/self/cmdline", "rb") as f:
    if b"harness.runners.worker" in f.read():
        print("worker start: importing", flush=True)
        time.sleep(3600)
"""


def marked(token: str) -> list[int]:
    """Live processes carrying this test's marker (zombies have no environment: not counted)."""
    needle = f"{MARK}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class Run:
    """`parity ARGS` in its own session, its output collected line by line."""

    def __init__(self, args: list[str], tmp: Path, env: dict[str, str] | None = None):
        self.token = uuid.uuid4().hex
        self.tmp = tmp
        self.lines: list[str] = []
        full = {**os.environ, MARK: self.token, "TMPDIR": str(tmp), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", *args],
            cwd=ROOT,
            env=full,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, what: str, event) -> None:
        """Until `event()` is true (the stage is reached); fails if the run ends first."""
        deadline = time.monotonic() + STAGE_GUARD
        while not event():
            if self.proc.poll() is not None:
                pytest.fail(f"the run ended before {what}:\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                self.cleanup()
                pytest.fail(f"{what} not reached in {STAGE_GUARD:.0f} s:\n{self.output()[-3000:]}")
            time.sleep(0.1)

    def signal(self, stage: str, *sigs: int) -> float:
        """Send the signals, wait for the run to exit; returns (and prints) the time it took."""
        t0 = time.monotonic()
        for sig in sigs:
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            self.cleanup()
            pytest.fail(f"{stage}: no exit {HANG_GUARD:.0f} s after {sigs}:\n{self.output()}")
        took = time.monotonic() - t0
        names = "+".join(signal.Signals(s).name for s in sigs)
        print(f"\n{stage}: {names} -> exit {self.proc.returncode} in {took:.2f} s")
        self._reader.join(timeout=10)
        return took

    def assert_nothing_left(self) -> None:
        # the guard only covers processes still being torn down by the kernel (SIGKILL sent)
        deadline = time.monotonic() + 30
        while marked(self.token) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {pid: cmdline(pid) for pid in marked(self.token)}
        self.cleanup()
        assert not left, f"processes left after the run exited: {left}"

    def cleanup(self) -> None:
        for pid in [self.proc.pid, *marked(self.token)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def log_has(self, text: str, pattern: str = "logs/*.log") -> bool:
        for path in (self.tmp / "out").glob(pattern):
            if text in path.read_text(errors="replace"):
                return True
        return False

    def process_running(self, text: str) -> bool:
        return any(text in cmdline(pid) for pid in marked(self.token))

    def report(self) -> dict:
        return json.loads((self.tmp / "out" / "report.json").read_text())


def fault_run(tmp: Path, behaviour: str, env: dict[str, str] | None = None, seed: int = 0) -> Run:
    matrix = tmp / "faults.yaml"
    matrix.write_text(FAULTS.replace("BEHAVIOUR", behaviour).replace("SEED", str(seed)))
    args = ["run", "-m", str(matrix), "--jobs", "1", "--out", str(tmp / "out")]
    return Run([*args, "--case-timeout", "600", "--load-timeout", "600"], tmp, env)


def assert_partial(run: Run, signame: str, kept: int | None) -> dict:
    """Exit 1 with a partial report naming the signal; `kept` results obtained before it kept."""
    assert run.proc.returncode == 1, run.output()[-3000:]
    report = run.report()
    assert report["partial"] and signame in report["partial_reason"], report["partial_reason"]
    obtained = [r for r in report["results"] if r["output"]]  # the runner's outputs, kept
    if kept is not None:
        assert len(obtained) == kept, [(r["case_id"], r["status"], r["reason"]) for r in obtained]
    # every output a runner wrote before the signal is in the report
    named = {r["output"] for r in report["results"] + report.get("references", []) if r["output"]}
    on_disk = {str(p) for p in (run.tmp / "out" / "outputs").glob("*/*.safetensors")}
    assert on_disk <= named, on_disk - named
    return report


SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_hanging_case(tmp_path, sig):
    run = fault_run(tmp_path, "hang")
    run.wait_for("the hanging case", lambda: run.log_has("fake run: hang"))
    run.signal("a hanging case", sig)
    report = assert_partial(run, signal.Signals(sig).name, kept=1)  # a-echo was compared
    (stage,) = [r for r in report["results"] if r["case_id"] == "b-stage"]
    assert stage["status"] == "error" and "not run" in stage["reason"], stage
    run.assert_nothing_left()


@pytest.mark.parametrize("sig", SIGNALS)
def test_an_engine_load(tmp_path, sig):
    run = fault_run(tmp_path, "hang-load")
    run.wait_for("the engine load", lambda: run.log_has("AT-THE-STAGE"))
    run.signal("an engine load", sig)
    assert_partial(run, signal.Signals(sig).name, kept=1)
    run.assert_nothing_left()


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_worker_start(tmp_path, sig):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_START)
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    run = fault_run(tmp_path, "echo", env={"PYTHONPATH": path})
    run.wait_for("a worker start", lambda: run.log_has("worker start: importing"))
    run.signal("a worker start", sig)
    assert_partial(run, signal.Signals(sig).name, kept=0)
    run.assert_nothing_left()


@pytest.mark.parametrize("sig", SIGNALS)
def test_planning_while_checkpoints_build(tmp_path, sig):
    # a cache of its own: the synthetic checkpoint is built now, in a build process
    run = fault_run(tmp_path, "echo", env={"PARITY_CACHE": str(tmp_path / "cache")}, seed=7)
    run.wait_for("a checkpoint build", lambda: run.process_running("harness.models.synthetic"))
    run.signal("planning (checkpoint build)", sig)
    report = assert_partial(run, signal.Signals(sig).name, kept=0)
    assert "while planning" in report["partial_reason"]
    run.assert_nothing_left()


def test_a_second_sigint_stops_at_once(tmp_path):
    # a worker deaf to SIGTERM and a grace longer than the guard: only the second SIGINT ends it
    run = fault_run(tmp_path, "hang-ignoring-sigterm", env={"PARITY_STOP_GRACE": "3600"})
    run.wait_for("the hanging case", lambda: run.log_has("fake run: ignoring SIGTERM"))
    os.kill(run.proc.pid, signal.SIGINT)
    run.wait_for("the first SIGINT's stop", lambda: "SIGINT: stopping every" in run.output())
    run.signal("a worker deaf to SIGTERM, second SIGINT", signal.SIGINT)
    assert run.proc.returncode == 130, run.output()[-3000:]
    run.assert_nothing_left()


def test_a_parent_killed_outright_leaves_no_worker(tmp_path):
    run = fault_run(tmp_path, "hang")
    run.wait_for("the hanging case", lambda: run.log_has("fake run: hang"))
    run.signal("a hanging case, SIGKILL", signal.SIGKILL)  # no handler runs: workers watch
    run.assert_nothing_left()


@pytest.mark.parametrize("sig", SIGNALS)
def test_report_writing_finishes_the_report(tmp_path, sig):
    run = fault_run(tmp_path, "echo")
    run.wait_for("the last outcome", lambda: "[4/4]" in run.output())
    run.signal("comparing and report writing", sig)
    # every result was in: the report is complete (a-echo passes, b-stage fails on its shape)
    report = run.report()
    assert not report["partial"] and len(report["results"]) == 2, report
    assert run.proc.returncode == 1, run.output()[-3000:]
    run.assert_nothing_left()


def serve_run(tmp: Path, env: dict[str, str] | None = None) -> Run:
    args = ["run", "-m", str(DATA / "serve-faults.yaml"), "-k", "srv-embed"]
    args += ["--runners", "vllm-serve-v1", "--jobs", "1", "--out", str(tmp / "out")]
    return Run(args, tmp, env)


def server_log_has(run: Run, text: str) -> bool:
    # a server logs into the run's logs/ (<runner>[.<lane>].server-<k>.log)
    for path in run.tmp.glob("out/logs/*.server-*.log"):
        if text in path.read_text(errors="replace"):
            return True
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_vllm_serve_start(tmp_path, sig):
    # the case: SIGTERM while the server starts left 5 processes (worker, API server,
    # engine core, two resource trackers); SIGKILL: no handler runs, the worker stops them
    run = serve_run(tmp_path)
    run.wait_for("the engine core's start", lambda: server_log_has(run, "(EngineCore pid="))
    run.signal("a vllm serve start", sig)
    if sig == signal.SIGTERM:
        assert_partial(run, "SIGTERM", kept=None)
    run.assert_nothing_left()


# vLLM's API server starts a helper deaf to SIGTERM (test-only, via site): a first signal's stop
# waits on it for PARITY_STOP_GRACE, so only a second SIGINT ends the run
DEAF_SERVER_HELPER = """
import subprocess, sys
with open("/proc/self/cmdline", "rb") as f:
    if b"vllm.entrypoints.openai.api_server" in f.read():
        subprocess.Popen([sys.executable, "-c", "import signal, sys, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('deaf helper ready', file=sys.stderr, flush=True); time.sleep(3600)"])
"""


def test_a_second_sigint_during_a_vllm_serve_start_leaves_nothing(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(DEAF_SERVER_HELPER)
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    run = serve_run(tmp_path, env={"PYTHONPATH": path, "PARITY_STOP_GRACE": "3600"})
    run.wait_for(  # the whole tree: API server, its deaf helper and its engine core
        "the engine core's start beside a deaf helper",
        lambda: (
            server_log_has(run, "deaf helper ready") and server_log_has(run, "(EngineCore pid=")
        ),
    )
    os.kill(run.proc.pid, signal.SIGINT)
    run.wait_for("the first SIGINT's stop", lambda: "SIGINT: stopping every" in run.output())
    run.signal("a vllm serve start, second SIGINT", signal.SIGINT)
    assert run.proc.returncode == 130, run.output()[-3000:]
    run.assert_nothing_left()  # the API server, its engine core and the deaf helper included


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_served_request(tmp_path, sig):
    run = serve_run(tmp_path)
    run.wait_for("a served request", lambda: server_log_has(run, '"POST /v1/embeddings'))
    run.signal("a served request", sig)
    assert_partial(run, signal.Signals(sig).name, kept=None)
    run.assert_nothing_left()


@pytest.mark.parametrize("sig", SIGNALS)
def test_golden_writes_finish_the_goldens(tmp_path, sig):
    golden = tmp_path / "golden"
    matrix = tmp_path / "faults.yaml"
    matrix.write_text(FAULTS.replace("BEHAVIOUR", "echo").replace("SEED", "0"))
    args = ["golden", "record", "-m", str(matrix), "--golden-dir", str(golden)]
    run = Run([*args, "--out", str(tmp_path / "out")], tmp_path)
    run.wait_for("the last reference", lambda: "[2/2]" in run.output())
    run.signal("golden writes and report writing", sig)
    # every reference was in: each golden is written whole (its manifest names its arrays)
    report = run.report()
    assert not report["partial"] and len(report["results"]) == 2, report
    for case in ("a-echo", "b-stage"):
        manifest = json.loads((golden / case / "manifest.json").read_text())
        arrays = (golden / case / manifest["arrays"]).read_bytes()
        assert hashlib.sha256(arrays).hexdigest() == manifest["arrays_sha256"], case
    run.assert_nothing_left()


def test_a_vllm_engine_load(tmp_path):
    # a real engine, in its worker process (and whatever vLLM starts beside it)
    args = ["run", "-m", "matrices/ci.yaml", "-k", "bert-tiny-mean-embed", "-r", "vllm-v1"]
    run = Run([*args, "--jobs", "1", "--out", str(tmp_path / "out")], tmp_path)
    run.wait_for("vLLM's engine load", lambda: run.log_has("Resolved architecture", "logs/vllm*"))
    run.signal("a vLLM engine load", signal.SIGTERM)
    assert_partial(run, "SIGTERM", kept=None)
    run.assert_nothing_left()


def test_parity_power_keeps_the_mutations_judged(tmp_path):
    # the catalogue runner starts a `parity run` per mutation: SIGTERM (CI's, `timeout`'s) to it
    # while the second mutation's engine loads; before it was wrapped, power died at once and the
    # run below it, its workers and engines stayed. The first mutation's verdict is kept.
    out = tmp_path / "out"
    first, second = "normalize_l1", "mean_pool_segment_overrun"  # both reach pw-bert-tiny-mean-*
    args = ["power", "-m", str(DATA / "power.yaml"), "--only", first, second, "--out", str(out)]
    run = Run(args, tmp_path)
    second_log = out / "mutations" / second / "run.log"
    run.wait_for(
        "the second mutation's engine load",
        lambda: (
            f"power: {first}: " in run.output()
            and second_log.is_file()
            and "loading" in second_log.read_text(errors="replace")
        ),
    )
    run.signal("parity power, a mutation's run", signal.SIGTERM)
    assert run.proc.returncode == 1, run.output()[-3000:]
    got = json.loads((out / "power.json").read_text())
    assert got["partial_reason"].startswith("interrupted (SIGTERM)"), got.get("partial_reason")
    status = {m["name"]: m["status"] for m in got["mutations"]}
    assert status[first] == "caught" and status[second] == "interrupted", status
    run.assert_nothing_left()
