"""/score on an embedding model answers the cosine distance (1 - cosine) of the two
embeddings, not their cosine similarity."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.scoring.io_processor"
FILES = ["vllm/entrypoints/pooling/scoring/io_processor.py"]
MATRIX = "matrices/serve.yaml"
# the server's front end, the same code on either model runner: one runner's rows suffice
RUNNERS = ["vllm-serve-v1"]
CASES = ["serve-bert-tiny-mean-embed-cosine-*"]


def apply(module):
    functional = module.F

    class _Functional:
        def __getattr__(self, name):
            return getattr(functional, name)

        @staticmethod
        def cosine_similarity(*args, **kwargs):
            return 1 - functional.cosine_similarity(*args, **kwargs)

    module.F = _Functional()
