"""Prompts are tokenised without the tokenizer's special tokens ([CLS]/[SEP], BOS)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.params"
FILES = ["vllm/renderers/params.py"]
CASES = ["bert-tiny-mean-embed", "bert-tiny-cross-encoder-score", "serve-bert-tiny-mean-embed"]


def apply(module):
    original = module.TokenizeParams.get_encode_kwargs

    def get_encode_kwargs(self):
        return {**original(self), "add_special_tokens": False}

    module.TokenizeParams.get_encode_kwargs = get_encode_kwargs
