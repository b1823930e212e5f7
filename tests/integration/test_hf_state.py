"""The HF reference keeps no state from one case to the next inside one worker.

Cases that differ only in `truncate` share one load (truncation is a per-call option), so with -k,
shards or a selection a plain case can follow a truncated one in the same worker. Each case's
outputs must equal those of a fresh worker that ran it first.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from harness.matrix.inputs import input_set
from harness.matrix.request import Request
from harness.models.resolve import resolve
from harness.run.matrices import load_matrix
from harness.runners import LoadRequest
from harness.runners.outputs import load_items
from harness.runners.pool import Worker
from tests.conftest import ROOT

MATRIX = ROOT / "matrices" / "pooling.yaml"
TRUNCATE = 6  # tokens, special tokens included: shorter than every input below


def _run_in_one_worker(case, order: list[int | None], tmp_path, tag: str) -> list[list[np.ndarray]]:
    """Load the case's model once in a fresh HF worker, then run its inputs with each truncation
    of `order` in turn (None: no truncation); the outputs of each run."""
    worker = Worker("hf", {}, tmp_path / f"{tag}.log", threads=1)
    req = LoadRequest(
        model_dir=str(resolve(case.model, MATRIX.parent).path),
        dtype="float32",
        device="cpu",
        hf=dict(case.hf),
        trust_remote_code=case.trust_remote_code,
    )
    items = list(input_set(case.inputs).items)[:4]
    outs = []
    try:
        assert worker.request({"op": "load", "request": asdict(req)}, 600, "load")["ok"]
        for i, truncate in enumerate(order):
            request = Request(reference=case.reference, hf=case.hf, truncate=truncate or None)
            path = tmp_path / f"{tag}-{i}.safetensors"
            msg = {
                "op": "run",
                "task": case.task,
                "items": items,
                "request": request.wire(),
                "out": str(path),
            }
            ans = worker.request(msg, 600, "run")
            assert ans["ok"], ans.get("error")
            outs.append(load_items(path)[0])
    finally:
        worker.stop()
    return outs


@pytest.mark.parametrize("case_id", ["bert-tiny-mean-embed", "bert-tiny-cross-encoder-score"])
def test_a_case_after_another_truncation_equals_a_fresh_worker(case_id, tmp_path):
    case = next(c for c in load_matrix(MATRIX).cases if c.id == case_id)
    truncated_first = _run_in_one_worker(case, [TRUNCATE, None], tmp_path, "truncated-first")
    plain_first = _run_in_one_worker(case, [None, TRUNCATE], tmp_path, "plain-first")
    fresh_truncated, fresh_plain = truncated_first[0], plain_first[0]
    # the truncation bites on these inputs, so a leak would show
    assert any(not np.array_equal(a, b) for a, b in zip(fresh_truncated, fresh_plain))
    for after, fresh in ((truncated_first[1], fresh_plain), (plain_first[1], fresh_truncated)):
        assert len(after) == len(fresh)
        for a, b in zip(after, fresh):
            np.testing.assert_array_equal(a, b)
