"""LLM.embed with pooler_config enable_chunked_processing silently cuts a prompt over
max_model_len to max_model_len instead of refusing it (neither chunks nor refuses)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.params"
FILES = ["vllm/renderers/params.py"]
CASES = ["*-embed-chunked-offline"]
RUNNERS = ["vllm-v1", "vllm-v2"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    params = module.TokenizeParams

    def _text_len_check(self, tokenizer, text):
        return text

    def _token_len_check(self, tokenizer, tokens):
        most = self.max_input_tokens
        return tokens[:most] if most is not None and len(tokens) > most else tokens

    params._text_len_check = _text_len_check
    params._token_len_check = _token_len_check
