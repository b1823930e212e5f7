"""A chat request's system message is dropped before its template renders (vllm/renderers/hf.py
safe_apply_chat_template, which every chat pooling request and /tokenize renders through)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.hf"
FILES = ["vllm/renderers/hf.py"]
CASES = ["serve-qwen3-tiny-chat-embed"]  # the chat case with a system message
RUNNERS = ["vllm-serve-v1", "vllm-serve-v2"]  # offline vLLM takes no messages for pooling
MATRIX = "matrices/serve.yaml"


def apply(module):
    original = module.safe_apply_chat_template

    def safe_apply_chat_template(model_config, tokenizer, conversation, **kwargs):
        conversation = [m for m in conversation if m.get("role") != "system"]
        return original(model_config, tokenizer, conversation, **kwargs)

    module.safe_apply_chat_template = safe_apply_chat_template
