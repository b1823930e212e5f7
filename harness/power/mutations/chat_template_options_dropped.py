"""A chat request's template options are dropped when vLLM renders its messages: no generation
prompt, the final message closed, no chat_template_kwargs (vllm/renderers/hf.py
safe_apply_chat_template, which every chat pooling request and /tokenize renders through)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.hf"
FILES = ["vllm/renderers/hf.py"]
CASES = ["serve-qwen3-tiny-chat-embed-*", "serve-qwen3-tiny-chat-classify-*"]  # template options
RUNNERS = ["vllm-serve-v1", "vllm-serve-v2"]  # offline vLLM takes no messages for pooling
MATRIX = "matrices/serve.yaml"


def apply(module):
    original = module.safe_apply_chat_template

    def safe_apply_chat_template(model_config, tokenizer, conversation, **kwargs):
        keep = ("tools", "chat_template", "tokenize", "return_dict", "tokenizer_kwargs")
        kwargs = {k: v for k, v in kwargs.items() if k in keep}
        return original(model_config, tokenizer, conversation, **kwargs)

    module.safe_apply_chat_template = safe_apply_chat_template
