"""A SigLIP prompt holding a text and an image is accepted (its text silently dropped, the image
embedded) instead of refused."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = None
MODULE = "vllm.model_executor.models.siglip"
FILES = ["vllm/model_executor/models/siglip.py"]
CASES = ["siglip-tiny-text-with-image-refused"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    processor = module.SiglipMultiModalProcessor
    apply_ = processor.apply

    def apply_without_refusal(self, inputs, timing_ctx):
        if inputs.mm_data_items:
            inputs.prompt = []  # the text is dropped where vLLM refuses the mixed prompt
        return apply_(self, inputs, timing_ctx)

    processor.apply = apply_without_refusal
