"""The modes a run takes: what its runners are compared against, and what a golden run does."""

from __future__ import annotations

import enum
from typing import TypeVar


class Against(enum.StrEnum):
    """The reference of a run: HF live, or its committed goldens."""

    HF = "hf"
    GOLDEN = "golden"


class GoldenMode(enum.StrEnum):
    """record (a missing golden is written, the case fails), verify, update (rewrite on purpose)."""

    RECORD = "record"
    VERIFY = "verify"
    UPDATE = "update"


E = TypeVar("E", bound=enum.StrEnum)


def mode_of(kind: type[E], value: str, what: str) -> E:
    """`value` as a member of `kind`, else an error naming `what` and the valid choices."""
    try:
        return kind(value)
    except ValueError:
        choices = " or ".join(repr(m.value) for m in kind)
        raise ValueError(f"{what} must be {choices}, got {value!r}") from None
