"""Bare token-id prompts (TokensPrompt, no text) get one more token in front: the renderer treats
them as text to be tokenized and prepends the tokenizer's first special id (id 0 if it has none)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.base"
FILES = ["vllm/renderers/base.py"]
# the prompt-form cases (their token-id items go red) beside a text-only twin that stays green
CASES = ["qwen3-tiny-*-prompt-forms", "qwen3-tiny-lasttoken-embed"]
RUNNERS = ["vllm-v1", "vllm-v2"]


def apply(module):
    original = module.BaseRenderer._process_tokens

    def _process_tokens(self, prompt, *args, **kwargs):
        if not prompt.get("prompt") and not prompt.get("multi_modal_data"):
            ids = list(prompt["prompt_token_ids"])
            prompt = {**prompt, "prompt_token_ids": [0, *ids]}
        return original(self, prompt, *args, **kwargs)

    module.BaseRenderer._process_tokens = _process_tokens
