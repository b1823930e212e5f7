"""ColQwen3's per-token projection `custom_text_proj` is not applied: the backbone's hidden
states are L2-normalised and returned as they are (hidden-size vectors, not the 320-wide
late-interaction space)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.colqwen3"
FILES = ["vllm/model_executor/models/colqwen3.py"]
# the ColQwen3 rows that vLLM loads right (the projection-bias divergences are recorded apart)
CASES = ["colqwen3-tiny-token-embed", "colqwen3-tiny-maxsim-score"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    original = module.ColQwen3Model.forward

    def forward(self, *args, **kwargs):
        projection, self.custom_text_proj = self.custom_text_proj, None
        try:
            return original(self, *args, **kwargs)
        finally:
            self.custom_text_proj = projection

    module.ColQwen3Model.forward = forward
