"""Text prompts get the model's sentence-transformers default prompt prepended (vLLM 0.32 never
applies config_sentence_transformers.json's default_prompt_name; this makes it do so): the ids
then agree with encode()'s, so the recorded token-id divergence must turn xpass."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.base"
FILES = ["vllm/renderers/base.py"]
CASES = ["bert-tiny-st-default-prompt-embed"]  # the recorded divergence of token ids
RUNNERS = ["vllm-v1", "vllm-v2"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    import json
    import os

    original = module.BaseRenderer._tokenize_prompt

    def _tokenize_prompt(self, prompt, params):
        path = os.path.join(str(self.model_config.model), "config_sentence_transformers.json")
        try:
            with open(path) as f:
                cfg = json.load(f)
        except OSError:
            return original(self, prompt, params)
        default = (cfg.get("prompts") or {}).get(cfg.get("default_prompt_name") or "", "")
        if default:
            prompt = {**prompt, "prompt": default + prompt["prompt"]}
        return original(self, prompt, params)

    module.BaseRenderer._tokenize_prompt = _tokenize_prompt
