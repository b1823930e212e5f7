"""One side of a comparison (the reference, a runner, the float32 reference): its outputs and what
was recorded beside them per item, loaded once and handed to every check that reads them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Side:
    outputs: list[np.ndarray] | None  # None: the side produced no outputs (a refusal's records)
    meta: list[dict] | None = None  # per item: prompt token ids, a server's answers, refusals
    token_ids: list | None = None  # per item's prompt token ids; None when none were recorded

    @classmethod
    def of(
        cls,
        outputs: list[np.ndarray],
        meta: list[dict] | None = None,
        token_ids: list | None = None,
    ) -> Side:
        """A side from its outputs and per-item records; token ids are read from the records
        unless given on their own (a test's, or a golden's)."""
        if token_ids is None and meta is not None:
            token_ids = [m.get("prompt_token_ids") for m in meta]
        return cls(outputs, meta, token_ids)

    def refusals(self) -> list[str | None] | None:
        """Per item, the refusal a runner recorded (None for an item answered)."""
        return None if self.meta is None else [m.get("refused") for m in self.meta]
