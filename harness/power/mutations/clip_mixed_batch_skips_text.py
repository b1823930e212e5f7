"""A CLIP batch holding any image skips the text encoder for its text prompts too."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = "vllm#53091"
MODULE = "vllm.model_executor.models.clip"
FILES = ["vllm/model_executor/models/clip.py"]


def apply(module):
    original = module.dual_encoder_has_text_tokens

    def dual_encoder_has_text_tokens(has_mm_embeddings, is_multimodal):
        # the pre-fix rule: any image embedding makes the whole batch vision-only
        return False if has_mm_embeddings else original(has_mm_embeddings, is_multimodal)

    module.dual_encoder_has_text_tokens = dual_encoder_has_text_tokens
