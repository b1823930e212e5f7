"""The rules for a changed vLLM file: the cases and rows it can affect, as vLLM's source says.

A model file selects the cases whose architecture's module imports it (or the pooler that does);
models/config.py the cases vLLM applies a config fix to; pooler files the cases of their pooling
level; runner code the rows of its model runner; entrypoints the offline or server rows of their
API. A vLLM file no rule knows selects every vLLM row.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.select.facts import (
    ADAPTERS,
    ENTRYPOINTS,
    WORKER,
    Context,
    Effect,
    Rows,
)
from harness.select.vllm_source import CONFIG_MAP_FILE, MODELS_DIR, REGISTRY

V2_PACKAGES = (f"{WORKER}gpu/", f"{WORKER}cpu/")  # Model Runner V2 (GPU, and its CPU subclass)
POOLER = "vllm/model_executor/layers/pooler"
API_WORDS = {
    "embed": {"embed", "embedding", "embeddings"},
    "classify": {"classify", "classification"},
    "score": {"score", "scoring", "rerank"},
    "pooling": {"pooling"},
}


def _api_of_entrypoint(path: str) -> str | None:
    """The one pooling API an entrypoint file serves (`pooling/scoring/...`, `serving_score.py`)."""
    rest = path[len(ENTRYPOINTS) :]
    sub = rest[len("pooling/") :].split("/")[0] if rest.startswith("pooling/") else Path(rest).stem
    words = set(re.split(r"[_./]", sub))
    apis = [api for api, ws in API_WORDS.items() if words & ws]
    return apis[0] if len(apis) == 1 else None


def vllm_effect(path: str, ctx: Context) -> Effect:
    every = lambda rule, why: Effect(path, rule, why, None, "vllm")  # noqa: E731
    if path in (REGISTRY, f"{MODELS_DIR}/__init__.py"):
        return every("model-registry", "vLLM's model registry: every architecture")
    if path.startswith(MODELS_DIR + "/"):
        return _model_file_effect(path, ctx)
    if path.startswith(POOLER):
        if "/seqwise/" in path:
            return Effect(
                path,
                "pooler",
                "sequence-level pooler: embed, classify, cross-encoder score",
                ctx.ids(lambda c, f: not f.token_level),
            )
        if "/tokwise/" in path:
            return Effect(
                path,
                "pooler",
                "token-level pooler: token_embed, token_classify, reward, MaxSim score",
                ctx.ids(lambda c, f: f.token_level),
            )
        return every("pooler", "task-generic pooler code: every pooling case")
    if path.startswith("vllm/v1/pool/") and ("late_interaction" in path or "maxsim" in path):
        return Effect(
            path,
            "pooler",
            "late-interaction (MaxSim) scoring",
            ctx.ids(lambda c, f: f.late_interaction),
        )
    if path in (
        "vllm/pooling_params.py",
        "vllm/tasks.py",
        "vllm/config/pooler.py",
    ) or path.startswith("vllm/v1/pool/"):
        return every("pooling", "task-generic pooling module: every pooling case")
    if path.startswith(WORKER):
        return _worker_effect(path, ctx)
    if path.startswith(ENTRYPOINTS):
        return _entrypoint_effect(path, ctx)
    return every("unknown", "no narrower rule for this vLLM file: every vLLM row (conservative)")


def _model_file_effect(path: str, ctx: Context) -> Effect:
    """A file of vLLM's models package: the cases whose architecture's module imports it."""
    src, known = ctx.source, ctx.source.exists(path)
    every = lambda rule, why: Effect(path, rule, why, None, "vllm")  # noqa: E731
    if not known:
        return every(
            "model",
            f"not in the vLLM source read ({src.root}): cannot tell which architectures "
            "import it, so every case",
        )
    if path == CONFIG_MAP_FILE:
        return _config_map_effect(path, ctx)
    if not src.reached_from_registry(path, [ADAPTERS]):
        return every(
            "model",
            "no registered architecture's module imports it: vLLM reads it "
            "by name elsewhere, so every case (conservative)",
        )
    cases = ctx.ids(lambda c, f: f.model_files is None or path in f.model_files)
    unknown = sorted(ctx.ids(lambda c, f: f.model_files is None))
    used = sorted({ctx.facts[c].arch or "?" for c in cases})
    why = (
        f"imported by the vLLM module of {', '.join(used)}"
        if used
        else "the vLLM module of no case's architecture imports it"
    )
    pooled, poolers = _pooler_importers(path, ctx)
    if poolers:  # e.g. adapters.py's _load_st_projector, the ST Dense of every embed model
        cases = cases | pooled
        why += f"; imported by the pooler ({', '.join(poolers)}): the cases of its level"
    if unknown:
        why += f" (selected as well, architecture not known here: {', '.join(unknown)})"
    return Effect(path, "model", why, cases, "vllm")


def _worker_effect(path: str, ctx: Context) -> Effect:
    """Worker code: one model runner's rows, or both runners'."""
    known = ctx.source.exists(path)
    every = lambda rule, why: Effect(path, rule, why, None, "vllm")  # noqa: E731
    v1, v2 = ctx.worker_sets
    in_v1, in_v2 = path in v1, path in v2 or (not known and path.startswith(V2_PACKAGES))
    if in_v1 != in_v2:
        which = "v1" if in_v1 else "v2"
        return Effect(
            path,
            f"{which}-runner",
            f"Model Runner {which.upper()} code: its rows only",
            None,
            which,
        )
    return every(
        "worker",
        "worker code both model runners use"
        if in_v1
        else "worker code above the model runners (or not in the source read): both runners",
    )


def _entrypoint_effect(path: str, ctx: Context) -> Effect:
    """An entrypoint: the offline rows, the server's, or both, of its API's cases."""
    known = ctx.source.exists(path)
    api = _api_of_entrypoint(path)
    cases = ctx.ids(lambda c, f: f.api == api) if api else None
    scope = f"the {api} API" if api else "every pooling API"
    offline, server = (path in files for files in ctx.entry_sets)
    if not known or offline == server:
        where = "used offline (LLM) and by the server" if known else "not in the source read"
        return Effect(
            path,
            "entrypoint",
            f"entrypoint {where}: offline and server rows, {scope}",
            cases,
            "vllm",
        )
    rows: Rows = "offline" if offline else "server"
    return Effect(
        path,
        f"{rows}-entrypoint",
        f"{rows} entrypoint ({'LLM' if offline else 'vllm serve'}), {scope}",
        cases,
        rows,
    )


def _pooler_importers(path: str, ctx: Context) -> tuple[frozenset[str], list[str]]:
    """The pooler files importing a models-package file (directly), and the cases of their
    pooling level as the pooler rule gives them: a model file the poolers call (adapters.py's
    sentence-transformers projector loader) reaches models that never import it."""
    root = ctx.source.root
    users = sorted(
        rel
        for rel in (str(p.relative_to(root)) for p in (root / POOLER).rglob("*.py"))
        if path in ctx.source.imports(rel)
    )
    cases: frozenset[str] = frozenset()
    for rel in users:
        if "/seqwise/" in rel:
            cases |= ctx.ids(lambda c, f: not f.token_level)
        elif "/tokwise/" in rel:
            cases |= ctx.ids(lambda c, f: f.token_level)
        else:
            cases |= ctx.ids(lambda c, f: True)
    return cases, users


def _config_map_effect(path: str, ctx: Context) -> Effect:
    """models/config.py: vllm/config/ looks its classes up by architecture name (MODELS_CONFIG_MAP,
    the hybrid fix); the modules that import it (for the base class) count too."""
    configured = ctx.ids(lambda c, f: bool(f.config_fixes))
    imported = ctx.ids(lambda c, f: f.model_files is None or path in f.model_files)
    fixes = sorted(
        {f"{ctx.facts[c].arch}: {fix}" for c in configured for fix in ctx.facts[c].config_fixes}
    )
    users = sorted({ctx.facts[c].arch or "?" for c in imported - configured})
    why = "the config fixes vLLM applies by architecture name: " + (
        "; ".join(fixes) or "none of the cases'"
    )
    if users:
        why += f"; imported by the vLLM module of {', '.join(users)}"
    return Effect(path, "model-config", why, configured | imported, "vllm")
