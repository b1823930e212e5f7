"""Release gating: a case whose `vllm_releases` exclude the vLLM under test is a skip, with its
reason, before any model is built or engine started; `parity select` says which."""

from pathlib import Path

import pytest

from harness.engine import target
from harness.models.resolve import ResolvedModel
from harness.run import plan as plan_mod
from harness.run.plan import ModelProblem, build_plan
from harness.runners.platform import Platform
from tests.unit.test_compare import make_case

GATE = {"specifier": "<0.29", "reason": "vLLM removed GritLM after 0.28.0 (vllm#53608)"}


@pytest.mark.parametrize(
    "version, runs",
    [
        ("0.28.0", True),
        ("0.28.0+cpu", True),  # a local label is not part of the release
        ("0.28.1", True),
        ("0.29.0", False),
        ("0.29.0.dev12+g1234abc", False),  # a checkout past 0.28 has no GritLM either
        ("0.32.0", False),
        (None, True),  # unknown: nothing to decide on; the runners say what they find
        ("not a version", True),
    ],
)
def test_a_case_runs_only_on_the_releases_it_names(version, runs):
    case = make_case(vllm_releases=GATE)
    why = case.vllm_releases.skip_reason(version)
    assert (why is None) is runs
    if not runs:
        assert why == (
            f"vLLM {version} is outside vllm_releases '<0.29': vLLM removed GritLM after 0.28.0 "
            "(vllm#53608)"
        )


def test_a_malformed_gate_is_refused_when_the_matrix_loads():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="'0.29' is not a version specifier"):
        make_case(vllm_releases={"specifier": "0.29", "reason": "x"})
    with pytest.raises(ValidationError, match="reason"):
        make_case(vllm_releases={"specifier": "<0.29"})


def test_a_gated_case_is_planned_as_a_skip_and_its_model_never_built(monkeypatch):
    built = []

    def fake_resolve(src, base):
        built.append(src.path)
        return ResolvedModel(Path(src.path), f"fp-{src.path}", src.path)

    monkeypatch.setattr(plan_mod, "resolve", fake_resolve)
    gated = make_case(id="gritlm", model={"source": "local", "path": "g"}, vllm_releases=GATE)
    other = make_case(id="bert", model={"source": "local", "path": "b"})
    plan = build_plan([gated, other], Platform("cpu"), Path("."), engine_version="0.32.0")
    assert plan.models["gritlm"] == ModelProblem(
        "skip",
        "vLLM 0.32.0 is outside vllm_releases '<0.29': vLLM removed GritLM after 0.28.0 "
        "(vllm#53608)",
    )
    assert built == ["b"]
    assert [c.id for load in plan.queues["vllm-v1"] for c in load.cases] == ["bert"]
    assert [c.id for load in plan.queues["hf"] for c in load.cases] == ["bert"]
    # on the release that has the model it is planned like any other case
    built.clear()
    plan = build_plan([gated, other], Platform("cpu"), Path("."), engine_version="0.28.0+cpu")
    assert sorted(built) == ["b", "g"] and plan.models["gritlm"].fingerprint == "fp-g"


def test_the_default_is_the_vllm_under_test(monkeypatch):
    monkeypatch.setattr(plan_mod, "resolve", lambda src, base: pytest.fail("built"))
    monkeypatch.setattr(target, "vllm_version", lambda: "0.31.0")
    gated = make_case(id="gritlm", vllm_releases=GATE)
    plan = build_plan([gated], Platform("cpu"), Path("."))
    assert plan.models["gritlm"].reason.startswith("vLLM 0.31.0 is outside")


def test_every_runner_of_a_gated_case_records_the_skip_and_none_starts(tmp_path):
    """The executor turns the plan's skip into each runner's outcome; no worker is started."""
    from harness.run.execute import Executor

    gated = make_case(id="gritlm", runners=["hf", "vllm-v1", "vllm-v2"], vllm_releases=GATE)
    plan = build_plan([gated], Platform("cpu"), Path("."), engine_version="0.32.0")
    ex = Executor(plan, tmp_path)
    outcomes = ex.run()
    assert {k: o.status for k, o in outcomes.items()} == {
        ("gritlm", "hf"): "skip",
        ("gritlm", "vllm-v1"): "skip",
        ("gritlm", "vllm-v2"): "skip",
    }
    assert all("outside vllm_releases '<0.29'" in o.reason for o in outcomes.values())
    assert ex.workers == []


def test_select_names_the_selected_cases_a_release_skips(write_matrix, monkeypatch, tmp_path):
    from harness.run.matrices import load_matrix
    from harness.select.rows import select, to_text
    from harness.select.vllm_source import VllmSource

    path = write_matrix(
        """
defaults:
  runners: [hf, vllm-v1]
  tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}}
cases:
  - id: old-only
    task: embed
    family: f
    inputs: short-texts
    model: {source: synthetic, arch: BertModel, seed: 0}
    vllm_releases: {specifier: "<0.29", reason: "gone after 0.28"}
  - id: always
    task: embed
    family: f
    inputs: short-texts
    model: {source: synthetic, arch: BertModel, seed: 1}
families: {f: {}}
"""
    )
    from tests.unit.test_select import FAKE_VLLM

    for rel, text in FAKE_VLLM.items():
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_text(text)
    source = VllmSource(tmp_path / "src")
    matrix = load_matrix(path)
    monkeypatch.setattr(target, "vllm_version", lambda: "0.32.0")
    sel = select(matrix, matrix.cases, ["csrc/x.cpp"], "vllm", source)
    assert sel.vllm_version == "0.32.0"
    assert sel.skipped == {
        "old-only": "vLLM 0.32.0 is outside vllm_releases '<0.29': gone after 0.28"
    }
    rows = sel.to_json()["rows"]
    assert {(r["case"], r.get("skip")) for r in rows} == {
        ("old-only", sel.skipped["old-only"]),
        ("always", None),
    }
    assert sel.to_json()["vllm_version"] == "0.32.0"
    assert "skipped: old-only: vLLM 0.32.0 is outside" in to_text(sel)
    monkeypatch.setattr(target, "vllm_version", lambda: "0.28.0")
    assert not select(matrix, matrix.cases, ["csrc/x.cpp"], "vllm", source).skipped


# a real bug shipped in 0.29-0.31 (fixed in 0.32), recorded as raising on the releases that had it
SHIPPED = {
    "runners": ["vllm-v1"],
    "reason": "the CPU conv kernel packs only width 4 (0.29.0-0.31.0)",
    "error_match": "support only width of 4",
    "vllm_releases": ">=0.29,<0.32",
}


@pytest.mark.parametrize(
    "version, expected",
    [("0.30.0", True), ("0.31.0+cpu", True), ("0.28.0", False), ("0.32.0", False), (None, False)],
)
def test_a_divergence_limited_to_releases_is_expected_there_and_a_failure_elsewhere(
    version, expected
):
    """On the releases that shipped the bug the error is the expected divergence (xfail); on any
    other the case is judged without it, so the bug coming back fails (here: stays an error)."""
    from harness.judge.verdict import runner_error

    case = make_case(id="lfm2", model={"source": "local", "path": "l"}, divergence=SHIPPED)
    assert case.divergence.holds_on(version) is expected
    (judged,) = plan_mod.release_divergences([case], version)
    err = "RuntimeError: causal_conv1d_weight_pack: support only width of 4"
    status = runner_error(judged, "vllm-v1", "error", f"runner raised {err}", err).status
    assert status == ("xfail" if expected else "error")
    # build_plan judges its cases that way on the vLLM it plans for
    plan = build_plan([case], Platform("cpu"), Path("."), engine_version=version)
    assert (plan.cases[0].divergence is not None) is expected
    unscoped = make_case(divergence={k: v for k, v in SHIPPED.items() if k != "vllm_releases"})
    assert plan_mod.release_divergences([unscoped], version)[0].divergence is not None


def test_a_divergence_limited_to_releases_is_asked_the_vllm_under_test(monkeypatch):
    monkeypatch.setattr(plan_mod, "resolve", lambda src, base: ResolvedModel(Path("l"), "fp", "l"))
    monkeypatch.setattr(target, "vllm_version", lambda: "0.31.0")
    plan = build_plan([make_case(divergence=SHIPPED)], Platform("cpu"), Path("."))
    assert plan.cases[0].divergence is not None
    monkeypatch.setattr(target, "vllm_version", lambda: "0.32.0")
    plan = build_plan([make_case(divergence=SHIPPED)], Platform("cpu"), Path("."))
    assert plan.cases[0].divergence is None
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="'0.32' is not a version specifier"):
        make_case(divergence={**SHIPPED, "vllm_releases": "0.32"})


# a case with a divergence of every release (here: an envelope) and a bug one release shipped
EVERY_RELEASE = {"runners": ["vllm-v1"], "reason": "preprocessing", "bounds": {"max_abs": 1e-4}}
ONE_RELEASE = {
    "runners": ["vllm-v1"],
    "reason": "items in the wrong order (0.28.0)",
    "bounds": {"max_abs": 0.1},
    "vllm_releases": "<0.29",
}


@pytest.mark.parametrize(
    "version, bound", [("0.28.0", 0.1), ("0.29.0", 1e-4), ("0.32.0", 1e-4), (None, 1e-4)]
)
def test_a_release_divergence_takes_the_place_of_the_case_divergence_on_its_releases(
    version, bound
):
    """On the releases that shipped the bug, the release's divergence is the case's; anywhere
    else the case keeps the divergence it has on every release (the bug coming back fails)."""
    from harness.judge.verdict import judge
    from harness.judge.verdict_types import Measurement, Metric

    case = make_case(divergence=EVERY_RELEASE, release_divergences=[ONE_RELEASE])
    (judged,) = plan_mod.release_divergences([case], version)
    assert judged.divergence.bounds.max_abs == bound
    measured = Measurement(metrics=[Metric("max_abs", 0.07, 1e-5)])
    assert judge(judged, "vllm-v1", measured).status == ("xfail" if bound == 0.1 else "fail")
    # with no divergence of every release, the case has none off the bug's releases
    alone = make_case(release_divergences=[ONE_RELEASE])
    (judged,) = plan_mod.release_divergences([alone], version)
    assert (judged.divergence is not None) is (bound == 0.1)
    plan = build_plan([case], Platform("cpu"), Path("."), engine_version=version)
    assert plan.cases[0].divergence.bounds.max_abs == bound


def test_a_release_divergence_without_its_releases_is_refused():
    from pydantic import ValidationError

    unscoped = {k: v for k, v in ONE_RELEASE.items() if k != "vllm_releases"}
    with pytest.raises(ValidationError, match=r"release_divergences\[0\] needs vllm_releases"):
        make_case(divergence=EVERY_RELEASE, release_divergences=[unscoped])
