"""Long-input chunked processing (pooler_config enable_chunked_processing) cuts the prompt into
chunks of max_model_len - 1 tokens instead of max_model_len: every chunk boundary moves."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.embed.io_processor"
FILES = ["vllm/entrypoints/pooling/embed/io_processor.py"]
CASES = ["serve-*-embed-chunked"]
MATRIX = "matrices/serve.yaml"


def apply(module):
    original = module.chunk_list

    def chunk_list(lst, chunk_size):
        return original(lst, chunk_size - 1)

    module.chunk_list = chunk_list
