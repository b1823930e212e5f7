"""The verdict's vocabulary (harness.judge.verdict decides, and only there): the statuses and
their order, a gated Metric, what a comparison found (Measurement) and the Verdict itself."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np


class Status(enum.StrEnum):
    """A verdict's status; a str, so reports and JSON spell it as before."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"
    XFAIL = "xfail"
    XPASS = "xpass"


STATUSES = tuple(Status)
PASSING = (Status.PASS, Status.XFAIL, Status.SKIP)
FAILING = (Status.FAIL, Status.ERROR, Status.XPASS)
ORDER = {
    Status.ERROR: 0,
    Status.FAIL: 1,
    Status.XPASS: 2,
    Status.XFAIL: 3,
    Status.SKIP: 4,
    Status.PASS: 5,
}


@dataclass
class Metric:
    name: str
    value: float
    bound: float | None  # None: reported, not gated (matrix validation makes required ones bounded)
    # half precision: the HF reference's own error (HF in this dtype against HF in float32, same
    # metric); then `value` is the runner against HF in float32 and `bound` was calibrated from it
    ref_error: float | None = None

    @property
    def ok(self) -> bool:
        return self.bound is None or (bool(np.isfinite(self.value)) and self.value <= self.bound)

    @property
    def ratio(self) -> float | None:
        """The runner's error over the reference's own error (None when not calibrated or 0)."""
        if self.ref_error is None or self.ref_error <= 0:
            return None
        return self.value / self.ref_error

    def describe(self) -> str:
        """'max_abs 0.05 > 0.01' and, when calibrated, the reference's own error and the ratio."""
        text = f"{self.name} {self.value:.3g} {'<=' if self.ok else '>'} {self.bound:.3g}"
        if self.ref_error is not None:
            ratio = f", {self.ratio:.3g}x" if self.ratio is not None else ""
            text += f" (HF's own error {self.ref_error:.3g}{ratio})"
        return text


@dataclass
class Verdict:
    status: Status
    reason: str = ""
    metrics: list[Metric] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    envelope: dict[str, float] = field(
        default_factory=dict
    )  # a recorded divergence's bounds, when xfail

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(
                f"unknown verdict status {self.status!r}; valid: {', '.join(STATUSES)}"
            )
        self.status = Status(self.status)

    @property
    def ok(self) -> bool:
        return self.status in PASSING


@dataclass
class Measurement:
    """What a comparison found, before any verdict: an unusable reference (count, empty, NaN/Inf
    in the reference), a structural problem of the runner's outputs (count, shape, NaN/Inf), a
    degenerate reference, or the metric values."""

    problem: str | None = None
    degenerate: str | None = None
    reference_problem: str | None = None  # the reference (HF or its golden) is unusable: an error
    metrics: list[Metric] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)  # what was checked besides metrics
    # the token-id check: "equal" (compared, equal), "differ" (then `problem` says where; the
    # metrics are measured all the same), None (not compared)
    token_ids: str | None = None
    # with token_ids "differ": the positions at which any item's ids differ, when every item's
    # two sequences have one length (differing_positions); None otherwise
    id_positions: tuple[int, ...] | None = None


def is_failing(status: str) -> bool:
    return status in FAILING
