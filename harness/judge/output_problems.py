"""What makes a comparison of outputs meaningless before any metric is taken: a reference that is
unusable (count, empty, NaN/Inf), runner outputs of the wrong count, shape or finiteness, and a
degenerate reference (outputs that barely vary with the input)."""

from __future__ import annotations

import numpy as np

from harness.judge.metrics import DEGENERATE_SPREAD, f64
from harness.matrix.inputs import distinct_inputs


def reference_problem(ref: list[np.ndarray], n_inputs: int) -> str | None:
    """What makes the reference itself unusable (wrong count, empty, NaN/Inf): the comparison would
    prove nothing, so it is an error naming the reference, never a fail blamed on the runner."""
    if len(ref) != n_inputs:
        return f"the reference is unusable: it returned {len(ref)} outputs for {n_inputs} inputs"
    for i, r in enumerate(ref):
        if r.size == 0:
            return (
                f"the reference is unusable: empty reference output at item {i} "
                f"(shape {list(r.shape)}); for a PRM this means no step tag was found: "
                f"check step_tag_id"
            )
        r64 = f64(r)
        for what, bad in (("NaN", np.isnan(r64)), ("Inf", np.isinf(r64))):
            if bad.any():
                return (
                    f"the reference is unusable: {what} in reference output at item {i}; "
                    f"the reference (HF or its golden) is broken, not the runner"
                )
    return None


def structural_problem(ref: list[np.ndarray], got: list[np.ndarray], n_inputs: int) -> str | None:
    """Count, shape and finiteness problems of the runner's outputs, each with its own message
    (the reference's own are harness.judge.compare.reference_problem, checked first)."""
    if len(got) != n_inputs:
        return f"wrong count: {len(got)} outputs for {n_inputs} inputs"
    for i, (r, g) in enumerate(zip(ref, got)):
        if g.size == 0:
            return (
                f"empty runner output at item {i} (shape {list(g.shape)}); "
                f"for a PRM this means no step tag was found: check step_tag_id"
            )
        if r.shape != g.shape:
            return f"shape mismatch at item {i}: reference {list(r.shape)}, runner {list(g.shape)}"
    for i, a in enumerate(got):
        a64 = f64(a)
        if np.isnan(a64).any():
            return f"NaN in runner output at item {i}"
        if np.isinf(a64).any():
            return f"Inf in runner output at item {i}"
    return None


def degenerate_reference(ref: list[np.ndarray], items: tuple | None = None) -> str | None:
    """A reference whose outputs barely vary across inputs makes any comparison meaningless.
    Counted over DISTINCT inputs (`items`; each item distinct when not given): a duplicate input
    owes no distinct output. Fewer than two distinct inputs cannot show that the reference varies
    at all (a constant model would pass), so that is degenerate too (the matrix refuses such
    sets)."""
    n_inputs = distinct_inputs(items) if items is not None else len(ref)
    if n_inputs < 2:
        return (
            f"{len(ref)} item(s) with {n_inputs} distinct input(s) cannot show that the "
            f"reference varies with its input (a constant model would pass); "
            f"give the case >= 2 distinct inputs"
        )
    summaries = [(f64(a).mean(axis=0) if a.ndim >= 2 else f64(a)).reshape(-1) for a in ref]
    if len({s.shape for s in summaries}) > 1:
        return None
    distinct = len({np.round(s, 6).tobytes() for s in summaries})
    if distinct < max(2, n_inputs // 2):
        return (
            f"reference gives only {distinct} distinct outputs for {n_inputs} distinct inputs; "
            f"the model or tokenizer is degenerate (e.g. every word is [UNK]) "
            f"and a comparison proves little"
        )
    collapse = _token_collapse(ref)
    if collapse:
        return collapse
    stack = np.stack(summaries)
    spread = float((stack.max(0) - stack.min(0)).max())
    scale = max(float(np.abs(stack).mean()), 1e-12)
    if spread <= DEGENERATE_SPREAD * scale:
        return (
            f"reference outputs do not vary across inputs "
            f"(spread {spread:.2e} vs scale {scale:.2e}); "
            f"the model is degenerate and a comparison would prove nothing"
        )
    return None


def _token_collapse(ref: list[np.ndarray]) -> str | None:
    """Per-token outputs where every token of an item is the same vector: averaging over tokens
    hides it (each item's mean still differs), so count distinct rows across all tokens."""
    token_items = [f64(a).reshape(-1, a.shape[-1]) for a in ref if a.ndim >= 2]
    if len(token_items) < 2 or len({t.shape[-1] for t in token_items}) > 1:
        return None
    rows = np.concatenate(token_items)
    if len(rows) <= 2 * len(token_items):
        return None  # too few tokens per item to tell
    distinct = len(np.unique(np.round(rows, 6), axis=0))
    if distinct <= len(token_items):
        return (
            f"reference per-token outputs collapse: {distinct} distinct rows over "
            f"{len(rows)} tokens of {len(token_items)} items (every token of an item gives the "
            f"same output); a comparison proves little"
        )
    return None
