"""A control, not a bug: /v1/embeddings returns the entries of a list `input` in reverse order,
each keeping its own (right) index. The OpenAI API matches entries by `index`, so a harness that
does too stays green; one matching by position would go red. Outside the catalogue (a mutation
there must go red): run through the hook with PARITY_MUTATION_DIR=harness/power/controls
(docs/explanation/server.md, "Batched requests")."""

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
        body["data"].reverse()
        return self.json_response_cls(content=body)

    module.ServingEmbedding._openai_json_response = _openai_json_response
