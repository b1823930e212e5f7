import threading
from pathlib import Path

from harness import plan as plan_mod
from harness.models import ModelUnavailable, ResolvedModel
from harness.plan import ModelProblem, build_plan
from harness.platform import Platform
from tests.unit.test_compare import make_case


def test_models_are_prepared_side_by_side_and_one_broken_model_stays_local(monkeypatch):
    both_started = threading.Barrier(2, timeout=10)  # broken if the two builds ran one after the other

    def fake_resolve(src, base):
        if src.path == "missing":
            raise ModelUnavailable("not in the cache")
        if src.path == "broken":
            raise RuntimeError("build crashed")
        both_started.wait()
        return ResolvedModel(Path(src.path), f"fp-{src.path}", src.path)

    monkeypatch.setattr(plan_mod, "resolve", fake_resolve)
    monkeypatch.setattr(plan_mod.os, "cpu_count", lambda: 4)
    cases = [make_case(id=name, model={"source": "local", "path": path})
             for name, path in (("a", "m1"), ("a2", "m1"), ("b", "m2"), ("c", "missing"), ("d", "broken"))]
    plan = build_plan(cases, Platform("cpu"), Path("."))
    assert plan.models["a"] is plan.models["a2"] and plan.models["a"].fingerprint == "fp-m1"
    assert plan.models["b"].fingerprint == "fp-m2"
    assert plan.models["c"] == ModelProblem("skip", "model unavailable: not in the cache")
    assert plan.models["d"] == ModelProblem("error", "model could not be prepared: build crashed")
    # one load per model and runner; the broken models get none
    assert sorted(len(load.cases) for load in plan.queues["vllm-v1"]) == [1, 2]
