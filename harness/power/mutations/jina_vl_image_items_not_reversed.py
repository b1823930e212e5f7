"""jina-reranker-m0: a prompt's image items kept in score-input order (query first) though its
template is document-first, so an image query and an image document swap places."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = None
MODULE = "vllm.model_executor.models.jina_vl"
FILES = ["vllm/model_executor/models/jina_vl.py"]
CASES = ["jina-vl-tiny-image-query-rerank"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    processor = module.JinaVLMultiModalProcessor
    qwen2_vl = processor.__mro__[1]  # Qwen2VLMultiModalProcessor: its items in input order

    def _cached_apply_hf_processor(self, inputs, timing_ctx):
        return qwen2_vl._cached_apply_hf_processor(self, inputs, timing_ctx)

    processor._cached_apply_hf_processor = _cached_apply_hf_processor
