"""/score and /rerank keep one document token more than max_tokens_per_doc asks for."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.scoring.io_processor"
FILES = ["vllm/entrypoints/pooling/scoring/io_processor.py"]
CASES = ["*-capped"]
MATRIX = "matrices/serve.yaml"


def apply(module):
    cls = module.CrossEncoderIOProcessor
    original = cls.get_score_prompt

    def get_score_prompt(self, *args, max_tokens_per_doc=0, **kwargs):
        if max_tokens_per_doc > 0:
            max_tokens_per_doc += 1
        return original(self, *args, max_tokens_per_doc=max_tokens_per_doc, **kwargs)

    cls.get_score_prompt = get_score_prompt
