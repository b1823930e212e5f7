"""Engine memory sized from the case (its model's config and engine settings), never from the host.

Without an explicit KV-cache size, vLLM's CPU worker reserves `gpu_memory_utilization x NUMA-node
memory - this process's RSS`, so the same matrix passes on one machine and is refused on one with
a smaller node, or later in a worker's life as its RSS grows. A parity run needs room for the
requests it sends, not for the host's memory: we ask for exactly that, with a margin and a floor.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import settings

MIB = 1 << 20
FLOOR_BYTES = 64 * MIB  # vLLM's own per-engine bookkeeping never needs less than this to start
MARGIN = 1.5  # partial blocks per sequence, state of non-attention layers (conv, mamba), padding
# tokens the cache must hold at once: enough to batch a case's requests, bounded so that a
# model with a long context does not ask for max_num_seqs full contexts
TOKENS_IN_FLIGHT = 16384
DEFAULT_MAX_NUM_SEQS = 256
# a context length for configs that state none (vLLM would then use its own default)
DEFAULT_CONTEXT = 2048
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "half": 2, "float": 4}
OVERRIDE_ENV = "PARITY_KV_CACHE_MIB"  # a global override, for a user whose case needs more


@dataclass(frozen=True)
class KvBudget:
    bytes: int
    tokens: int  # tokens the cache holds at once
    per_token_bytes: int
    max_model_len: int
    source: str  # how the number was reached, for the report

    def as_info(self) -> dict[str, Any]:
        return asdict(self)


def language_config(config: dict) -> dict:
    """The part of a (possibly multimodal) config that describes the attention stack."""
    candidates = [config]
    keys = ("text_config", "llm_config", "language_config", "vlm_config")
    for key in keys:
        sub = config.get(key)
        if isinstance(sub, dict):
            candidates.append(sub)
            inner = sub.get("text_config")
            if isinstance(inner, dict):
                candidates.append(inner)
    with_layers = [c for c in candidates if isinstance(c.get("num_hidden_layers"), int)]
    if not with_layers:
        raise ValueError(
            f"config has no num_hidden_layers (looked at the top level and in {', '.join(keys)})"
        )
    # a decoder's text config, where there is one, over the top level (CLIP: the text tower)
    return with_layers[-1] if len(with_layers) > 1 else with_layers[0]


def kv_budget(config: dict, dtype: str, engine: dict[str, Any]) -> KvBudget:
    """KV-cache bytes a case's engine needs: 2 (K, V) x layers x KV heads x head dim x dtype bytes
    per token, for min(max_num_seqs x max_model_len, TOKENS_IN_FLIGHT) tokens (at least one full
    context, which vLLM requires), times MARGIN, at least FLOOR_BYTES."""
    override = settings.current().kv_cache_mib
    text = language_config(config)
    max_model_len = int(
        engine.get("max_model_len")
        or text.get("max_position_embeddings")
        or config.get("max_position_embeddings")
        or DEFAULT_CONTEXT
    )
    if override is not None:
        if not override.is_integer():
            raise ValueError(f"{OVERRIDE_ENV}={override:g}: expected a whole number of MiB")
        mib = int(override)
        return KvBudget(mib * MIB, 0, 0, max_model_len, f"{OVERRIDE_ENV}={mib}")
    layers = int(text["num_hidden_layers"])
    heads = int(text.get("num_attention_heads") or 1)
    kv_heads = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or (int(text["hidden_size"]) // heads))
    per_token = (
        2 * layers * kv_heads * head_dim * DTYPE_BYTES.get(str(dtype).replace("torch.", ""), 4)
    )
    seqs = int(engine.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS)
    tokens = max(max_model_len, min(seqs * max_model_len, TOKENS_IN_FLIGHT))
    needed = math.ceil(per_token * tokens * MARGIN)
    size = max(FLOOR_BYTES, math.ceil(needed / MIB) * MIB)
    source = (
        f"{layers} layers x {kv_heads} KV heads x head dim {head_dim} x {dtype}: {per_token} "
        "B/token; "
        f"{tokens} tokens x {MARGIN} = {needed / MIB:.1f} MiB"
        + (f", floor {FLOOR_BYTES // MIB} MiB" if size == FLOOR_BYTES else "")
    )
    return KvBudget(size, tokens, per_token, max_model_len, source)


def kv_budget_of(model_dir: str, dtype: str, engine: dict[str, Any]) -> KvBudget:
    """kv_budget of the checkpoint in `model_dir` (its config.json)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return kv_budget(config, dtype, engine)


def resource_hint(error: str) -> str | None:
    """For an engine refusal about memory: what was asked, what was there, and the knob that fixes
    it. None for any other error."""
    text = error.lower()
    if not any(s in text for s in ("memory", "kv cache", "out of memory", "oom")):
        return None
    if not any(
        s in text
        for s in (
            "less than",
            "insufficient",
            "not enough",
            "out of memory",
            "larger than the maximum",
            "no available memory",
            "cannot allocate",
        )
    ):
        return None
    return (
        "a resource refusal: the engine's memory is sized per case (harness/runners/memory.py); "
        f"set `engine: {{kv_cache_memory_bytes: N}}` or `engine: "
        f"{{max_model_len: N, max_num_seqs: N}}` on the case, "
        f"or {OVERRIDE_ENV}=N for every case; on CPU the KV size must fit the NUMA node's free "
        "memory"
    )
