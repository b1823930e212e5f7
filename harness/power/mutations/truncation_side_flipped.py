"""Prompt truncation keeps the last tokens instead of the first (truncation side flipped)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.params"
FILES = ["vllm/renderers/params.py"]
# the truncated cases whose reference truncates as vLLM documents; not the recorded divergence
# bert-tiny-cross-encoder-score-truncated-left-hf-tokenizer (its wide envelope holds a flip)
CASES = ["*-truncated", "*-truncated-left", "*-truncated-at-max-len", "*-truncated-minus-one"]


def apply(module):
    encode_kwargs = module.TokenizeParams.get_encode_kwargs
    truncation_slice = module.TokenizeParams._truncation_slice

    def get_encode_kwargs(self):
        kw = encode_kwargs(self)
        if self.truncate_prompt_tokens is not None:  # full sequence: cut below, on the wrong side
            kw = {**kw, "truncation": False}
            kw.pop("max_length", None)
        return kw

    def _truncation_slice(self, tokenizer, length):
        cut = truncation_slice(self, tokenizer, length)
        if cut is not None and cut.start == 0 and cut.stop:
            return slice(-cut.stop, None)
        return cut

    module.TokenizeParams.get_encode_kwargs = get_encode_kwargs
    module.TokenizeParams._truncation_slice = _truncation_slice
