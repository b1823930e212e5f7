"""What a case records of a runner it knows to differ (`divergence:`), to fail in some
environments (`skip_if_error:`), or to refuse (`expect:`), and the vLLM releases each holds on."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from harness.matrix.runner_names import RunnerName
from harness.matrix.strict import Strict
from harness.matrix.tolerance import METRIC_CEILINGS, Dtype, Tolerance


class Divergence(Strict):
    """A known, recorded difference between HF and a runner: xfail while the runner stays inside
    the recorded envelope (`bounds`, the measured metric values with a margin) or raises the
    recorded error (`error_match`); anything else (NaN, count, shape, a larger difference, another
    metric failing) fails as "the recorded divergence changed". Strict: a pass is xpass.

    `token_ids: differ` records a divergence of tokenization: the runner's prompt token ids are
    known to differ from the reference's (any other token-id mismatch is a structural fail). It is
    xfail only while the ids still differ AND every metric stays within the case's tolerance or
    the envelope (`bounds`, optional here); xpass when the ids agree and the metrics pass; an error
    when the ids could not be compared (nothing proves the divergence is still there).

    The envelope is a fact of the dtype it was measured in (`dtype`); how it is judged in another
    dtype is harness.judge.verdict's (`_divergence_in_dtype`)."""

    runners: list[RunnerName]
    reason: str
    bounds: Tolerance | None = None  # the envelope: upper bounds of the metrics as measured
    # the dtype the envelope was measured in; judged in another dtype, the envelope is widened by
    # that dtype's bounds and a runner within them does not show it (harness.judge.verdict)
    dtype: Dtype = "float32"
    # the runner is known to raise: an error whose own message contains this is the divergence
    error_match: str | None = None
    # metrics this divergence drives to their largest possible value (e.g. every query ranked
    # otherwise: rank_disagreement 1), which no envelope bound could hold (a bound at that value
    # can never fail, and is refused): named here, reported as not held by the envelope
    at_ceiling: list[str] = Field(default_factory=list)
    # the runner's prompt token ids differ from the reference's (a tokenization divergence)
    token_ids: Literal["differ"] | None = None
    # with token_ids: the only positions at which they differ (every item's two sequences of one
    # length); ids differing anywhere else, or in length, are the divergence changing
    token_positions: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, min_length=1)
    # the runner's outputs are malformed (count, shape, NaN/Inf: harness.judge.compare's
    # structural problems): that problem's message contains this, e.g. "reference [3, 2], runner
    # [35, 2]" (every token answered where a row per step was due); any other outcome changed it
    problem_match: str | None = Field(default=None, min_length=1)
    # a refusal case's divergence: the runner answers every item the case expects refused (a
    # limit not enforced); xfail while it still answers all, xpass once it refuses as expected
    accepted: bool = False
    # the vLLM releases that shipped the bug it records (a PEP 440 specifier, e.g. ">=0.29,<0.32"):
    # on any other release (or an unknown one) it does not apply and the case is held to its own
    # bounds, so the bug coming back on a later release fails (harness.run.plan)
    vllm_releases: str | None = None
    # the CPU flags (/proc/cpuinfo) the divergence needs: vLLM takes another kernel on a CPU
    # without them (e.g. `amx_tile`: vLLM packs conv weights for its AMX kernel only there); on
    # such a CPU, and on a GPU, the divergence does not apply and the case is judged on its bounds
    cpu_flags: list[str] = Field(default_factory=list)

    @field_validator("vllm_releases")
    @classmethod
    def _releases(cls, v: str | None) -> str | None:
        return None if v is None else _specifier(v)

    def holds_on(self, version: str | None, cpu_flags: frozenset[str] | None = None) -> bool:
        """Whether it applies on vLLM `version`: always without `vllm_releases`, else only on a
        known version inside them (a local label such as +cpu and a dev suffix are ignored); with
        `cpu_flags` recorded, only on a CPU that has them all (`cpu_flags`: this CPU's, None when
        the engine does not run on a CPU or they are unknown)."""
        if self.cpu_flags and not (cpu_flags is not None and set(self.cpu_flags) <= cpu_flags):
            return False
        if self.vllm_releases is None:
            return True
        return _within(self.vllm_releases, version)

    @model_validator(mode="after")
    def _envelope_or_error(self) -> "Divergence":
        if self.token_positions is not None and self.token_ids is None:
            raise ValueError("token_positions records where token ids differ: it needs token_ids")
        if self.token_ids is not None and self.error_match is not None:
            raise ValueError(
                "a divergence recorded as raising (`error_match`) has no token ids to differ: "
                "drop `token_ids` or `error_match`"
            )
        no_bounds = self.bounds is None or not self.bounds.bounds()
        if self.accepted:
            others = {
                "bounds": not no_bounds,
                "error_match": self.error_match is not None,
                "problem_match": self.problem_match is not None,
                "token_ids": self.token_ids is not None,
                "at_ceiling": bool(self.at_ceiling),
            }
            if any(others.values()):
                raise ValueError(
                    "a divergence recorded as `accepted` (what must be refused is answered) has "
                    f"no outputs to hold to an envelope: drop {[k for k, v in others.items() if v]}"
                )
            return self
        if self.problem_match is not None:
            others = [
                k
                for k, on in (
                    ("bounds", not no_bounds),
                    ("error_match", self.error_match is not None),
                    ("token_ids", self.token_ids is not None),
                    ("at_ceiling", bool(self.at_ceiling)),
                )
                if on
            ]
            if others:
                raise ValueError(
                    "a divergence recorded as malformed outputs (`problem_match`) has no "
                    f"metrics to bound, no error and no token ids: drop {others}"
                )
            return self
        if self.token_ids is None and no_bounds == (self.error_match is None):
            raise ValueError(
                "a divergence records either `bounds` (the envelope of its metric values), "
                "`error_match` (the error it raises) or `problem_match` (its malformed "
                "outputs), exactly one"
            )
        bad = [m for m in self.at_ceiling if m not in METRIC_CEILINGS]
        if bad:
            raise ValueError(
                f"at_ceiling {bad}: only a metric with a largest value can be at it; "
                f"valid: {', '.join(METRIC_CEILINGS)}"
            )
        both = [m for m in self.at_ceiling if self.bounds is not None and m in self.bounds.bounds()]
        if both:
            raise ValueError(
                f"{both} both bounded in the envelope and listed in at_ceiling: choose one"
            )
        if self.at_ceiling and self.bounds is None:
            raise ValueError(
                "at_ceiling needs an envelope (`bounds`) for the metrics it leaves out"
            )
        return self


class KnownSkip(Strict):
    """A runner that cannot run this case in some environments, for a known reason: when it fails
    with an error containing `error_match`, the verdict is skip (with the exact error), not error.
    Any other error stays an error, and where it runs, it is compared as usual. Naming `hf`: the
    reference cannot run here (e.g. its package is missing), and the rows it judges skip."""

    runners: list[RunnerName]
    error_match: str = Field(min_length=1)
    reason: str


class Expect(Strict):
    """The outcome a case expects instead of outputs. `refused`: every item must be refused by
    each vLLM runner with an error matching this regular expression (Python `re.search`); the
    reference of such a case is the refusal rule itself, so it has no HF runner and no golden."""

    refused: str = Field(min_length=1)

    @field_validator("refused")
    @classmethod
    def _compiles(cls, v: str) -> str:
        import re

        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"refused {v!r} is not a regular expression: {e}") from None
        return v


def _specifier(v: str) -> str:
    """`v` when it is a PEP 440 version specifier; else an error saying what to write."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(v)
    except InvalidSpecifier:
        raise ValueError(
            f"{v!r} is not a version specifier; write e.g. '<0.29' or '>=0.28,<0.32' "
            "(PEP 440, as pip takes them)"
        ) from None
    return v


def _within(specifier: str, version: str | None) -> bool:
    """Whether vLLM `version` (its base version: +cpu, .dev ignored) is inside `specifier`;
    False for an unknown or unreadable version."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        base = Version(Version(version or "").base_version)
    except InvalidVersion:
        return False
    return SpecifierSet(specifier).contains(base, prereleases=True)


class VllmReleases(Strict):
    """The vLLM releases a case can run on. On a vLLM outside `specifier` (a PEP 440 specifier,
    as pip takes them; a local label such as +cpu and a dev suffix are ignored) the whole case is
    skipped with `reason` when the run is planned: no model is built, no engine starts (e.g. an
    architecture vLLM removed after a release)."""

    specifier: str = Field(min_length=1)
    reason: str = Field(min_length=1)

    @field_validator("specifier")
    @classmethod
    def _valid_specifier(cls, v: str) -> str:
        return _specifier(v)

    def skip_reason(self, version: str | None) -> str | None:
        """Why a case cannot run on vLLM `version` (None: it can, or the version is unknown and
        the runners will say what they find)."""
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            base = Version(Version(version or "").base_version)
        except InvalidVersion:
            return None
        if SpecifierSet(self.specifier).contains(base, prereleases=True):
            return None
        return f"vLLM {version} is outside vllm_releases {self.specifier!r}: {self.reason}"
