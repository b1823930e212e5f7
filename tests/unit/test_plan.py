import threading
from pathlib import Path

from harness.models.resolve import ModelUnavailable, ResolvedModel
from harness.run import plan as plan_mod
from harness.run.plan import ModelProblem, build_plan
from harness.runners.platform import Platform
from tests.unit.test_compare import make_case


def test_models_are_prepared_side_by_side_and_one_broken_model_stays_local(monkeypatch):
    both_started = threading.Barrier(
        2, timeout=10
    )  # broken if the two builds ran one after the other

    def fake_resolve(src, base):
        if src.path == "missing":
            raise ModelUnavailable("not in the cache")
        if src.path == "broken":
            raise RuntimeError("build crashed")
        both_started.wait()
        return ResolvedModel(Path(src.path), f"fp-{src.path}", src.path)

    monkeypatch.setattr(plan_mod, "resolve", fake_resolve)
    monkeypatch.setattr(plan_mod.os, "cpu_count", lambda: 4)
    cases = [
        make_case(id=name, model={"source": "local", "path": path})
        for name, path in (
            ("a", "m1"),
            ("a2", "m1"),
            ("b", "m2"),
            ("c", "missing"),
            ("d", "broken"),
        )
    ]
    plan = build_plan(cases, Platform("cpu"), Path("."))
    assert plan.models["a"] is plan.models["a2"] and plan.models["a"].fingerprint == "fp-m1"
    assert plan.models["b"].fingerprint == "fp-m2"
    assert plan.models["c"] == ModelProblem("skip", "model unavailable: not in the cache")
    assert plan.models["d"] == ModelProblem("error", "model could not be prepared: build crashed")
    # one load per model and runner; the broken models get none
    assert sorted(len(load.cases) for load in plan.queues["vllm-v1"]) == [1, 2]


def _executor_with(queues: dict[str, int]):
    """An Executor's scheduling state only: n loads per runner, one case each."""
    import threading

    from harness.run.execute import Executor
    from harness.run.plan import Load

    ex = Executor.__new__(Executor)
    ex._lock = threading.Lock()
    ex._serving = {}
    ex._pending = {
        r: [Load(r, None, "float32", {}, {}, False) for _ in range(n)] for r, n in queues.items()
    }
    return ex


def test_slots_take_different_runners_so_each_runner_starts_as_few_workers_as_possible():
    ex = _executor_with({"vllm-v2": 4, "vllm-v1": 2, "vllm-auto": 1})
    assert ex._next_load(None, 0).runner == "vllm-v2"  # the most work
    assert ex._next_load(None, 1).runner == "vllm-v1"  # not the runner slot 0 serves
    assert ex._next_load("vllm-v1", 1).runner == "vllm-v1"  # a slot stays on its runner
    assert ex._next_load("vllm-v1", 1).runner == "vllm-auto"  # v1 done: an unserved runner
    taken = [ex._next_load("vllm-v2", 0).runner for _ in range(2)]
    assert taken == ["vllm-v2", "vllm-v2"]
    assert ex._next_load("vllm-auto", 1).runner == "vllm-v2"  # nothing else: join the served one
    assert ex._next_load("vllm-v2", 1) is None and ex._next_load("vllm-v2", 0) is None


def test_the_reference_runs_first_so_a_run_stopped_part_way_keeps_verdicts():
    # with the most work elsewhere, HF still comes first: a vLLM case finished before a stop is
    # judged only if HF ran it (one lane: HF, then the rest; two: HF beside the biggest)
    ex = _executor_with({"vllm-v1": 5, "vllm-serve-v1": 4, "hf": 2})
    assert ex._next_load(None, 0).runner == "hf"
    assert ex._next_load(None, 1).runner == "vllm-serve-v1"  # the most work
    assert ex._next_load("hf", 0).runner == "hf"
    assert ex._next_load("hf", 0).runner == "vllm-v1"  # HF done: the most work unserved
