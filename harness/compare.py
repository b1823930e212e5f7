"""Metrics per task and verdicts. Every metric is "lower is better" and gates as value <= bound.

Verdicts: pass, fail, skip(reason), error(reason), plus xfail (a recorded divergence that still
diverges) and xpass (a recorded divergence that now passes: strict, so it fails the gate until
someone removes the mark).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.inputs import query_groups
from harness.matrix import Case, Tolerance

PASSING = ("pass", "xfail", "skip")
REL_FLOOR = 1e-6  # |ref| below this counts as this, so max_rel stays finite near zero
DEGENERATE_SPREAD = 1e-3  # reference outputs varying less than this (relative) prove nothing


@dataclass
class Metric:
    name: str
    value: float
    bound: float | None

    @property
    def ok(self) -> bool:
        return self.bound is None or (np.isfinite(self.value) and self.value <= self.bound)


@dataclass
class Verdict:
    status: str  # pass | fail | skip | error | xfail | xpass
    reason: str = ""
    metrics: list[Metric] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in PASSING


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def cosine_distance(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    """max over items (and over tokens, for token outputs) of 1 - cos(ref, got)."""
    worst = 0.0
    for r, g in zip(ref, got):
        r2 = _f64(r).reshape(-1, r.shape[-1]) if r.ndim else _f64(r).reshape(1, 1)
        g2 = _f64(g).reshape(r2.shape)
        num = (r2 * g2).sum(-1)
        den = np.linalg.norm(r2, axis=-1) * np.linalg.norm(g2, axis=-1)
        cos = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(np.abs(r2 - g2).max(-1) == 0, 1.0, 0.0))
        worst = max(worst, float((1.0 - cos).max()))
    return worst


def max_abs(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    return max(float(np.abs(_f64(r) - _f64(g)).max(initial=0.0)) for r, g in zip(ref, got))


def max_rel(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    return max(
        float((np.abs(_f64(r) - _f64(g)) / np.maximum(np.abs(_f64(r)), REL_FLOOR)).max(initial=0.0))
        for r, g in zip(ref, got)
    )


def rank_disagreement(ref: list[np.ndarray], got: list[np.ndarray], items: tuple) -> float:
    """Fraction of query groups whose documents are ranked in a different order."""
    groups = [g for g in query_groups(items) if len(g) > 1]
    if not groups:
        return 0.0
    r = np.array([float(np.asarray(x).reshape(-1)[0]) for x in ref])
    g = np.array([float(np.asarray(x).reshape(-1)[0]) for x in got])
    bad = sum(1 for idx in groups if not np.array_equal(np.argsort(-r[idx], kind="stable"), np.argsort(-g[idx], kind="stable")))
    return bad / len(groups)


METRICS = {
    "cosine_distance": lambda ref, got, items: cosine_distance(ref, got),
    "max_abs": lambda ref, got, items: max_abs(ref, got),
    "max_rel": lambda ref, got, items: max_rel(ref, got),
    "rank_disagreement": rank_disagreement,
}


def structural_problem(ref: list[np.ndarray], got: list[np.ndarray], n_inputs: int) -> str | None:
    """Count, shape and finiteness problems, each with its own message."""
    if len(ref) != n_inputs:
        return f"reference returned {len(ref)} outputs for {n_inputs} inputs"
    if len(got) != n_inputs:
        return f"wrong count: {len(got)} outputs for {n_inputs} inputs"
    for i, (r, g) in enumerate(zip(ref, got)):
        if r.size == 0 or g.size == 0:
            who = "reference" if r.size == 0 else "runner"
            return (f"empty {who} output at item {i} (shape {list((r if r.size == 0 else g).shape)}); "
                    f"for a PRM this means no step tag was found: check step_tag_id")
        if r.shape != g.shape:
            return f"shape mismatch at item {i}: reference {list(r.shape)}, runner {list(g.shape)}"
    for label, arrays in (("runner", got), ("reference", ref)):
        for i, a in enumerate(arrays):
            a64 = _f64(a)
            if np.isnan(a64).any():
                return f"NaN in {label} output at item {i}"
            if np.isinf(a64).any():
                return f"Inf in {label} output at item {i}"
    return None


def degenerate_reference(ref: list[np.ndarray]) -> str | None:
    """A reference whose outputs barely vary across inputs makes any comparison meaningless."""
    if len(ref) < 2:
        return None
    summaries = [(_f64(a).mean(axis=0) if a.ndim >= 2 else _f64(a)).reshape(-1) for a in ref]
    if len({s.shape for s in summaries}) > 1:
        return None
    distinct = len({np.round(s, 6).tobytes() for s in summaries})
    if distinct < max(2, len(summaries) // 2):
        return (f"reference gives only {distinct} distinct outputs for {len(summaries)} distinct inputs; "
                f"the model or tokenizer is degenerate (e.g. every word is [UNK]) and a comparison proves little")
    stack = np.stack(summaries)
    spread = float((stack.max(0) - stack.min(0)).max())
    scale = max(float(np.abs(stack).mean()), 1e-12)
    if spread <= DEGENERATE_SPREAD * scale:
        return (f"reference outputs do not vary across inputs (spread {spread:.2e} vs scale {scale:.2e}); "
                f"the model is degenerate and a comparison would prove nothing")
    return None


def compare(case: Case, runner: str, tolerance: Tolerance, metric_names: tuple[str, ...],
            ref: list[np.ndarray], got: list[np.ndarray], items: tuple) -> Verdict:
    problem = structural_problem(ref, got, len(items))
    if problem is None:
        problem = degenerate_reference(ref)
        if problem is not None:
            return apply_divergence(case, runner, Verdict("error", problem))
    if problem is not None:
        return apply_divergence(case, runner, Verdict("fail", problem))
    bounds = tolerance.bounds()
    metrics = [Metric(m, METRICS[m](ref, got, items), bounds.get(m)) for m in metric_names]
    metrics += [Metric(m, METRICS[m](ref, got, items), b) for m, b in bounds.items() if m not in metric_names]
    failed = [m for m in metrics if not m.ok]
    if failed:
        reason = "; ".join(f"{m.name} {m.value:.3g} > {m.bound:.3g}" for m in failed)
        return apply_divergence(case, runner, Verdict("fail", reason, metrics))
    return apply_divergence(case, runner, Verdict("pass", "", metrics))


def apply_divergence(case: Case, runner: str, verdict: Verdict) -> Verdict:
    div = case.divergence
    if div is None or runner not in div.runners:
        return verdict
    if div.error_match is not None:  # a runner known to raise
        if verdict.status == "error" and div.error_match in verdict.reason:
            return Verdict("xfail", f"expected divergence: {div.reason} (now: {verdict.reason})", verdict.metrics)
        if verdict.status == "pass":
            return Verdict("xpass", f"case is marked as raising ({div.reason}) but now passes: remove the mark",
                           verdict.metrics)
        return verdict
    if verdict.status not in ("pass", "fail"):
        return verdict
    if verdict.status == "fail":
        recorded = f"; recorded: {div.measured}" if div.measured else ""
        return Verdict("xfail", f"expected divergence: {div.reason} (now: {verdict.reason}{recorded})", verdict.metrics)
    return Verdict("xpass", f"case is marked as diverging ({div.reason}) but now passes: remove the mark",
                   verdict.metrics)
