"""The metrics: each one number per (reference, runner) output pair, "lower is better", gated
as value <= bound. What a measurement means is decided by harness.judge.verdict alone."""

from __future__ import annotations

import numpy as np

from harness.matrix.inputs import query_groups
from harness.matrix.schema import Tolerance

REL_FLOOR = 1e-6  # |ref| below this counts as this, so max_rel stays finite near zero


DEGENERATE_SPREAD = 1e-3  # reference outputs varying less than this (relative) prove nothing


def f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def cosine_distance(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    """max over items (and over tokens, for token outputs) of 1 - cos(ref, got)."""
    worst = 0.0
    for r, g in zip(ref, got):
        r2 = f64(r).reshape(-1, r.shape[-1]) if r.ndim else f64(r).reshape(1, 1)
        g2 = f64(g).reshape(r2.shape)
        num = (r2 * g2).sum(-1)
        den = np.linalg.norm(r2, axis=-1) * np.linalg.norm(g2, axis=-1)
        cos = np.where(
            den > 0,
            num / np.where(den > 0, den, 1.0),
            np.where(np.abs(r2 - g2).max(-1) == 0, 1.0, 0.0),
        )
        worst = max(worst, float((1.0 - cos).max()))
    return worst


def max_abs(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    return max(float(np.abs(f64(r) - f64(g)).max(initial=0.0)) for r, g in zip(ref, got))


def max_rel(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    return max(
        float((np.abs(f64(r) - f64(g)) / np.maximum(np.abs(f64(r)), REL_FLOOR)).max(initial=0.0))
        for r, g in zip(ref, got)
    )


def max_rel_above(ref: list[np.ndarray], got: list[np.ndarray], noise: float) -> float:
    """max_rel over the elements whose reference exceeds `noise` (the others are max_abs's)."""
    worst = 0.0
    for r, g in zip(ref, got):
        r, g = f64(r), f64(g).reshape(np.shape(r))
        keep = np.abs(r) > noise
        if keep.any():
            worst = max(worst, float((np.abs(r - g)[keep] / np.abs(r)[keep]).max()))
    return worst


def _norms(r: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The L2 norm of each vector (every token's, for token outputs): the reference's, the
    runner's."""
    r2 = f64(r).reshape(-1, r.shape[-1]) if r.ndim else f64(r).reshape(1, 1)
    return np.linalg.norm(r2, axis=-1), np.linalg.norm(f64(g).reshape(r2.shape), axis=-1)


def norm_abs(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    """max over vectors of | |got| - |ref| |."""
    return max(
        (float(np.abs(g - r).max(initial=0.0)) for r, g in map(_norms, ref, got)), default=0.0
    )


def norm_rel_above(ref: list[np.ndarray], got: list[np.ndarray], noise: float) -> float:
    """norm_rel over the vectors whose reference norm exceeds `noise` (the others: max_abs's)."""
    worst = 0.0
    for rn, gn in map(_norms, ref, got):
        keep = rn > noise
        if keep.any():
            worst = max(worst, float((np.abs(gn - rn)[keep] / rn[keep]).max()))
    return worst


# Relative metrics in half precision: over the values larger than HF's own absolute error of the
# same quantity in that dtype only (a raw logit of 0.005 carries bf16's 0.04; an all-zero float32
# vector, a bf16 norm of 0.01): a dtype cannot resolve a relative error under its own noise, and
# max_abs, always gated in half precision, holds those values. (metric, HF's own absolute error)
NOISE_FLOORED = {
    "max_rel": (max_rel_above, max_abs),
    "norm_rel": (norm_rel_above, norm_abs),
}


def norm_rel(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    """max over vectors (every token's, for token outputs) of | |got| / |ref| - 1 |: a lost or
    extra L2 normalisation (same direction, other length) that cosine cannot see. For normalised
    outputs this is | |got| - 1 |."""
    worst = 0.0
    for r, g in zip(ref, got):
        r2 = f64(r).reshape(-1, r.shape[-1]) if r.ndim else f64(r).reshape(1, 1)
        rn = np.linalg.norm(r2, axis=-1)
        gn = np.linalg.norm(f64(g).reshape(r2.shape), axis=-1)
        safe = np.where(rn > 0, rn, 1.0)
        rel = np.where(rn > 0, np.abs(gn - rn) / safe, np.where(gn > 0, np.inf, 0.0))
        worst = max(worst, float(rel.max(initial=0.0)))
    return worst


def rank_disagreement(
    ref: list[np.ndarray], got: list[np.ndarray], items: tuple, tolerance: Tolerance | None = None
) -> float:
    """Fraction of query groups whose documents the runner ranks otherwise than the reference.
    Reference ties (within the case's slack) may come in any order: the tie rule is
    harness.judge.metrics.ranks_as_reference, shared with the server's /rerank check."""
    groups = [g for g in query_groups(items) if len(g) > 1]
    if not groups:
        return 0.0
    r = np.array([float(np.asarray(x).reshape(-1)[0]) for x in ref])
    g = np.array([float(np.asarray(x).reshape(-1)[0]) for x in got])
    tol = tolerance if tolerance is not None else Tolerance()
    orders = [[idx[k] for k in np.argsort(-g[idx], kind="stable")] for idx in groups]
    bad = sum(1 for order in orders if not ranks_as_reference(order, r, tol))
    return bad / len(groups)


# bounds of scores, not of outputs: gated by harness.mteb.session (`parity mteb`) only
MTEB_BOUNDS = ("main_score",)


METRICS = {
    "cosine_distance": lambda ref, got, items, tol: cosine_distance(ref, got),
    "max_abs": lambda ref, got, items, tol: max_abs(ref, got),
    "max_rel": lambda ref, got, items, tol: max_rel(ref, got),
    "norm_rel": lambda ref, got, items, tol: norm_rel(ref, got),
    "rank_disagreement": rank_disagreement,
}


def slack(tolerance: Tolerance, value: float) -> float:
    """How far a score may be from the reference's `value` (and two reference scores apart and still
    count as tied): within every bound the case sets, max_abs and max_rel."""
    from harness.judge.metrics import REL_FLOOR

    rel = None if tolerance.max_rel is None else tolerance.max_rel * max(abs(value), REL_FLOOR)
    return min((b for b in (tolerance.max_abs, rel) if b is not None), default=0.0)


def ranks_as_reference(order: list[int], ref: np.ndarray, tolerance: Tolerance) -> bool:
    """THE tie rule of every rank check (the offline rank_disagreement metric and the server's
    /rerank answers): `order` lists items best first, and it agrees with the reference's scores
    when no item is placed above another whose reference score is higher by more than the case's
    slack (`slack`: within max_abs and max_rel of the lower score; exact equality when the case
    bounds neither). Reference scores that close are tied: a runner inside its tolerance may order
    them either way, so any order among them agrees. Every pair is checked, not only neighbours,
    so a chain of near-ties cannot hide a real inversion."""
    return all(
        ref[a] >= ref[b] - slack(tolerance, ref[b])
        for i, a in enumerate(order)
        for b in order[i + 1 :]
    )
