"""A SigLIP batch holding any image skips the text encoder for its text prompts too (the rule
vLLM fixed for CLIP in vllm#53091, replayed on SigLIP, which shares it)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = "vllm#53091"
MODULE = "vllm.model_executor.models.siglip"
FILES = ["vllm/model_executor/models/siglip.py", "vllm/model_executor/models/clip.py"]
CASES = ["siglip-tiny-text-and-image-embed"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    original = module.dual_encoder_has_text_tokens  # siglip.py imports it from clip.py by name

    def dual_encoder_has_text_tokens(has_mm_embeddings, is_multimodal):
        # the pre-fix rule: any image embedding makes the whole batch vision-only
        return False if has_mm_embeddings else original(has_mm_embeddings, is_multimodal)

    module.dual_encoder_has_text_tokens = dual_encoder_has_text_tokens
