"""`bytes` embeddings are written in the other byte order than the request asked for, while the
metadata header still names the order asked for."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "server encoding"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.utils"
FILES = ["vllm/entrypoints/pooling/utils.py"]
CASES = ["*-embed-bytes-*"]
MATRIX = "matrices/serve.yaml"


def apply(module):
    original = module.encode_pooling_bytes

    def encode_pooling_bytes(pooling_outputs, embed_dtype, endianness):
        other = {"little": "big", "big": "little"}.get(endianness, endianness)
        body, items = original(
            pooling_outputs=pooling_outputs, embed_dtype=embed_dtype, endianness=other
        )
        for item in items:
            item["endianness"] = endianness
        return body, items

    module.encode_pooling_bytes = encode_pooling_bytes
