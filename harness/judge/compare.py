"""Metrics per task. Every metric is "lower is better" and gates as value <= bound; what a
measurement means (pass, fail, xfail, ...) is decided by harness.judge.verdict alone."""

from __future__ import annotations

import numpy as np

from harness.judge.answers import rerank_problem, usage_problem, usage_units
from harness.judge.metrics import DEGENERATE_SPREAD, METRICS, MTEB_BOUNDS, NOISE_FLOORED, f64
from harness.judge.side import Side
from harness.judge.verdict import Measurement, Metric, Verdict, judge
from harness.matrix.evidence import RequestRecord
from harness.matrix.inputs import distinct_inputs
from harness.matrix.schema import Case, Tolerance


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


def token_problem(
    ref_ids: list | None, got_ids: list | None, items: tuple
) -> tuple[str | None, str, str | None]:
    """(problem, note, state): the reference's token ids per item against the runner's prompt
    token ids. Tokenisation regressions (a template inserting "None", a lost EOS, truncation on
    the wrong side) change the ids before any number does. Items the reference did not tokenize
    as one sequence (images, MaxSim pairs) are not compared, and the note says so. The state is
    "differ", "equal" (compared and equal) or None (not compared)."""
    if ref_ids is None or got_ids is None:
        who = "reference" if ref_ids is None else "runner"
        return None, f"token ids not compared: the {who} recorded none", None
    compared = 0
    for i, (r, g) in enumerate(zip(ref_ids, got_ids)):
        if r is None or g is None:
            continue
        compared += 1
        if r != g:
            pos = next((p for p, (a, b) in enumerate(zip(r, g)) if a != b), min(len(r), len(g)))
            at_r = r[pos] if pos < len(r) else "(end)"
            at_g = g[pos] if pos < len(g) else "(end)"
            return (
                (
                    f"token ids differ at item {i}, position {pos}: reference {at_r}, "
                    f"runner {at_g} (lengths {len(r)} and {len(g)}; "
                    f"input {str(items[i])[:80]!r})"
                ),
                "",
                "differ",
            )
    if compared == 0:
        return (
            None,
            "token ids not compared: the reference recipe tokenizes no item as one sequence",
            None,
        )
    return None, f"token ids equal for {compared} of {len(items)} items", "equal"


def differing_positions(ref_ids: list | None, got_ids: list | None) -> tuple[int, ...] | None:
    """The positions at which the ids of any item differ (sorted), over the items both sides
    tokenized; None when an item's two sequences differ in length (positions do not line up)."""
    out: set[int] = set()
    for r, g in zip(ref_ids or [], got_ids or []):
        if r is None or g is None:
            continue
        if len(r) != len(g):
            return None
        out.update(p for p, (a, b) in enumerate(zip(r, g)) if a != b)
    return tuple(sorted(out))


def form_problem(
    forms: list[str] | None, got_meta: list | None, ref_meta: list | None
) -> tuple[str | None, str]:
    """(problem, note): each item reached the model in its prompt form (`forms`, from the case),
    read from what the engine was handed (harness.runners.engine_trace: text, bare token ids, or
    embeddings with their digest), never from what the runner meant to send. Embeddings must be
    the ones the runner made (its own digest), one row per token id compared with the reference's,
    and the reference's own inputs_embeds where it recorded them. A runner that sent text, or
    left no evidence, fails: a form that is not proven proves nothing."""
    if not forms:
        return None, ""
    got_meta = RequestRecord.read_all(got_meta) if got_meta is not None else None
    ref_meta = RequestRecord.read_all(ref_meta) if ref_meta else None
    if got_meta is None or len(got_meta) != len(forms):
        have = "none" if got_meta is None else f"{len(got_meta)} items"
        return (
            f"prompt forms not proven: the runner recorded {have} of what the engine was handed "
            f"for {len(forms)} items"
        ), ""
    same_as_ref, by_request, ref_has = 0, 0, 0
    for i, (want, m) in enumerate(zip(forms, got_meta)):
        handed = m.engine_input
        if handed is None and m.request_input is not None:
            # a server: its engine is out of reach; the request body is what a user sends
            handed, by_request = m.request_input, by_request + 1
        if handed is None:
            return (
                f"prompt form not proven at item {i}: no record of what the engine was handed "
                f"(the case sends it as {want})"
            ), ""
        if handed != want:
            return f"item {i} was to reach the model as {want}; the engine was handed {handed}", ""
        if want != "embeds":
            continue
        sha, made = m.engine_embeds_sha256, m.embeds_sha256
        if sha is None or sha != made:
            return (
                f"item {i}: the engine received other prompt embeddings ({str(sha)[:12]}) than "
                f"the runner made ({str(made)[:12]})"
            ), ""
        rows, ids = (m.engine_embeds_shape or [None])[0], m.prompt_token_ids
        if rows is not None and ids is not None and rows != len(ids):
            return f"item {i}: {rows} embedding rows for {len(ids)} token ids", ""
        theirs = ref_meta[i].embeds_sha256 if ref_meta and i < len(ref_meta) else None
        if theirs is not None:
            ref_has += 1
            if theirs != sha:
                return (
                    f"item {i}: the runner's prompt embeddings ({sha[:12]}) are not the "
                    f"reference's inputs_embeds ({theirs[:12]})"
                ), ""
            same_as_ref += 1
    counts = ", ".join(f"{f} {forms.count(f)}" for f in dict.fromkeys(forms))
    n_embeds = forms.count("embeds")
    tail = ""
    if n_embeds and ref_has:
        tail = f"; embeddings identical to the reference's for {same_as_ref} of {n_embeds}"
    elif n_embeds:  # a golden keeps ids, not digests: E is the runner's, made from those ids
        tail = "; the reference recorded no embeddings digest (its token ids were compared)"
    where = (
        f" (for {by_request} items read from the HTTP request, not from the engine)"
        if by_request
        else ""
    )
    who = "vLLM was sent" if by_request else "the engine was handed"
    return None, f"{who} each item in its form ({counts}){tail}{where}"


def calibrated_metrics(
    tolerance: Tolerance,
    names: list[str],
    ref: list[np.ndarray],
    ref32: list[np.ndarray],
    got: list[np.ndarray],
    items: tuple,
) -> list[Metric]:
    """Half precision: each metric of the runner against HF in float32 (`ref32`), bounded by
    k x the same metric of HF in this dtype (`ref`) against HF in float32 + the floor."""
    assert tolerance.k is not None
    floors = tolerance.bounds()
    out = []
    for m in names:
        if m in NOISE_FLOORED:  # over the values above HF's own absolute error in this dtype
            metric, noise = NOISE_FLOORED[m]
            at = noise(ref32, ref)
            own, value = metric(ref32, ref, at), metric(ref32, got, at)
        else:
            own = METRICS[m](ref32, ref, items, tolerance)
            value = METRICS[m](ref32, got, items, tolerance)
        floor = floors.get(m)
        bound = None if floor is None else tolerance.k * own + floor
        out.append(Metric(m, value, bound, ref_error=own))
    return out


def checks_yardstick(
    tolerance: Tolerance, ref: list[np.ndarray], ref32: list[np.ndarray] | None, items: tuple
) -> tuple[Tolerance, list[np.ndarray]]:
    """The tolerance and reference of the checks beside the metrics (a server's /rerank scores,
    order and ties). With calibrated half-precision bounds (`k`), those of the metrics: HF in
    float32, and max_abs / max_rel at k x HF's own error + the floor, so a check is never held
    to the bare floor on the numbers the metric holds to the calibrated bound; else the case's."""
    if tolerance.k is None or ref32 is None:
        return tolerance, ref
    floors = tolerance.bounds()
    bounds = {
        name: tolerance.k * METRICS[name](ref32, ref, items, tolerance) + floors[name]
        for name in ("max_abs", "max_rel")
        if name in floors
    }
    return Tolerance(**bounds), ref32


# What was recorded beside the outputs, each check by name, with what it says when its evidence
# is absent. Each check's tolerance is the case's own (rank ties: harness.judge.metrics).
ABSENT = {
    "usage": "usage.prompt_tokens not compared: the runner reported none "
    "(only a server's answers do)",
    "rerank": "rerank order not compared: the runner gave no /rerank answers",
}


def recorded_checks(
    tolerance: Tolerance,
    ref: list[np.ndarray],
    items: tuple,
    ref_ids: list | None,
    got_ids: list | None,
    got_meta: list[RequestRecord] | None,
    forms: list[str] | None = None,
    ref_meta: list[RequestRecord] | None = None,
) -> Measurement:
    """The checks of what each side recorded per item besides its outputs: prompt token ids
    (token_problem), a server's usage.prompt_tokens and /rerank answers (harness.judge.answers).
    Every check whose evidence exists runs; the notes (returned) say what each found or why it
    could not run, and `token_ids` whether the ids compared equal. A failed check is a
    Measurement with its problem; token ids or usage the
    runner recorded that the reference did not is an error, never a note."""
    if ref_ids is None and (any(x is not None for x in got_ids or []) or usage_units(got_meta)):
        # expected and could not run: an error, never a note (e.g. a golden without token ids)
        return Measurement(
            reference_problem="the runner recorded prompt token ids (or usage) but "
            "the reference recorded none, so the token-id and "
            "usage checks could not run"
        )
    problem, note, ids_state = token_problem(ref_ids, got_ids, items)
    if problem is not None:
        return Measurement(
            problem=problem,
            notes={"token_ids": problem},
            token_ids="differ",
            id_positions=differing_positions(ref_ids, got_ids),
        )
    notes = {"token_ids": note}
    problem, note = form_problem(forms, got_meta, ref_meta)
    if problem is not None:
        return Measurement(problem=problem, notes={**notes, "prompt_form": problem})
    if note:
        notes["prompt_form"] = note
    for name, check in (
        ("usage", lambda: usage_problem(ref_ids, got_meta, items)),
        ("rerank", lambda: rerank_problem(tolerance, ref, items, got_meta)),
    ):
        problem, note = check()
        if problem is not None:
            return Measurement(problem=problem, notes={**notes, name: problem})
        notes[name] = note or ABSENT[name]
    return Measurement(notes=notes, token_ids=ids_state)


def measure(
    tolerance: Tolerance,
    metric_names: tuple[str, ...],
    ref_side: Side,
    got_side: Side,
    items: tuple,
    ref32_side: Side | None = None,
    forms: list[str] | None = None,
) -> Measurement:
    """The one comparison every path makes (live, golden, pytest: harness.run.assemble
    .measure_outcomes), given whatever evidence each side has. An unusable reference first (an
    error), structural problems next (they make metrics meaningless), then what each side recorded
    beside its outputs (recorded_checks: token ids, a server's usage and /rerank answers), then a
    degenerate reference, then every metric of the task plus any other the tolerance bounds. A
    tolerance with `k` (half precision) is calibrated against `ref32_side`, HF in float32."""
    if ref_side.outputs is None or got_side.outputs is None:
        who = "the reference" if ref_side.outputs is None else "the runner"
        raise ValueError(f"{who} recorded no outputs to compare")
    ref, got = ref_side.outputs, got_side.outputs
    ref32 = ref32_side.outputs if ref32_side is not None else None
    ref_ids, got_ids, got_meta = ref_side.token_ids, got_side.token_ids, got_side.meta
    ref_meta = ref_side.meta
    if tolerance.k is not None and ref32 is None:
        raise ValueError(
            "calibrated half-precision bounds (k) need the float32 reference's outputs"
        )
    unusable = reference_problem(ref, len(items))
    if unusable is None and tolerance.k is not None:
        unusable = reference_problem(ref32, len(items))  # type: ignore[arg-type]
        unusable = unusable and f"the float32 reference: {unusable}"
    if unusable is not None:
        return Measurement(reference_problem=unusable)
    problem = structural_problem(ref, got, len(items))
    if problem is None and tolerance.k is not None:
        problem = structural_problem(ref32, got, len(items))
        problem = problem and f"against the float32 reference: {problem}"
    if problem is not None:
        return Measurement(problem=problem)
    check_tol, check_ref = checks_yardstick(tolerance, ref, ref32, items)
    found = recorded_checks(
        check_tol, check_ref, items, ref_ids, got_ids, got_meta, forms, ref_meta
    )
    failed = found.problem is not None or found.reference_problem is not None
    if failed and found.token_ids != "differ":
        return found
    if failed:
        # token ids differ: a structural problem, but measured on, so that a divergence recorded
        # as `token_ids: differ` can hold the rest to its envelope (harness.judge.verdict)
        try:
            metrics = _metrics(tolerance, metric_names, ref, got, items, ref32, dict(found.notes))
        except Exception:  # noqa: BLE001 - unmeasurable: the token-id problem alone stands
            return found
        return Measurement(
            problem=found.problem,
            degenerate=degenerate_reference(ref, items),
            metrics=metrics.metrics,
            notes=metrics.notes,
            token_ids="differ",
            id_positions=found.id_positions,
        )
    notes = dict(found.notes)
    degenerate = degenerate_reference(ref, items)
    if degenerate is not None:
        return Measurement(degenerate=degenerate, notes=notes, token_ids=found.token_ids)
    m = _metrics(tolerance, metric_names, ref, got, items, ref32, notes)
    m.token_ids = found.token_ids
    return m


def _metrics(
    tolerance: Tolerance,
    metric_names: tuple[str, ...],
    ref: list[np.ndarray],
    got: list[np.ndarray],
    items: tuple,
    ref32: list[np.ndarray] | None,
    notes: dict[str, str],
) -> Measurement:
    """Every metric of the task plus any other the tolerance bounds (calibrated with `k`)."""
    bounds = tolerance.bounds()
    unowned = sorted(set(bounds) - set(METRICS) - set(MTEB_BOUNDS))
    if unowned:  # a bound nothing measures must never be dropped silently
        raise ValueError(
            f"bounds {unowned} have no metric in harness.judge.metrics.METRICS nor in the MTEB path"
        )
    names = list(metric_names) + [m for m in bounds if m not in metric_names and m in METRICS]
    for m in MTEB_BOUNDS:
        if m in bounds:
            notes[m] = (
                f"{m} <= {bounds[m]:g} is gated by `parity mteb` (MTEB scores), "
                f"not by this comparison"
            )
    if tolerance.k is not None:
        assert ref32 is not None
        calibrated = calibrated_metrics(tolerance, names, ref, ref32, got, items)
        return Measurement(metrics=calibrated, notes=notes)
    values = {m: METRICS[m](ref, got, items, tolerance) for m in names}
    return Measurement(metrics=[Metric(m, values[m], bounds.get(m)) for m in names], notes=notes)


def compare(
    case: Case,
    runner: str,
    tolerance: Tolerance,
    metric_names: tuple[str, ...],
    ref: list[np.ndarray],
    got: list[np.ndarray],
    items: tuple,
    ref32: list[np.ndarray] | None = None,
    *,
    ref_ids: list | None = None,
    got_ids: list | None = None,
    got_meta: list[RequestRecord] | None = None,
    forms: list[str] | None = None,
    ref_meta: list[RequestRecord] | None = None,
) -> Verdict:
    """measure, then judge: the same checks as every other path, given the same evidence."""
    m = measure(
        tolerance,
        metric_names,
        Side(ref, ref_meta, ref_ids),
        Side(got, got_meta, got_ids),
        items,
        None if ref32 is None else Side(ref32),
        forms=forms,
    )
    return judge(case, runner, m)
