"""A score request's chat_template_kwargs never reach the score template: the template renders
its defaults (Qwen3-VL-Reranker's default instruction) whatever the request asked."""

# vllm#42412 (merged 2026-05-12; the report, vllm#42391): the field was not declared on the
# scoring requests, so validation stripped it, and get_score_prompt had no parameter to carry
# it to the template. 0.32 threads it through get_score_prompt from the request (a server) and
# from PoolingParams.extra_kwargs (offline); this drops it there again, for both.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = "vllm#42412"
MODULE = "vllm.entrypoints.pooling.scoring.io_processor"
FILES = ["vllm/entrypoints/pooling/scoring/io_processor.py"]
CASES = ["qwen3-vl-tiny-reranker-text-score-instruction"]  # an instruction per request
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    cls = module.CrossEncoderIOProcessor
    original = cls.get_score_prompt

    def get_score_prompt(self, *args, **kwargs):
        kwargs["chat_template_kwargs"] = None
        return original(self, *args, **kwargs)

    cls.get_score_prompt = get_score_prompt
