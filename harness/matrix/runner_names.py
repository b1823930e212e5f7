"""Runner names: what a matrix may list, and what kind of runner each name is.

A name is a kind plus, for vLLM, the model runner it asks for: `hf`, `vllm-v1|v2|auto`,
`vllm-serve-v1|v2|auto` (vLLM's HTTP server), `vllm-async-v1|v2` (vLLM's AsyncLLM, what the server
and async users call) and `fake` (a test double that misbehaves on
command, harness/runners/fake.py). Code asks `runner_info(name)` what a runner is; it never tests
the spelling of a name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

RunnerName = Literal[
    "hf",
    "vllm-v1",
    "vllm-v2",
    "vllm-auto",
    "vllm-serve-v1",
    "vllm-serve-v2",
    "vllm-serve-auto",
    "vllm-async-v1",
    "vllm-async-v2",
    "fake",
]
RUNNER_NAMES: tuple[str, ...] = get_args(RunnerName)
REFERENCE_RUNNER = "hf"
# the kinds of runner; each has one implementation (harness.runners' registry)
KINDS = ("hf", "vllm", "vllm-serve", "vllm-async", "fake")
VLLM_KINDS = ("vllm", "vllm-serve", "vllm-async")


@dataclass(frozen=True)
class RunnerInfo:
    name: str
    kind: str  # one of KINDS
    variant: str | None  # the model runner a vLLM runner asks for: v1, v2, auto

    @property
    def is_vllm(self) -> bool:
        """vLLM runs it, offline or behind its HTTP server."""
        return self.kind in VLLM_KINDS

    @property
    def is_server(self) -> bool:
        """It talks to a `vllm serve` process over HTTP."""
        return self.kind == "vllm-serve"

    @property
    def is_offline_vllm(self) -> bool:
        """vLLM's offline `LLM` in the worker process."""
        return self.kind == "vllm"

    @property
    def is_async(self) -> bool:
        """vLLM's AsyncLLM in the worker process (its engine core a child process), every item
        in flight at once through `AsyncLLM.encode`."""
        return self.kind == "vllm-async"

    @property
    def is_reference(self) -> bool:
        """The reference every vLLM runner is compared with (in the case's dtype)."""
        return self.name == REFERENCE_RUNNER

    @property
    def is_hf(self) -> bool:
        """Hugging Face runs it: the reference, or its float32 twin of half-precision cases."""
        return self.kind == "hf"


def runner_kind(name: str) -> tuple[str, str | None]:
    """'vllm-v2' -> ('vllm', 'v2'); 'vllm-serve-v2' -> ('vllm-serve', 'v2');
    'hf' -> ('hf', None)."""
    for kind in sorted(KINDS, key=len, reverse=True):
        if name == kind or name.startswith(kind + "-"):
            return kind, name[len(kind) + 1 :] or None
    raise ValueError(f"unknown runner {name!r}; valid kinds: {', '.join(sorted(KINDS))}")


def runner_info(name: str) -> RunnerInfo:
    kind, variant = runner_kind(name)
    return RunnerInfo(name, kind, variant)


def model_runner_variant(name: str) -> str | None:
    """The model runner a vLLM runner name asks for ('v1', 'v2', 'auto'); None for others."""
    info = runner_info(name)
    return info.variant if info.is_vllm else None
