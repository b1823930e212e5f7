"""What a vLLM engine's load reports (harness.runners.vllm, vllm_async): the model runner that
really ran, read from the engine and never from the config flag, and why vLLM chose it; the
effective config; the KV budget; versions."""

from __future__ import annotations

import enum
import os
from typing import Any

from harness.engine.target import vllm_version
from harness.runners import LoadRequest


def _runner_of_worker(worker) -> list[str]:
    """Run inside vLLM's worker (collective_rpc): the module of each class of its model runner."""
    mr = getattr(worker, "model_runner", None) or worker.worker.model_runner
    cls = type(mr)
    return [f"{cls.__module__}.{cls.__qualname__}", *{c.__module__ for c in cls.__mro__}]


def _runner_from_modules(cls: str, mods: set[str]) -> str:
    if "vllm.v1.worker.gpu.model_runner" in mods:
        return "v2"
    if "vllm.v1.worker.gpu_model_runner" in mods:
        return "v1"
    return "unknown"


def _actual_runner(llm) -> tuple[str, str]:
    """('v1'|'v2'|'unknown', evidence), read from the engine's model runner class: in this
    process when the engine core lives here, else asked of vLLM's workers (collective_rpc, as
    on GPU where the engine core has its own process). Never the config flag: a runner not read
    from the engine is 'unknown', and the verdict says so."""
    try:
        core = llm.llm_engine.engine_core.engine_core
        mr = core.model_executor.driver_worker.worker.model_runner
        cls = f"{type(mr).__module__}.{type(mr).__qualname__}"
        mods = {c.__module__ for c in type(mr).__mro__}
        return _runner_from_modules(cls, mods), f"model runner class {cls}"
    except AttributeError:
        pass
    try:
        answers = llm.collective_rpc(_runner_of_worker)
    except Exception as e:  # noqa: BLE001 - the evidence is what failed
        return "unknown", (
            "unproven: the model runner could not be read from the engine "
            f"({type(e).__name__}: {e})"
        )
    kinds = {_runner_from_modules(a[0], set(a[1:])) for a in answers}
    classes = sorted({a[0] for a in answers})
    if len(kinds) != 1:
        return "unknown", f"unproven: the workers' model runners disagree: {classes}"
    return kinds.pop(), f"model runner class {', '.join(classes)} (asked of vLLM's workers)"


def _effective_config(llm) -> dict[str, Any]:
    """What the engine really runs with (a kwarg may be overridden or ignored for a model)."""
    cfg = llm.llm_engine.vllm_config
    out: dict[str, Any] = {}
    for name, obj, attr in (
        ("enable_chunked_prefill", cfg.scheduler_config, "enable_chunked_prefill"),
        ("max_num_batched_tokens", cfg.scheduler_config, "max_num_batched_tokens"),
        ("enable_prefix_caching", cfg.cache_config, "enable_prefix_caching"),
        ("max_model_len", cfg.model_config, "max_model_len"),
        ("kv_cache_memory_bytes", cfg.cache_config, "kv_cache_memory_bytes"),
        ("num_kv_blocks", cfg.cache_config, "num_gpu_blocks"),
        ("block_size", cfg.cache_config, "block_size"),
        ("max_num_seqs", cfg.scheduler_config, "max_num_seqs"),
        ("dtype", cfg.model_config, "dtype"),
        ("async_scheduling", cfg.scheduler_config, "async_scheduling"),
        ("enforce_eager", cfg.model_config, "enforce_eager"),
        ("compilation_mode", cfg.compilation_config, "mode"),
        ("compilation_backend", cfg.compilation_config, "backend"),
        ("tensor_parallel_size", cfg.parallel_config, "tensor_parallel_size"),
        ("pipeline_parallel_size", cfg.parallel_config, "pipeline_parallel_size"),
    ):
        value = getattr(obj, attr, None)
        if isinstance(value, enum.Enum):  # e.g. CompilationMode.NONE: its name, not its number
            value = value.name
        out[name] = value if isinstance(value, (bool, int, float, str, type(None))) else str(value)
    return out


def _why_runner(llm, actual: str) -> str:
    """Why vLLM ended up on this runner, following its own decision in VllmConfig."""
    forced = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    if forced is not None:
        return f"forced by VLLM_USE_V2_MODEL_RUNNER={forced}"
    try:
        from vllm.triton_utils.importing import HAS_TRITON
    except ImportError:
        HAS_TRITON = None
    if HAS_TRITON is False:
        return "vLLM's choice: Triton unavailable, so Model Runner V2 is off"
    cfg = llm.llm_engine.vllm_config
    probe = getattr(cfg, "_get_v2_model_runner_unsupported_features", None)
    if probe is None:  # a private vLLM API this explanation relies on (tested with vllm 0.32.0)
        return (
            f"vLLM's choice: {actual.upper()}; why is unknown: "
            "VllmConfig._get_v2_model_runner_unsupported_features "
            f"is gone in vllm {vllm_version()} (the harness was written against 0.32.0)"
        )
    unsupported = probe()
    if unsupported:
        return f"vLLM's choice: V2 does not support {', '.join(unsupported)}"
    default_v2 = getattr(cfg, "_is_default_v2_model_runner_model", None)  # vllm <= 0.30
    if default_v2 is not None and not default_v2():
        return (
            f"vLLM's choice: vllm {vllm_version()} keeps V2 for its default-V2 generate "
            "models (VllmConfig._is_default_v2_model_runner_model is false here) -> "
            f"{actual.upper()}"
        )
    how = (
        " (Triton via the interpreter backend)" if os.environ.get("TRITON_INTERPRET") == "1" else ""
    )
    return f"vLLM's choice: Triton present{how}, no V2-unsupported feature -> {actual.upper()}"


def load_info(llm, trace, req: LoadRequest, kwargs: dict, budget) -> dict[str, Any]:
    """What a load reports: the model runner that really ran and why, the effective config,
    the engine trace, the KV budget, versions. `llm` is vllm.LLM or anything with its
    `llm_engine.vllm_config` and `collective_rpc` (the AsyncLLM runner's view)."""
    import torch
    import transformers
    import vllm

    from harness.engine.target import vllm_provenance

    actual, evidence = _actual_runner(llm)
    return {
        "actual_runner": actual,
        "runner_evidence": evidence,
        "runner_proven": actual != "unknown",  # read from the engine's model runner class
        "runner_choice": _why_runner(llm, actual),
        "effective": _effective_config(llm),
        "engine_trace": trace.as_info(),
        "device": req.device,
        "engine_kwargs": {k: v for k, v in kwargs.items()},
        **({"lora_adapter": req.lora_dir} if req.lora_dir else {}),
        "kv_budget": {
            **budget.as_info(),
            "overridden_by_case": "kv_cache_memory_bytes" in req.engine,
        },
        "triton_interpreted": os.environ.get("TRITON_INTERPRET") == "1",
        "vllm": vllm_provenance(),  # release, or a checkout's commit and tree state
        "versions": {
            "vllm": vllm.__version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
    }
