"""The server's /pooling chat request drops its template options on the way to the renderer: no
generation prompt, the final message closed, no chat_template_kwargs (PoolingChatRequest's
build_chat_params; /v1/embeddings, /classify and /tokenize keep theirs)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.pooling.protocol"
FILES = ["vllm/entrypoints/pooling/pooling/protocol.py"]
CASES = ["serve-*-pooling-chat-*"]  # the chat cases sent to /pooling
RUNNERS = ["vllm-serve-v1", "vllm-serve-v2"]  # offline vLLM takes no messages for pooling
MATRIX = "matrices/serve.yaml"


def apply(module):
    cls = module.PoolingChatRequest
    original = cls.build_chat_params

    def build_chat_params(self, *args, **kwargs):
        dropped = self.model_copy(
            update={
                "add_generation_prompt": False,
                "continue_final_message": False,
                "chat_template_kwargs": None,
            }
        )
        return original(dropped, *args, **kwargs)

    cls.build_chat_params = build_chat_params
