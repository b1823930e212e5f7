"""ColQwen3's (Qwen3-VL's) multimodal RoPE positions computed as a text model's: every token,
image patches included, at its sequential index on all three (t, h, w) axes, instead of the
image patches on their grid and the text after an image resuming past the grid's largest index."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "multimodal routing"
REPLAYS = None
MODULE = "vllm.model_executor.models.colqwen3"
FILES = ["vllm/model_executor/models/qwen3_vl.py", "vllm/model_executor/models/colqwen3.py"]
# the ColQwen3 rows vLLM loads right; each holds page images (a text-only query's positions are
# sequential anyway)
CASES = ["colqwen3-tiny-token-embed", "colqwen3-tiny-maxsim-score"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    import torch

    def get_mrope_input_positions(self, input_tokens, mm_features):
        n = len(input_tokens)
        return torch.arange(n).expand(3, n).clone(), 0  # 1-D positions, no delta

    module.ColQwen3Model.get_mrope_input_positions = get_mrope_input_positions
