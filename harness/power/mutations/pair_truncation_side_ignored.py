"""A cross-encoder pair's requested truncation_side is ignored: the tokenizer truncates it
(truncation=True, max_length=N: longest_first on the tokenizer's own side, right here, special
tokens kept) instead of vLLM's rule (the last N tokens of the whole encoded pair for `left`)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.scoring.io_processor"
FILES = ["vllm/entrypoints/pooling/scoring/io_processor.py"]
CASES = ["bert-tiny-cross-encoder-score-truncated-left*"]  # vLLM's rule and the HF record
RUNNERS = ["vllm-v1", "vllm-v2"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    cls = module.CrossEncoderIOProcessor
    original = cls.render

    def render(self, render_params):
        tp = render_params["tok_params"]
        keep = tp.truncate_prompt_tokens
        if tp.truncation_side is None or keep is None or keep < 0:
            return original(self, render_params)
        score_prompt = self.get_score_prompt

        def get_score_prompt(*args, encode_kwargs, **kwargs):
            kw = {**encode_kwargs, "truncation": True, "max_length": keep}
            return score_prompt(*args, encode_kwargs=kw, **kwargs)

        self.get_score_prompt = get_score_prompt
        try:
            return original(self, render_params)
        finally:
            del self.get_score_prompt

    cls.render = render
