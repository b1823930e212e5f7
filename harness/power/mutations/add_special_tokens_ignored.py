"""A request's add_special_tokens false is ignored: every prompt is tokenised with the tokenizer's
special tokens ([CLS]/[SEP], BOS) whatever the request asked (offline tokenization_kwargs and the
server's request field alike reach TokenizeParams, whose encode arguments drop the choice)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.params"
FILES = ["vllm/renderers/params.py"]
CASES = ["bert-tiny-mean-embed-no-special-tokens"]  # the case that asks for none
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.TokenizeParams.get_encode_kwargs

    def get_encode_kwargs(self):
        return {**original(self), "add_special_tokens": True}

    module.TokenizeParams.get_encode_kwargs = get_encode_kwargs
