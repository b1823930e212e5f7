"""/classify labels the entries of a list `input` with reversed indexes (item k's probabilities
say index n-1-k), in the order of the inputs: a client matching by position sees nothing."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.classify.serving"
FILES = ["vllm/entrypoints/pooling/classify/serving.py"]
# the server's front end, the same code on either model runner: one runner's rows suffice
RUNNERS = ["vllm-serve-v1"]
CASES = ["serve-bert-tiny-cross-encoder-classify"]


def apply(module):
    import json

    original = module.ServingClassification._build_response

    def _build_response(self, ctx):
        response = original(self, ctx)
        body = json.loads(response.body)
        n = len(body["data"])
        for entry in body["data"]:
            entry["index"] = n - 1 - entry["index"]
        return module.JSONResponse(content=body)

    module.ServingClassification._build_response = _build_response
