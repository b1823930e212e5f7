"""The server's usage.prompt_tokens counts one token more per prompt than it ran."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "server encoding"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.utils"
FILES = ["vllm/entrypoints/pooling/utils.py"]
CASES = ["serve-bert-tiny-mean-embed", "serve-bert-tiny-mean-embed-truncated"]


def apply(module):
    original = module.get_pooling_usage

    def get_pooling_usage(pooling_outputs):
        usage = original(pooling_outputs)
        usage.prompt_tokens += len(pooling_outputs)
        usage.total_tokens += len(pooling_outputs)
        return usage

    module.get_pooling_usage = get_pooling_usage
