"""What a selection rule answers and what it consults.

An `Effect` is one changed file's answer: the cases it can affect (None: every case) and which of
their rows. A rule consults a `Context`: the cases (checks expanded), each one's `CaseFacts` (the
architecture vLLM runs, the vLLM model files it imports, its API, its pooling level) and vLLM's
source, with the files of each model runner and of each entrypoint read once.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.engine import target
from harness.matrix.runner_names import runner_info
from harness.matrix.schema import Case, Matrix, SyntheticModel
from harness.select.vllm_source import MODELS_DIR, VllmSource

# which rows a rule touches: every row, every vLLM row, one model runner's, offline or server rows
Rows = Literal["all", "vllm", "v1", "v2", "offline", "server"]

WORKER = "vllm/v1/worker/"
V1_RUNNERS = (f"{WORKER}gpu_model_runner.py", f"{WORKER}cpu_model_runner.py")
V2_RUNNERS = (f"{WORKER}gpu/model_runner.py", f"{WORKER}cpu/model_runner.py")
ENTRYPOINTS = "vllm/entrypoints/"
OFFLINE_ENTRY = f"{ENTRYPOINTS}llm.py"
SERVER_ENTRY = f"{ENTRYPOINTS}openai/api_server.py"  # what the vllm-serve-* runners start
ADAPTERS = f"{MODELS_DIR}/adapters.py"  # wraps a converted architecture (Qwen3Model -> pooling)
# the vLLM call each harness task makes (harness.runners.vllm / serve): which API a file serves
API_OF_TASK = {
    "embed": "embed",
    "classify": "classify",
    "score": "score",
    "token_embed": "pooling",
    "token_classify": "pooling",
    "reward": "pooling",
    "step_reward": "pooling",
    "embed&token_classify": "pooling",
}


@dataclass(frozen=True)
class Effect:
    """What one changed file can affect: the cases (None: every case) and which of their rows."""

    path: str
    rule: str
    reason: str
    cases: frozenset[str] | None = frozenset()
    rows: Rows = "vllm"

    def picks(self, case: Case, runner: str) -> bool:
        base = case.variant_of or case.id
        if self.cases is not None and base not in self.cases:
            return False
        return _in_rows(self.rows, case, runner)


def _in_rows(rows: Rows, case: Case, runner: str) -> bool:
    info = runner_info(runner)
    if info.is_reference:
        return rows == "all"
    if rows in ("all", "vllm"):
        return True
    if rows in ("offline", "server"):
        return info.is_server == (rows == "server")
    variant = info.variant if info.is_vllm else None
    if variant == "auto":  # the runner vLLM picks; unknown expectation: either
        want = case.expected_auto_runner
        if isinstance(want, dict):  # by release: the vLLM under test's, else either runner named
            want, _ = case.expected_auto_for(target.vllm_version())
            return want is None and rows in case.expected_auto_runner.values() or want == rows
        return want in (None, rows)
    return variant == rows


@dataclass(frozen=True)
class CaseFacts:
    arch: str | None
    model_files: frozenset[str] | None  # None: vLLM's module for the case is unknown here
    api: str
    token_level: bool  # pooled per token (token_* tasks, reward, late-interaction score)
    late_interaction: bool
    config_fixes: tuple[str, ...] = ()  # models/config.py classes vLLM applies to the architecture


def case_architecture(case: Case, base_dir: Path) -> str | None:
    """The architecture vLLM runs: the case's `hf_overrides` architectures where it gives them
    (e.g. an original Qwen3-Reranker, a Qwen3ForCausalLM, run as Qwen3ForSequenceClassification
    through adapters.py), else the one it reads from config.json (a synthetic case names it)."""
    overridden = (case.engine.get("hf_overrides") or {}).get("architectures")
    if overridden:
        return overridden[0]
    if isinstance(case.model, SyntheticModel):
        return case.model.arch
    from harness.models.resolve import stored_model_dir

    try:
        cfg = json.loads((stored_model_dir(case.model, base_dir) / "config.json").read_text())
    except Exception:  # noqa: BLE001 - a model not here has an unknown architecture, selected widely
        return None
    return (cfg.get("architectures") or [None])[0]


def case_facts(case: Case, source: VllmSource, base_dir: Path) -> CaseFacts:
    arch = case_architecture(case, base_dir)
    found = source.module_of(arch, case.engine.get("model_impl")) if arch else None
    files = None
    if found is not None:
        module, converted = found
        start = source.module_files(module) + ([ADAPTERS] if converted else [])
        files = source.closure(start, lambda f: f.startswith(MODELS_DIR + "/"))
    late = arch in source.late_interaction_archs
    token = case.task in ("token_embed", "token_classify", "reward", "step_reward") or (
        case.task == "score" and late
    )
    fixes = tuple(source.config_fixes(arch, case.engine.get("model_impl"))) if arch else ()
    # serve.api pooling: an embed or classify case the server runners send to /pooling
    api = "pooling" if case.request.serve.api == "pooling" else API_OF_TASK[case.task]
    return CaseFacts(arch, files, api, token, late, fixes)


@dataclass
class Context:
    """What the rules consult: the cases (checks expanded), their facts, vLLM's source."""

    matrix: Matrix
    cases: list[Case]
    facts: dict[str, CaseFacts]
    source: VllmSource

    def ids(self, keep) -> frozenset[str]:
        return frozenset(
            c.id for c in self.cases if c.variant_of is None and keep(c, self.facts[c.id])
        )

    @functools.cached_property
    def worker_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        return _worker_sets(self.source)

    @functools.cached_property
    def entry_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        """Entrypoint files the offline LLM class imports, and those vLLM's server imports."""
        inside = lambda f: f.startswith(ENTRYPOINTS)  # noqa: E731
        return self.source.closure([OFFLINE_ENTRY], inside), self.source.closure(
            [SERVER_ENTRY], inside
        )


def _worker_sets(source: VllmSource) -> tuple[frozenset[str], frozenset[str]]:
    """Files of V1's model runner and of V2's, as their imports say. V1's runner imports a helper or
    two from V2's package: those count for V1 too, but not what they import in turn."""
    top = lambda f: f.startswith(WORKER) and "/" not in f[len(WORKER) :]  # noqa: E731
    v1 = source.closure(list(V1_RUNNERS), top) | {
        f for r in V1_RUNNERS if source.exists(r) for f in source.imports(r) if f.startswith(WORKER)
    }
    v2 = source.closure(list(V2_RUNNERS), lambda f: f.startswith(WORKER))
    return frozenset(v1), frozenset(v2)
