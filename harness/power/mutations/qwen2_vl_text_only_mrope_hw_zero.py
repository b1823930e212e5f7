"""Qwen2-VL's multimodal RoPE positions for a prompt without images keep only the temporal axis:
the height and width axes are all 0 instead of repeating the sequential index, so every text-only
prompt is rotated as if its tokens stood at position 0 on two of the three M-RoPE sections."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = None
MODULE = "vllm.model_executor.models.qwen2_vl"
FILES = ["vllm/model_executor/models/qwen2_vl.py"]
# the GME rows holding text-only prompts (the image-only row stays green: no text-only prompt)
CASES = [
    "qwen2-vl-tiny-gme-text-embed",
    "qwen2-vl-tiny-gme-image-embed",
    "qwen2-vl-tiny-gme-mixed-embed-mrope",
]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    cls = module.Qwen2VLForConditionalGeneration
    original = cls.get_mrope_input_positions

    def get_mrope_input_positions(self, input_tokens, mm_features):
        positions, delta = original(self, input_tokens, mm_features)
        if not mm_features:
            positions = positions.clone()
            positions[1:] = 0
        return positions, delta

    cls.get_mrope_input_positions = get_mrope_input_positions
