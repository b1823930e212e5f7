"""Model Runner V2's default model state refuses prompt embeddings (decoder pooling)."""

# replays vllm#56639 (prompt embeddings crashed V2 decoder pooling)
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "engine start"
REPLAYS = "vllm#56639"
MODULE = "vllm.v1.worker.gpu.model_states.default"
FILES = ["vllm/v1/worker/gpu/model_states/default.py"]
CASES = ["qwen3-tiny-lasttoken-embed*"]  # decoder pooling: where prompt embeddings would go


def apply(module):
    module.DefaultModelState.supports_prompt_embeds = False
