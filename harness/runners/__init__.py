"""Runners: one interface, a registry by name, imported lazily inside worker processes.

A runner name is `hf` or `vllm-<variant>` (variant: v1, v2, auto). The parent process never
imports torch, transformers or vLLM: it only names runners; `harness.runners.worker` imports the
implementation in its own subprocess.
"""

from __future__ import annotations

import gc
import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from harness.matrix.evidence import RunEvidence
from harness.matrix.request import Request
from harness.matrix.runner_names import runner_kind

# runner kind (harness.matrix.runner_names.KINDS) -> "module:Class", imported only inside the
# worker that needs it
_REGISTRY: dict[str, str] = {
    "hf": "harness.runners.hf:HFRunner",
    "vllm": "harness.runners.vllm:VllmRunner",
    "vllm-serve": "harness.runners.serve:ServeRunner",  # vLLM's HTTP server, same V1/V2 variants
    "vllm-async": "harness.runners.vllm_async:AsyncVllmRunner",  # AsyncLLM.encode, V1/V2
    "fake": "harness.runners.fake:FakeRunner",  # test double that misbehaves on command
}


class SkipCase(Exception):
    """Raised by a runner for a case it cannot run in this environment for a reason that is no
    fault of the code under test (a pinned reference package not installed): the outcome is
    skip, with this message, not error."""


@dataclass
class LoadRequest:
    model_dir: str
    dtype: str
    device: str
    engine: dict[str, Any] = field(default_factory=dict)  # vLLM engine kwargs
    hf: dict[str, Any] = field(default_factory=dict)  # reference-recipe options
    trust_remote_code: bool = False
    lora_dir: str | None = None  # a LoRA adapter on the model: peft's folder (harness.models.lora)


@dataclass(frozen=True)
class RunResult:
    """What a runner's `run` returns: one output array per input item, in input order, and what
    that run recorded (harness.matrix.evidence.RunEvidence: one record per request, and the run
    as a whole), which the worker sums up beside the outputs."""

    outputs: list[np.ndarray]
    evidence: RunEvidence = field(default_factory=RunEvidence)


@runtime_checkable
class Runner(Protocol):
    """What every runner does, inside its worker process.

    A runner written against the protocol before RunResult (`run` returning the outputs, the
    evidence read afterwards from `evidence()`) ports mechanically: `run` returns
    `RunResult(outputs, evidence)` with the RunEvidence its `evidence()` built, and `evidence()`
    and the attributes it read (`last_meta`, `last_run`) go."""

    def load(self, req: LoadRequest) -> dict[str, Any]:
        """Load a model; return facts for the report (versions, the runner really used, ...)."""

    def run(self, task: str, items: list, request: Request) -> RunResult:
        """The items sent as `request` says: their outputs and the run's evidence."""

    def unload(self) -> None:
        """Free the model, so one worker never holds two."""


def create(name: str) -> Runner:
    kind, variant = runner_kind(name)
    module, cls = _REGISTRY[kind].split(":")
    impl = getattr(importlib.import_module(module), cls)(variant)
    if not isinstance(impl, Runner):
        raise TypeError(f"{_REGISTRY[kind]} does not implement the Runner protocol")
    return impl


def freeze_what_is_alive() -> None:
    """Before a model loads: collect, then freeze what is left (imports, caches) so the
    collections that follow scan only the new model's objects, not the ~800k objects torch,
    transformers and vLLM keep alive (a full collection costs ~0.3-0.45 s here). What the model
    allocates stays unfrozen, so the collection at unload frees it."""
    gc.collect()
    gc.freeze()
