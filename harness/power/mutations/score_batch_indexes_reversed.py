"""/score labels the pairs of a request of several (1:N or N:N) with reversed indexes (pair k's
score says index n-1-k), listed in order: a client matching by position sees nothing."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.scoring.serving"
FILES = ["vllm/entrypoints/pooling/scoring/serving.py"]
# the server's front end, the same code on either model runner: one runner's rows suffice
RUNNERS = ["vllm-serve-v1"]
CASES = ["serve-bert-tiny-cross-encoder-score"]


def apply(module):
    import json

    original = module.ServingScores._request_output_to_score_response

    def _request_output_to_score_response(self, final_res_batch, *args, **kwargs):
        response = original(self, final_res_batch, *args, **kwargs)
        body = json.loads(response.body)
        n = len(body["data"])
        for entry in body["data"]:
            entry["index"] = n - 1 - entry["index"]
        return module.JSONResponse(content=body)

    module.ServingScores._request_output_to_score_response = _request_output_to_score_response
