"""/v1/embeddings labels the entries of a list `input` with reversed indexes (item k's embedding
says index n-1-k), in the order of the inputs: a client matching by position sees nothing."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.embed.serving"
FILES = ["vllm/entrypoints/pooling/embed/serving.py"]
# the server's front end, the same code on either model runner: one runner's rows suffice
RUNNERS = ["vllm-serve-v1"]
CASES = ["serve-bert-tiny-mean-embed"]


def apply(module):
    import json

    original = module.ServingEmbedding._openai_json_response

    def _openai_json_response(self, final_res_batch, *args, **kwargs):
        response = original(self, final_res_batch, *args, **kwargs)
        body = json.loads(response.body)
        n = len(body["data"])
        for entry in body["data"]:
            entry["index"] = n - 1 - entry["index"]
        return self.json_response_cls(content=body)

    module.ServingEmbedding._openai_json_response = _openai_json_response
