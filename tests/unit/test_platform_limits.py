"""What the CPU setup cannot run faithfully is decided by the platform (harness.runners.platform),
planned as a skip with its reason, and nowhere else: a GPU, and a dtype where it works, run it."""

import json

import pytest

from harness.judge.verdict import outcome_verdict
from harness.models.resolve import ResolvedModel
from harness.run import plan as plan_mod
from harness.run.plan import build_plan
from harness.runners.platform import Platform
from tests.unit.test_compare import TOL, make_case

COLQWEN3 = ["ColQwen3"]


@pytest.mark.parametrize("runner", ["vllm-v2", "vllm-auto", "vllm-serve-v2", "vllm-serve-auto"])
@pytest.mark.parametrize(
    "archs",
    [
        COLQWEN3,
        # the Qwen3-VL reranker (hf_overrides) and sequence classifier: the same vision tower;
        # measured NaN on V2 in bfloat16 at the image rows, and at a text row of the same engine
        ["Qwen3VLForSequenceClassification"],
    ],
)
def test_qwen3_vl_vision_in_bfloat16_is_a_cpu_limit_of_interpreted_triton(runner, archs):
    why = Platform("cpu").cannot_run(runner, "bfloat16", archs)
    assert why and "triton_pos_embed_interpolate" in why and "bfloat16" in why


@pytest.mark.parametrize(
    ("device", "runner", "dtype", "archs"),
    [
        ("cuda", "vllm-v2", "bfloat16", COLQWEN3),  # a GPU compiles the kernel: judged there
        ("cpu", "vllm-v1", "bfloat16", COLQWEN3),  # no Triton in V1 workers: the native path
        ("cpu", "vllm-serve-v1", "bfloat16", COLQWEN3),
        ("cpu", "hf", "bfloat16", COLQWEN3),
        ("cpu", "vllm-v2", "float16", COLQWEN3),  # the interpreter is exact there
        ("cpu", "vllm-v2", "float32", COLQWEN3),
        ("cpu", "vllm-v2", "bfloat16", ["Qwen2VLForConditionalGeneration"]),
        ("cpu", "vllm-v2", "bfloat16", []),  # an unknown architecture is run, not skipped
    ],
)
def test_everywhere_else_it_runs(device, runner, dtype, archs):
    assert Platform(device).cannot_run(runner, dtype, archs) is None


def test_interpreted_triton_is_what_the_worker_environment_sets():
    cpu = Platform("cpu")
    for runner in ("vllm-v1", "vllm-v2", "vllm-auto", "vllm-serve-v1", "vllm-serve-v2", "hf"):
        interpreted = cpu.worker_env(runner).get("TRITON_INTERPRET") == "1"
        assert interpreted == cpu.interprets_triton(runner), runner
    assert not Platform("cuda").interprets_triton("vllm-v2")


def _colqwen3_case(tmp_path, monkeypatch):
    folder = tmp_path / "colqwen3"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["ColQwen3"]}))
    monkeypatch.setattr(
        plan_mod, "resolve", lambda src, base: ResolvedModel(folder, "fp-colqwen3", "local")
    )
    return make_case(
        id="colqwen3",
        task="token_embed",
        model={"source": "local", "path": str(folder)},
        runners=["hf", "vllm-v1", "vllm-v2"],
        tolerances={"float32": TOL.model_dump(), "bfloat16": TOL.model_dump()},
    )


def test_the_plan_skips_the_limited_row_only_and_never_starts_it(tmp_path, monkeypatch):
    from harness.run.execute import Executor

    case = _colqwen3_case(tmp_path, monkeypatch)
    plan = build_plan([case], Platform("cpu"), tmp_path, dtype="bfloat16")
    assert list(plan.limits) == [("colqwen3", "vllm-v2")]
    assert "vllm-v2" not in plan.queues  # no worker, no engine start
    assert [ld.cases for ld in plan.queues["vllm-v1"]] == [[case]]
    plan.queues = {}  # run only what the plan decided before any worker (hf and V1 start none)
    got = Executor(plan, tmp_path / "run").run()
    assert list(got) == [("colqwen3", "vllm-v2")] and got[("colqwen3", "vllm-v2")].status == "skip"
    v = outcome_verdict(case, "vllm-v2", None, got[("colqwen3", "vllm-v2")], lambda: None)
    assert v.status == "skip" and "triton_pos_embed_interpolate" in v.reason
    # in float16, and on a GPU, the same row is planned and judged
    for platform, dtype in ((Platform("cpu"), "float16"), (Platform("cuda"), "bfloat16")):
        plan = build_plan([case], platform, tmp_path, dtype=dtype)
        assert plan.limits == {} and [ld.cases for ld in plan.queues["vllm-v2"]] == [[case]]


def test_a_reference_no_row_is_judged_against_is_left_out_and_reported_as_a_skip(
    tmp_path, monkeypatch
):
    from harness.run.assemble import reference_result
    from harness.run.execute import Executor

    calibrated = {**TOL.model_dump(), "k": 2.0}  # HF in float32 would run beside it
    case = make_case(
        **{
            **_colqwen3_case(tmp_path, monkeypatch).model_dump(),
            "runners": ["hf", "vllm-v2"],
            "tolerances": {"bfloat16": calibrated},
        }
    )
    plan = build_plan([case], Platform("cpu"), tmp_path, dtype="bfloat16", fp32_reference=True)
    assert plan.calibrated["colqwen3"]
    assert plan.queues == {}  # neither HF nor HF in float32: no model load for nothing
    why = plan.limits[("colqwen3", "hf")]
    assert why.startswith("not run: no row is judged against it") and "colqwen3 [vllm-v2]" in why
    assert plan.limits[("colqwen3", "hf-fp32")] == why  # an outcome for each the run counted
    got = Executor(plan, tmp_path / "run").run()
    assert sorted(got) == [("colqwen3", r) for r in ("hf", "hf-fp32", "vllm-v2")]
    ref = reference_result(case, got[("colqwen3", "hf")])
    assert ref.status == "skip" and ref.reason == why
    assert got[("colqwen3", "vllm-v2")].status == "skip"


def test_a_reference_still_runs_where_a_row_reads_it_or_it_is_what_was_asked_for(
    tmp_path, monkeypatch
):
    case = _colqwen3_case(tmp_path, monkeypatch).model_copy(update={"runners": ["hf", "vllm-v2"]})
    # a derived check of the case runs on V1, judged against the base case's reference
    variant = case.model_copy(
        update={"id": "colqwen3@check", "runners": ["vllm-v1"], "variant_of": "colqwen3"}
    )
    planned = {
        "a variant reads it": build_plan([case, variant], Platform("cpu"), tmp_path, "bfloat16"),
        # a golden recorded or verified from HF alone: no vLLM row selected
        "HF alone": build_plan([case], Platform("cpu"), tmp_path, ["hf"], "bfloat16"),
        # MTEB judges HF's own scores against the stored expected ones
        "HF judged": build_plan(
            [case], Platform("cpu"), tmp_path, dtype="bfloat16", reference_judged=True
        ),
        "on a GPU": build_plan([case], Platform("cuda"), tmp_path, dtype="bfloat16"),
    }
    for what, plan in planned.items():
        assert [ld.cases[0].id for ld in plan.queues["hf"]] == ["colqwen3"], what
        assert ("colqwen3", "hf") not in plan.limits, what


def test_the_cpu_flags_a_divergence_may_need_are_this_cpu_s_and_none_on_cuda():
    flags = Platform("cpu").cpu_flags()
    assert flags is None or ("fpu" in flags or "sse2" in flags)  # /proc/cpuinfo's flags line
    assert Platform("cuda").cpu_flags() is None
