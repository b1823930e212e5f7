"""A vLLM engine's construction (harness.runners.vllm, vllm_async): its kwargs (the platform's
defaults, a LoRA adapter's, the case's `engine:`), its start with the heap kept frozen, and
vLLM's "failed to be inspected" explained by its root cause."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any, Iterator

from harness.engine.target import vllm_version
from harness.runners import LoadRequest, freeze_what_is_alive


@contextmanager
def heap_kept_frozen(freeze_first: bool) -> Iterator[None]:
    """vLLM's engine start and shutdown without full collections of the worker's whole heap.

    vLLM unfreezes the garbage collector's heap and collects it in full several times per engine
    (model loader, engine-core start, shutdown: 5 collections per V1 start, 8 per V2 start, 3 per
    shutdown), each ~0.3-0.45 s over the ~800k objects torch, transformers and vLLM keep alive.
    Measured here: 1.55 of a 1.82 s V1 start and 2.65 of a 2.72 s V2 start. Before a start
    (`freeze_first`) what is alive is frozen; inside the block vLLM's own freezes and unfreezes do
    nothing, so its collections scan only this engine's objects (transient tensors are still
    freed before weight processing, as vLLM wants), and those are never frozen, so the collection
    after shutdown frees them. Collection timing changes no number an engine computes."""
    if freeze_first:
        freeze_what_is_alive()
    freeze, unfreeze = gc.freeze, gc.unfreeze
    gc.freeze = gc.unfreeze = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        gc.freeze, gc.unfreeze = freeze, unfreeze  # type: ignore[assignment]


def engine_kwargs(req: LoadRequest) -> tuple[Any, dict[str, Any]]:
    """(the KV-cache budget, the engine kwargs) of a load: the platform's defaults, seed 0, a
    LoRA adapter's kwargs, then the case's `engine:` over them."""
    from harness.runners.memory import kv_budget_of
    from harness.runners.platform import Platform

    budget = kv_budget_of(req.model_dir, req.dtype, req.engine)
    kwargs: dict[str, Any] = {
        **Platform(req.device).engine_defaults(budget.bytes),
        "seed": 0,
        **(lora_engine_kwargs(req.lora_dir) if req.lora_dir else {}),
        **req.engine,
    }
    return budget, kwargs


def lora_request(lora_dir: str | None):
    """The case's LoRARequest, sent with every request (None without an adapter)."""
    if not lora_dir:
        return None
    from vllm.lora.request import LoRARequest

    return LoRARequest("case-adapter", 1, lora_dir)


def explained_start(model_dir: str, start):
    """`start()` (an engine's construction); vLLM's "failed to be inspected" names its cause."""
    try:
        return start()
    except Exception as e:
        cause = _inspection_root_cause(model_dir) if "to be inspected" in str(e) else None
        if cause is None:
            raise
        said = next(ln.strip() for ln in str(e).splitlines() if "to be inspected" in ln)
        raise RuntimeError(f"{said} Root cause: {cause}") from e


def lora_engine_kwargs(lora_dir: str) -> dict[str, Any]:
    """The engine kwargs that serve one LoRA adapter: enable_lora, max_loras 1 and
    max_lora_rank, the smallest rank vLLM accepts (its LoRAConfig's MaxLoRARanks) that holds the
    adapter's r (its adapter_config.json). A case's `engine:` overrides them."""
    import json
    import typing
    from pathlib import Path

    r = int(json.loads((Path(lora_dir) / "adapter_config.json").read_text())["r"])
    try:
        from vllm.config.lora import MaxLoRARanks  # tested with vllm 0.32.0

        ranks = sorted(int(x) for x in typing.get_args(MaxLoRARanks))
    except ImportError:
        ranks = []
    rank = next((x for x in ranks if x >= r), r)
    return {"enable_lora": True, "max_loras": 1, "max_lora_rank": rank}


def _inspection_root_cause(model_dir: str) -> str | None:
    """vLLM inspects a model's class in a subprocess and reports only "failed to be inspected,
    check the logs". Import the module here to name the real cause (e.g. a missing package)."""
    import importlib
    import json
    from pathlib import Path

    try:
        from vllm.model_executor.models.registry import (
            _VLLM_MODELS,
        )  # private: tested with vllm 0.32.0
    except ImportError:
        return (
            f"(no root cause: vllm {vllm_version()} has no "
            "model_executor.models.registry._VLLM_MODELS)"
        )
    archs = json.loads((Path(model_dir) / "config.json").read_text()).get("architectures") or []
    for arch in archs:
        if arch in _VLLM_MODELS:
            module = f"vllm.model_executor.models.{_VLLM_MODELS[arch][0]}"
            try:
                importlib.import_module(module)
            except Exception as e:  # noqa: BLE001 - this is the diagnosis
                return f"{type(e).__name__}: {e} (importing {module} for {arch})"
    return None
