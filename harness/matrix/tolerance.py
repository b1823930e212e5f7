"""The bounds a case holds its runners to (`tolerances:`, by dtype), and what makes a bound one
that can fail."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from harness.matrix.strict import Strict

Dtype = Literal["float32", "float16", "bfloat16"]

HALF_DTYPES = ("bfloat16", "float16")


class Tolerance(Strict):
    """Upper bounds for metrics; a metric absent here is reported but not gated.

    With `k` (half precision only) the bounds are calibrated: the runner is measured against the
    HF reference run in float32, and each metric's bound is k x the HF reference's own error in
    this dtype (its distance to the float32 reference, same metric) + the value given here, the
    floor. docs/measurements/half-precision.md has the measurements k and the floors come from."""

    cosine_distance: float | None = None  # max over items of 1 - cos(a, b)
    max_abs: float | None = None
    max_rel: float | None = None
    rank_disagreement: float | None = None  # fraction of query groups whose ranking differs
    norm_rel: float | None = None  # max over vectors of | |runner| / |reference| - 1 |
    main_score: float | None = None  # MTEB: |main score - reference main score|
    k: float | None = Field(default=None, gt=0)  # calibrated bounds: k x HF's own error + floor

    @field_validator("*")
    @classmethod
    def _can_fail(cls, v: float | None, info: ValidationInfo) -> float | None:
        """A bound no measurement can exceed (or none can meet) gates nothing: refused."""
        problem = None if v is None else bound_problem(str(info.field_name), v)
        if problem:
            raise ValueError(problem)
        return v

    def bounds(self) -> dict[str, float]:
        """The metric bounds (floors, when `k` calibrates them), by metric name."""
        return {k: v for k, v in self.model_dump().items() if v is not None and k != "k"}


# The largest value each bounded metric can take: a bound at or above it can never fail.
# cosine distance is 1 - cos, at most 2; rank_disagreement is a fraction of query groups, at most 1.
METRIC_CEILINGS = {"cosine_distance": 2.0, "rank_disagreement": 1.0}


def bound_problem(name: str, value: float) -> str | None:
    """Why `value` is not a bound that can gate metric `name` (None when it is): every bound must
    be a finite number >= 0, and below the metric's largest possible value where it has one."""
    import math

    if not math.isfinite(value):
        return (
            f"bound {name}={value} is not finite, so it can never fail; "
            f"valid: a finite number >= 0{_below(name)}"
        )
    if value < 0:
        return (
            f"bound {name}={value} is negative, so no measurement can meet it; "
            f"valid: a finite number >= 0{_below(name)}"
        )
    ceiling = METRIC_CEILINGS.get(name)
    if ceiling is not None and value >= ceiling:
        return (
            f"bound {name}={value} is >= {ceiling:g}, the largest value {name} can take, "
            f"so it can never fail; valid: 0 <= {name} < {ceiling:g}"
        )
    return None


def _below(name: str) -> str:
    ceiling = METRIC_CEILINGS.get(name)
    return f" and < {ceiling:g}" if ceiling is not None else ""
