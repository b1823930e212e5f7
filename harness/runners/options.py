"""Run options: how a runner sends a case's items (order, one at a time, twice for a warm prefix
cache). The invariance checks (harness.matrix.checks) ask for them; worker processes apply them
here without importing the matrix schema."""

from __future__ import annotations

from typing import Callable

import numpy as np

from harness.matrix.request import Request


def run_with_options(call: Callable[[list], list], items: list, request: Request) -> list:
    """Run `call` (a runner's batch call) on `items` as the request's run options ask, answers in
    input order.

    shuffle_seed: send the requests in a seeded random order and restore the order after;
    one_by_one: one request per call; warm_prefix_cache: send everything twice, keep the second."""
    order = list(range(len(items)))
    if request.shuffle_seed is not None:
        order = [
            int(i) for i in np.random.default_rng(request.shuffle_seed).permutation(len(items))
        ]
    sent = [items[i] for i in order]
    if request.one_by_one:
        got = [call([it])[0] for it in sent]
    else:
        if request.warm_prefix_cache:
            call(sent)
        got = call(sent)
    if len(got) != len(sent):
        return list(got)  # a wrong count is the comparison's to report, not reordering's
    out: list = [None] * len(items)
    for pos, i in enumerate(order):
        out[i] = got[pos]
    return out


def run_expecting_refusal(call: Callable[[list], list], items: list) -> list:
    """A case whose every item must be refused (`expect: {refused: ...}`): each item is sent by
    itself, so one refusal never stands for another item. Answers are (output, meta) pairs; a
    refused item is an empty output with `refused` = the error's own message (its type and text),
    an accepted one keeps its output with `refused` None. Which error is the expected one is the
    verdict's to say (harness.judge.verdict), not this function's."""
    answered = []
    for it in items:
        try:
            out, meta = call([it])[0]
        except Exception as e:  # noqa: BLE001 - the refusal is this item's outcome
            answered.append(
                (np.zeros(0, dtype=np.float32), {"refused": f"{type(e).__name__}: {e}"})
            )
            continue
        answered.append((out, {**meta, "refused": None}))
    return answered
