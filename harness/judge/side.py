"""One side of a comparison (the reference, a runner, the float32 reference): its outputs and what
was recorded beside them per item, loaded once and handed to every check that reads them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.matrix.evidence import RequestRecord


@dataclass(frozen=True)
class Side:
    outputs: list[np.ndarray] | None  # None: the side produced no outputs (a refusal's records)
    meta: list[RequestRecord] | None = None  # per item: token ids, a server's answers, refusals
    token_ids: list | None = None  # per item's prompt token ids; None when none were recorded

    def __post_init__(self) -> None:
        if self.meta is not None:  # records as JSON objects (a requests file, a test) are read
            object.__setattr__(self, "meta", RequestRecord.read_all(self.meta))

    @classmethod
    def of(
        cls,
        outputs: list[np.ndarray],
        meta: list | None = None,
        token_ids: list | None = None,
    ) -> Side:
        """A side from its outputs and per-item records; token ids are read from the records
        unless given on their own (a test's, or a golden's)."""
        records = RequestRecord.read_all(meta) if meta is not None else None
        if token_ids is None and records is not None:
            token_ids = [m.prompt_token_ids for m in records]
        return cls(outputs, records, token_ids)

    def refusals(self) -> list[str | None] | None:
        """Per item, the refusal a runner recorded (None for an item answered)."""
        return None if self.meta is None else [m.refused for m in self.meta]
