"""What the generic pipeline needs to know of the engine under test, in one place: how a model
runner is asked for, where a run records the engine's version and choice, which releases a case
may run on, and which runner the engine is expected to choose by itself. The pipeline (run/,
judge/, report/) asks ENGINE and names no engine; vLLM is its one implementation today.
Standard library only (harness.engine); a case is read through the fields named here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from harness.engine import target


@dataclass(frozen=True)
class EngineDescription:
    name: str  # for people: "vLLM"
    version_key: str  # the key of a run's `info["versions"]` that holds the engine's version
    # how a model runner variant is asked for: this variable, set to the variant's value (None:
    # unset, the engine chooses; its choice is then audited)
    runner_env: str
    runner_values: dict[str, str | None] = field(default_factory=dict)
    default_variant: str = "auto"  # the variant that leaves the choice to the engine
    # the version of the engine this environment runs (asked, never imported)
    version_here: Callable[[], str | None] = lambda: target.vllm_version()

    def version_of(self, info: dict[str, Any]) -> str | None:
        """The engine version a run recorded (None when it recorded none)."""
        return info.get("versions", {}).get(self.version_key)

    def chosen_runner(self, info: dict[str, Any]) -> str | None:
        """The model runner the engine ran, as the run recorded it."""
        return info.get("actual_runner")

    def why_chosen(self, info: dict[str, Any], default: str) -> str:
        """The engine's reason for the runner it chose, as the run recorded it."""
        return info.get("runner_choice", default)

    def gated(self, case: Any) -> bool:
        """Whether `case` names the engine releases it may run on."""
        return bool(case.vllm_releases)

    def release_gate(self, case: Any, version: str | None) -> str | None:
        """Why `case` cannot run on engine `version` (its `vllm_releases`), or None."""
        gate = case.vllm_releases
        return gate.skip_reason(version) if gate else None

    def expected_choice(self, case: Any, info: dict[str, Any]) -> tuple[str | None, str]:
        """(the runner the engine should choose by default for `case` on the version the run
        recorded, or None; why none) from the case's `expected_auto_runner`."""
        return case.expected_auto_for(self.version_of(info))

    @property
    def forced_variants(self) -> tuple[str, ...]:
        """The variants that force a model runner (the rest leave the choice to the engine)."""
        return tuple(v for v, value in self.runner_values.items() if value is not None)

    def runner_env_value(self, variant: str) -> str | None:
        """The value of `runner_env` that asks for `variant` (None: leave it unset)."""
        return self.runner_values[variant]


VLLM = EngineDescription(
    name="vLLM",
    version_key="vllm",
    runner_env="VLLM_USE_V2_MODEL_RUNNER",
    runner_values={"v1": "0", "v2": "1", "auto": None},
)
ENGINE = VLLM  # the engine under test
