"""vLLM cuts a cross-encoder pair with truncation_side left as HF's tokenizer does
(truncation_side="left", truncation=True, max_length=N: longest_first, from the left inside the
longer text, [CLS] and [SEP] kept) instead of its documented rule (the last N tokens of the whole
encoded pair). The recorded divergence of
bert-tiny-cross-encoder-score-truncated-left-hf-tokenizer then xpasses: its mark must go.

vLLM's tokenizer is a TokenizerPool (vllm/tokenizers/hf.py): every call runs on a deep copy, so
setting truncation_side on the instance the scoring processor holds does not reach the call;
this patches the transformers class's set_truncation_and_padding, for the pair encodings of
this render only."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.scoring.io_processor"
FILES = ["vllm/entrypoints/pooling/scoring/io_processor.py"]
CASES = ["bert-tiny-cross-encoder-score-truncated-left*"]
RUNNERS = ["vllm-v1", "vllm-v2"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    import threading

    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    left = threading.local()  # set while a left-truncated pair is encoded on this thread
    set_truncation = TokenizersBackend.set_truncation_and_padding

    def set_truncation_and_padding(self, *args, **kwargs):
        if not getattr(left, "on", False):
            return set_truncation(self, *args, **kwargs)
        side, self.truncation_side = self.truncation_side, "left"
        try:
            return set_truncation(self, *args, **kwargs)
        finally:
            self.truncation_side = side

    TokenizersBackend.set_truncation_and_padding = set_truncation_and_padding

    cls = module.CrossEncoderIOProcessor
    original = cls.render

    def render(self, render_params):
        tp = render_params["tok_params"]
        keep = tp.truncate_prompt_tokens
        if tp.truncation_side != "left" or keep is None or keep < 0:
            return original(self, render_params)
        score_prompt = self.get_score_prompt

        def get_score_prompt(*args, encode_kwargs, **kwargs):
            kw = {**encode_kwargs, "truncation": True, "max_length": keep}
            left.on = True
            try:
                return score_prompt(*args, encode_kwargs=kw, **kwargs)
            finally:
                left.on = False

        self.get_score_prompt = get_score_prompt
        try:
            return original(self, render_params)
        finally:
            del self.get_score_prompt

    cls.render = render
