"""The reference: transformers / sentence-transformers, one recipe per task (and family quirk).

A recipe is how a family's output is computed in Hugging Face terms; it is the thing vLLM must
reproduce. Add a family by adding, at most, one recipe here.
"""

from __future__ import annotations

import gc
from typing import Any, Callable

import numpy as np

from harness.runners import LoadRequest

Recipe = Callable[["HFRunner", list, dict], list[np.ndarray]]
RECIPES: dict[str, Recipe] = {}
DEFAULT_RECIPE = {"embed": "st-embed"}


def recipe(name: str) -> Callable[[Recipe], Recipe]:
    def deco(fn: Recipe) -> Recipe:
        RECIPES[name] = fn
        return fn
    return deco


def _torch_dtype(dtype: str):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]


class HFRunner:
    def __init__(self, variant: str | None):
        if variant:
            raise ValueError(f"the hf runner has no variants (got {variant!r})")
        self.req: LoadRequest | None = None
        self._st = None

    def load(self, req: LoadRequest) -> dict[str, Any]:
        import sentence_transformers
        import torch
        import transformers

        self.req = req
        return {
            "actual_runner": "hf",
            "device": req.device,
            "versions": {
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "sentence-transformers": sentence_transformers.__version__,
            },
        }

    def sentence_transformer(self):
        if self._st is None:
            from sentence_transformers import SentenceTransformer

            assert self.req is not None
            self._st = SentenceTransformer(
                self.req.model_dir, device=self.req.device,
                trust_remote_code=self.req.trust_remote_code,
                model_kwargs={"dtype": _torch_dtype(self.req.dtype)},
                local_files_only=True,
            )
        return self._st

    def run(self, task: str, items: list, options: dict[str, Any]) -> list[np.ndarray]:
        name = options.get("reference") or DEFAULT_RECIPE.get(task)
        if name not in RECIPES:
            raise ValueError(f"no HF reference recipe {name!r} for task {task!r}; known: {sorted(RECIPES)}")
        return RECIPES[name](self, items, options)

    def unload(self) -> None:
        self._st = None
        self.req = None
        gc.collect()


@recipe("st-embed")
def _st_embed(runner: HFRunner, items: list, options: dict) -> list[np.ndarray]:
    """sentence-transformers encode: its own pooling and normalize modules decide the vector."""
    st = runner.sentence_transformer()
    out = st.encode(list(items), batch_size=len(items), convert_to_numpy=True, show_progress_bar=False)
    return [np.asarray(v, dtype=np.float32) for v in out]
