"""Model Runner V2's default model state refuses prompt embeddings (decoder pooling)."""

# replays vllm#56639 (prompt embeddings crashed V2 decoder pooling)
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "engine start"
REPLAYS = "vllm#56639"
MODULE = "vllm.v1.worker.gpu.model_states.default"
FILES = ["vllm/v1/worker/gpu/model_states/default.py"]
# the prompt-form cases: decoder pooling with prompt embeddings on (V2 refuses at engine start)
CASES = ["qwen3-tiny-*-prompt-forms"]


def apply(module):
    module.DefaultModelState.supports_prompt_embeds = False
