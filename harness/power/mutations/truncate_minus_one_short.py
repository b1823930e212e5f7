"""truncate_prompt_tokens=-1 truncates pooling prompts one token short of max_model_len (the
generate budget's reserved output token applied to pooling requests)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.params"
FILES = ["vllm/renderers/params.py"]
CASES = ["*minus-one*"]


def apply(module):
    def max_truncation_tokens(self):
        most = self.max_input_tokens
        return None if most is None else max(0, most - 1)

    module.TokenizeParams.max_truncation_tokens = property(max_truncation_tokens)
