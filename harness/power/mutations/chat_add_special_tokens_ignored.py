"""A chat pooling request's add_special_tokens is ignored: the rendered conversation is always
tokenized without the tokenizer's own special tokens (the chat requests' build_tok_params of
/v1/embeddings, /classify and /pooling; /tokenize keeps it)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.base.protocol"
FILES = ["vllm/entrypoints/pooling/base/protocol.py"]
CASES = ["serve-*-chat-*-special-tokens"]  # the chat case that asks for special tokens
RUNNERS = ["vllm-serve-v1", "vllm-serve-v2"]  # offline vLLM takes no messages for pooling
MATRIX = "matrices/serve.yaml"


def apply(module):
    mixin = module.ChatRequestOptionsMixin
    for cls in (module.FixedMaxLenTokenizeParamsMixin, module.EmbeddingTokenizeParamsMixin):
        original = cls.build_tok_params

        def build_tok_params(self, model_config, _original=original):
            if isinstance(self, mixin) and self.add_special_tokens:
                self = self.model_copy(update={"add_special_tokens": False})
            return _original(self, model_config)

        cls.build_tok_params = build_tok_params
