"""A prompt over the model's maximum, or a truncate_prompt_tokens beyond it, is silently cut to the
maximum instead of refused."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.params"
FILES = ["vllm/renderers/params.py"]
CASES = ["*refused*"]


def apply(module):
    params = module.TokenizeParams
    post_init = params.__post_init__

    def __post_init__(self):
        most = self.max_input_tokens
        if most is not None and (self.truncate_prompt_tokens or 0) > most:
            object.__setattr__(self, "truncate_prompt_tokens", most)  # frozen dataclass
        post_init(self)

    def _text_len_check(self, tokenizer, text):
        return text

    def _token_len_check(self, tokenizer, tokens):
        most = self.max_input_tokens
        return tokens[:most] if most is not None and len(tokens) > most else tokens

    params.__post_init__ = __post_init__
    params._text_len_check = _text_len_check
    params._token_len_check = _token_len_check
