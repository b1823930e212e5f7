"""GritLM's embedding averages the instruction's tokens too (its pooler finds no instruction in
the prompt and means every token, as plain mean pooling would)."""

TARGETS = ">=0.28,<0.29"  # vLLM removed GritLM after 0.28.0 (vllm#53608)
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.model_executor.models.gritlm"
FILES = ["vllm/model_executor/models/gritlm.py"]
CASES = ["gritlm-*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    def _get_instruction_len(self, prompt_token_ids):
        return 0  # the mean starts at <s>: instruction included

    module.GritLMMeanPool._get_instruction_len = _get_instruction_len
