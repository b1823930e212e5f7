"""The server's late-interaction scorer swaps query and document: the sum over document tokens
of the best match among query tokens, not over query tokens of the best document token."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.v1.pool.late_interaction_runner"
FILES = ["vllm/v1/pool/late_interaction_runner.py"]
MATRIX = "matrices/serve.yaml"
# the server's flash late-interaction path (offline LLM.score scores in its IO processor):
# the same code on either model runner, one runner's rows suffice
RUNNERS = ["vllm-serve-v1"]
CASES = ["serve-colbert-bert-tiny-maxsim-*"]


def apply(module):
    original = module.compute_maxsim_score_batched

    def compute_maxsim_score_batched(q_embs, d_embs, *args, **kwargs):
        return original(d_embs, q_embs, *args, **kwargs)

    module.compute_maxsim_score_batched = compute_maxsim_score_batched
