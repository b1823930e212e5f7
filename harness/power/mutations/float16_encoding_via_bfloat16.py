"""float16 embeddings (base64 and bytes) are rounded through bfloat16 first: valid float16 bytes,
holding only bfloat16's 8 bits of precision."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "server encoding"
REPLAYS = None
MODULE = "vllm.utils.serial_utils"
FILES = ["vllm/utils/serial_utils.py"]
CASES = ["*-float16*"]  # the float16 encoding cases (not bfloat16: its ids say "-bfloat16")
MATRIX = "matrices/serve.yaml"


def apply(module):
    import torch

    original = module.tensor2binary

    def tensor2binary(tensor, embed_dtype, endianness):
        if embed_dtype == "float16":
            tensor = tensor.to(torch.bfloat16).to(torch.float32)
        return original(tensor, embed_dtype, endianness)

    module.tensor2binary = tensor2binary
