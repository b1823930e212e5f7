"""A pooling model's head runs in the model dtype whatever the setting: vLLM's float32 head
(its default for pooling models, or `hf_overrides {"head_dtype": "float32"}`) is dropped, so a
bfloat16 model's classifier rounds its logits to bfloat16."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.config.model"
FILES = ["vllm/config/model.py"]
CASES = ["*-fp32-head*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    def head_dtype_of_the_model(config, dtype, runner_type):
        return dtype

    module._get_head_dtype = head_dtype_of_the_model
