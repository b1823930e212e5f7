"""A side's per-item records are typed (harness.matrix.evidence.RequestRecord): the checks read
fields, and a key no field declares is refused when the side is read, naming it."""

from __future__ import annotations

import numpy as np
import pytest

from harness.judge.side import Side
from harness.matrix.evidence import RequestRecord


def test_records_read_from_json_objects_are_typed():
    side = Side.of(
        [np.zeros(2, np.float32)],
        [{"prompt_token_ids": [1, 2], "rerank": {"group": 0, "rank": 1, "document_matches": True}}],
    )
    (record,) = side.meta
    assert isinstance(record, RequestRecord)
    assert side.token_ids == [[1, 2]] and record.rerank.rank == 1
    assert side.refusals() == [None]


def test_a_key_no_field_declares_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"item 0: not a request record \(prmpt_token_ids"):
        Side.of([np.zeros(2, np.float32)], [{"prmpt_token_ids": [1]}])
