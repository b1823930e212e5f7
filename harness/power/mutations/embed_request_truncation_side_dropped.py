"""/v1/embeddings drops a request's `truncation_side`: `truncate_prompt_tokens` always keeps the
first N tokens, so a text asked to keep its last N (left) is embedded from its start."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.embed.protocol"
FILES = ["vllm/entrypoints/pooling/embed/protocol.py"]
MATRIX = "matrices/serve.yaml"
# the server's front end, the same code on either model runner: one runner's rows suffice
RUNNERS = ["vllm-serve-v1"]
CASES = ["serve-bert-tiny-mean-embed-truncated-left*"]


def apply(module):
    import dataclasses

    cls = module.EmbeddingCompletionRequest
    original = cls.build_tok_params

    def build_tok_params(self, model_config):
        return dataclasses.replace(original(self, model_config), truncation_side=None)

    cls.build_tok_params = build_tok_params
