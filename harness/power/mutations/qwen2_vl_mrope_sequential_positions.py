"""Qwen2-VL's multimodal RoPE positions computed as a text model's: every token, image patches
included, at its sequential index on all three (t, h, w) axes, instead of the image patches on
their grid and the text after an image resuming past the grid's largest index."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = None
MODULE = "vllm.model_executor.models.qwen2_vl"
FILES = ["vllm/model_executor/models/qwen2_vl.py"]
# the Qwen2-VL embedder's rows (every prompt holds an image: a page, or a query's dummy image)
CASES = ["qwen2-vl-tiny-dse-embed"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    import torch

    def get_mrope_input_positions(self, input_tokens, mm_features):
        n = len(input_tokens)
        return torch.arange(n).expand(3, n).clone(), 0  # 1-D positions, no delta

    module.Qwen2VLForConditionalGeneration.get_mrope_input_positions = get_mrope_input_positions
