"""base64 embeddings are written as float16 whatever embed_dtype the request asked for."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "server encoding"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.utils"
FILES = ["vllm/entrypoints/pooling/utils.py"]
CASES = ["*base64*"]


def apply(module):
    original = module.encode_pooling_output_base64

    def encode_pooling_output_base64(output, embed_dtype, endianness):
        return original(output, "float16", endianness)

    module.encode_pooling_output_base64 = encode_pooling_output_base64
