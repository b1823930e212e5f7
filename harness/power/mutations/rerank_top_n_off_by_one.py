"""/rerank with top_n returns one result more than asked for."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "server encoding"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.scoring.serving"
FILES = ["vllm/entrypoints/pooling/scoring/serving.py"]
CASES = ["serve-*rerank*"]


def apply(module):
    original = module.ServingScores._request_output_to_rerank_response

    def _request_output_to_rerank_response(
        self, final_res_batch, request_id, model_name, documents, top_n, num_prompt_tokens
    ):
        return original(
            self, final_res_batch, request_id, model_name, documents, top_n + 1, num_prompt_tokens
        )

    module.ServingScores._request_output_to_rerank_response = _request_output_to_rerank_response
