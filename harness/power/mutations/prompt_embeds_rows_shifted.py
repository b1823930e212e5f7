"""Prompt embeddings reach the model one row late: the engine-core request holds E rolled by one
token (row i carries row i-1's embedding), after the LLM entry point handed over the right E."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.v1.request"
FILES = ["vllm/v1/request.py"]
# the prompt-form cases (embeds items go red) beside their text-only twins, which must stay green
CASES = [
    "qwen3-tiny-*-prompt-forms",
    "qwen3-tiny-lasttoken-embed",
    "qwen3-tiny-seq-classify-3",
]
RUNNERS = ["vllm-v1", "vllm-v2"]


def apply(module):
    original = module.Request.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        embeds = getattr(self, "prompt_embeds", None)
        if embeds is not None and embeds.shape[0] > 1:
            self.prompt_embeds = embeds.roll(1, dims=0)

    module.Request.__init__ = __init__
