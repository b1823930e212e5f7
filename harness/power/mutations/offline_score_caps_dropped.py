"""LLM.score drops max_tokens_per_query / max_tokens_per_doc given offline (PoolingParams
extra_kwargs): the texts are paired uncut, as if only the /score and /rerank request fields
were read."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.scoring.io_processor"
FILES = ["vllm/entrypoints/pooling/scoring/io_processor.py"]
CASES = ["*-capped-offline"]
RUNNERS = ["vllm-v1", "vllm-v2"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    cls = module.ScoringIOProcessor
    original = cls._get_token_limits

    def _get_token_limits(self, request=None, pooling_params=None):
        if request is None:
            return 0, 0
        return original(self, request=request, pooling_params=pooling_params)

    cls._get_token_limits = _get_token_limits
