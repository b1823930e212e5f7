"""vLLM's Qwen2-VL image processing normalises with twice the image std: every pixel value the
vision tower sees is halved (an image-path bug: text-only prompts are untouched)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = None
MODULE = "vllm.model_executor.models.qwen2_vl"
FILES = ["vllm/model_executor/models/qwen2_vl.py"]
# only the image rows of the VL reranker run images through this processor
CASES = ["jina-vl-tiny-image-rerank"]


def apply(module):
    cls = module.Qwen2VLMultiModalProcessor
    original = cls._call_hf_processor

    def _call_hf_processor(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if "pixel_values" in out:
            out["pixel_values"] = out["pixel_values"] / 2  # (x - mean) / (2 * std)
        return out

    cls._call_hf_processor = _call_hf_processor
