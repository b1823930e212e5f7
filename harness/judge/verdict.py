"""The one place that decides pass / fail / xfail / xpass / skip / error. Everything else asks here.

- pass:  every gated metric within its bound, after a real comparison.
- fail:  a metric out of bounds; wrong count or shape; NaN/Inf; a recorded divergence that changed.
- error: a runner or the reference crashed, hung or refused; the reference is unusable (NaN/Inf,
         wrong count, empty) or degenerate; vLLM ran
         another model runner than asked; an invariance check did not take effect.
- skip:  the model is not available here, the platform cannot run the row faithfully (planned as a
         skip: harness.runners.platform.Platform.cannot_run), or a runner's own error message is
         one the case declares as a known environment limit (`skip_if_error`).
- xfail: a recorded divergence (`divergence:`) still diverging *inside its envelope* (`bounds:`),
         or raising its recorded error.
- xpass: a recorded divergence that now passes (strict: fails the gate until the mark goes).

A recorded envelope is measured in one dtype (`divergence.dtype`, float32 unless said). In another
dtype it is widened by that dtype's own bounds, and a runner within all of them is an xfail saying
the divergence is not observable there: a mark is found stale (xpass) in its own dtype only.

Token ids that differ from the reference's are a structural fail, unless the case records that
divergence (`divergence: {token_ids: differ, ...}`): then xfail only while the ids still differ AND
every metric stays within its bound or the recorded envelope; xpass when the ids agree and the
metrics pass; fail when the ids agree but a metric does not pass (the divergence changed); error
when the ids were not compared (nothing shows the divergence is still there).

A case that expects a refusal (`expect: {refused: REGEX}`) has no reference outputs: the refusal
rule is its reference. pass: every item refused with an error matching REGEX; fail: an item
accepted (answered) or an empty case; error: an item refused with another error (a crash is not
the refusal asked for) or no per-item record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from harness.engine.description import ENGINE
from harness.judge.check_proof import check_not_in_effect, check_unavailable
from harness.judge.refusal import refusal_divergence, refusal_verdict
from harness.judge.verdict_types import Measurement, Metric, Verdict

if TYPE_CHECKING:
    from harness.matrix.schema import Case, Divergence


def judge(case: "Case", runner: str, m: Measurement, dtype: str | None = None) -> Verdict:
    """The verdict of a comparison, with the case's recorded divergence applied. `dtype`: the
    dtype the comparison ran in (None: the one the divergence was measured in)."""
    case, unseen = _divergence_in_dtype(case, runner, m, dtype)
    v = unseen or _judge(case, runner, m)
    v.notes = dict(m.notes)
    return v


def _divergence_in_dtype(
    case: "Case", runner: str, m: Measurement, dtype: str | None
) -> tuple["Case", Verdict | None]:
    """A recorded envelope is a fact measured in one dtype (`divergence.dtype`). Judged in
    another dtype D, the case comes back with the envelope widened by D's bound of each metric
    (the runner's rounding in D comes on top of the divergence: |r_D - ref| <= |r - ref| +
    |r_D - r|; cosine distance adds as its square root, the sine of half the angle). A runner
    within every one of D's bounds is inside that envelope but does not show the divergence: an
    xfail that says it is not observable in D (the mark is found stale in its own dtype only;
    never xpass here, never a pass of the mark). A divergence recorded as raising or as token ids
    is the same in every dtype and judged as recorded."""
    div = case.divergence
    if dtype is None or div is None or runner not in div.runners or dtype == div.dtype:
        return case, None
    if div.bounds is None or not div.bounds.bounds():
        return case, None
    envelope = div.bounds.bounds()
    bound = {x.name: x.bound for x in m.metrics if x.bound is not None}
    # a metric this dtype leaves unbounded (reported only) is not held here: its rounding in the
    # dtype has no yardstick (e.g. rank_disagreement in half precision)
    widened = {n: _widen(n, e, bound.get(n)) for n, e in envelope.items()}
    clean = m.reference_problem is None and m.problem is None and m.degenerate is None
    if clean and div.token_ids is None and gate(m.metrics).status == "pass":
        seen = "; ".join(x.describe() for x in m.metrics if x.bound is not None)
        over = [n for n, e in envelope.items() if n in bound and e > bound[n]]
        why = (
            f"its envelope sits within them, so {dtype} cannot show it"
            if not over
            else f"its envelope exceeds the bound of {', '.join(over)}: if a {div.dtype} run "
            f"passes too, the mark is stale"
        )
        recorded = ", ".join(f"{n} <= {e:.3g}" for n, e in envelope.items())
        widened = {n: e for n, e in widened.items() if e is not None}
        return case, Verdict(
            "xfail",
            f"recorded divergence not observable in {dtype}: every metric within {dtype}'s "
            f"bounds ({seen}); {why}; the mark is held and found stale in {div.dtype} only "
            f"(measured in {div.dtype}: {div.reason}; envelope {recorded})",
            m.metrics,
            envelope=widened,
        )
    why = f"{div.reason}; envelope measured in {div.dtype}, widened by {dtype}'s bounds"
    wider = div.model_copy(update={"bounds": div.bounds.model_copy(update=widened), "reason": why})
    return case.model_copy(update={"divergence": wider}), None


def _widen(name: str, envelope: float, bound: float | None) -> float | None:
    """An envelope bound plus a dtype's bound of the same metric (None: the dtype gates it not)."""
    if bound is None:
        return None
    if name == "cosine_distance":
        return (envelope**0.5 + bound**0.5) ** 2
    return envelope + bound


def _judge(case: "Case", runner: str, m: Measurement) -> Verdict:
    if m.reference_problem is not None:
        return Verdict("error", m.reference_problem, m.metrics)  # the reference's, marked or not
    div = case.divergence
    if div is not None and div.token_ids is not None and runner in div.runners:
        return _token_divergence(case, runner, m)
    if m.problem is not None:
        return _divergence(case, runner, Verdict("fail", m.problem, m.metrics), structural=True)
    if m.degenerate is not None:
        return Verdict("error", m.degenerate, m.metrics)  # proves nothing, marked or not
    return _divergence(case, runner, gate(m.metrics))


def _token_divergence(case: "Case", runner: str, m: Measurement) -> Verdict:
    """A divergence recorded as `token_ids: differ` (see the module's docstring)."""
    div = case.divergence
    assert div is not None
    if m.problem is not None and m.token_ids != "differ":  # count, shape, NaN/Inf
        return _divergence(case, runner, Verdict("fail", m.problem, m.metrics), structural=True)
    if m.degenerate is not None:
        return Verdict("error", m.degenerate, m.metrics)
    if m.token_ids is None:
        return Verdict(
            "error",
            f"the recorded divergence is of token ids ({div.reason}) but the token ids were not "
            f"compared ({m.notes.get('token_ids', 'no token-id note')}): nothing shows it is "
            f"still there",
            m.metrics,
        )
    v = gate(m.metrics)
    if div.token_positions is not None and m.token_ids == "differ":
        where = sorted(div.token_positions)
        if m.id_positions is None or list(m.id_positions) != where:
            now = (
                f"at positions {_positions(m.id_positions)}"
                if m.id_positions is not None
                else "in length"
            )
            return Verdict(
                "fail",
                f"the recorded divergence changed: the token ids now differ {now}, recorded "
                f"only at {_positions(where)} ({m.problem})",
                v.metrics,
            )
    if m.token_ids == "equal":
        if v.status == "pass":
            return Verdict(
                "xpass",
                f"case is marked as tokenizing differently ({div.reason}) but the token ids now "
                f"agree and it passes: remove the mark",
                v.metrics,
            )
        return Verdict(
            "fail",
            f"the recorded divergence changed: the token ids now agree, but {v.reason} "
            f"(recorded: {div.reason})",
            v.metrics,
        )
    if v.status == "pass":  # ids differ, every metric within the case's own tolerance
        return Verdict(
            "xfail",
            f"expected divergence: {div.reason} (now: {m.problem}; every metric within tolerance)",
            v.metrics,
            envelope=div.bounds.bounds() if div.bounds is not None else {},
        )
    held = _divergence(case, runner, v)  # the envelope rule, as for any recorded divergence
    if held.status == "xfail":
        held.reason = f"{held.reason[:-1]}; {m.problem})"
    return held


def _positions(pos) -> str:
    """Positions for a message: the first ten, and how many more."""
    pos = list(pos)
    more = f" and {len(pos) - 10} more" if len(pos) > 10 else ""
    return ", ".join(map(str, pos[:10])) + more


def gate(metrics: list[Metric], problems: list[str] | None = None) -> Verdict:
    """pass when every bounded metric is within its bound and there is no problem; else fail."""
    failed = [m for m in metrics if not m.ok]
    reasons = [m.describe() for m in failed] + list(problems or [])
    return Verdict("fail" if reasons else "pass", "; ".join(reasons), metrics)


def runner_error(case: "Case", runner: str, status: str, reason: str, error: str | None) -> Verdict:
    """A runner that did not produce outputs. `error` is the error's own message (never a log
    tail: a log may mention anything); only it is matched against skip_if_error and
    divergence.error_match."""
    own = error or ""
    known = case.skip_if_error
    if status == "error" and known and runner in known.runners and known.error_match in own:
        return Verdict("skip", f"{reason} ({known.reason})")
    div = case.divergence
    if (
        status == "error"
        and div is not None
        and runner in div.runners
        and div.error_match
        and div.error_match in own
    ):
        return Verdict("xfail", f"expected divergence: {div.reason} (now: {reason})")
    return Verdict(status, reason)


def _divergence(case: "Case", runner: str, v: Verdict, structural: bool = False) -> Verdict:
    div = case.divergence
    if div is None or runner not in div.runners:
        return v
    if div.error_match is not None:  # recorded as raising: any output at all means it changed
        if v.status == "pass":
            return Verdict(
                "xpass",
                f"case is marked as raising ({div.reason}) but now passes: remove the mark",
                v.metrics,
            )
        return Verdict(
            "fail",
            f"the recorded divergence changed: it was recorded as raising "
            f"{div.error_match!r}, now it returns outputs: {v.reason}",
            v.metrics,
        )
    if div.problem_match is not None:  # recorded as malformed outputs: that problem, or changed
        return _malformed(div, v, structural)
    if structural:
        return Verdict(
            "fail",
            f"the recorded divergence changed: {v.reason} (recorded: {div.reason})",
            v.metrics,
        )
    if v.status == "pass":
        return Verdict(
            "xpass",
            f"case is marked as diverging ({div.reason}) but now passes: remove the mark",
            v.metrics,
        )
    envelope = div.bounds.bounds() if div.bounds is not None else {}
    by_name = {m.name: m for m in v.metrics}
    missing = [name for name in envelope if name not in by_name]
    outside = [
        f"{m.name} {m.value:.3g} > envelope {envelope[m.name]:.3g}"
        for m in v.metrics
        if m.name in envelope and not (np.isfinite(m.value) and m.value <= envelope[m.name])
    ]
    # a failing metric the envelope does not cover is a new kind of difference
    uncovered = [
        f"{m.name} {m.value:.3g} > {m.bound:.3g} (not in the envelope)"
        for m in v.metrics
        if not m.ok and m.name not in envelope and m.name not in div.at_ceiling
    ]
    # a metric recorded at its largest value must still be there (else the divergence changed)
    from harness.matrix.schema import METRIC_CEILINGS

    left = [
        f"{m.name} {m.value:.3g}, recorded at its largest value {METRIC_CEILINGS[m.name]:g}"
        for m in v.metrics
        if m.name in div.at_ceiling and m.value != METRIC_CEILINGS[m.name]
    ]
    outside += left
    missing += [name for name in div.at_ceiling if name not in by_name]
    if missing or outside or uncovered:
        what = "; ".join(outside + uncovered + [f"{n} not measured" for n in missing])
        return Verdict(
            "fail", f"the recorded divergence changed: {what} (recorded: {div.reason})", v.metrics
        )
    return Verdict(
        "xfail",
        f"expected divergence: {div.reason} (now: {v.reason}; inside the recorded envelope "
        + ", ".join(f"{k} <= {b:.3g}" for k, b in envelope.items())
        + "".join(f"; {k} at its largest value, not held by the envelope" for k in div.at_ceiling)
        + ")",
        v.metrics,
        envelope=dict(envelope),
    )


def _malformed(div: "Divergence", v: Verdict, structural: bool) -> Verdict:
    """A divergence recorded as malformed outputs (`problem_match`): xfail only on that problem."""
    assert div.problem_match is not None
    if structural and div.problem_match in v.reason:
        return Verdict("xfail", f"expected divergence: {div.reason} (now: {v.reason})")
    if v.status == "pass":
        return Verdict(
            "xpass",
            f"case is marked as returning malformed outputs ({div.reason}) but now passes: "
            f"remove the mark",
            v.metrics,
        )
    return Verdict(
        "fail",
        f"the recorded divergence changed: it was recorded as {div.problem_match!r}, now: "
        f"{v.reason}",
        v.metrics,
    )


def outcome_verdict(
    case: "Case",
    runner: str,
    ref,
    got,
    measure: Callable[[], Measurement],
    ref32=None,
    calibrated: bool = False,
    refusals: Callable[[], list[str | None] | None] | None = None,
    dtype: str | None = None,
) -> Verdict:
    """A case's verdict on one runner from the reference's and the runner's outcomes
    (harness.run.execute.RunOutcome). `measure` compares their outputs; it is called only when both
    produced outputs. Never `pass` without a comparison. `calibrated`: the bounds are k x the
    reference's own error, measured against `ref32` (HF in float32), which must then have run.
    `dtype`: the dtype the case ran in (a recorded divergence is judged in it, see `judge`)."""
    if got is None:
        return Verdict("error", "not run (the run was interrupted or the worker never reached it)")
    if got.status != "ok":
        return runner_error(case, runner, got.status, got.reason, got.error)
    from harness.matrix.runner_names import runner_info

    info = runner_info(runner)
    variant = info.variant if info.is_vllm else None
    actual = ENGINE.chosen_runner(got.info)
    if variant in ENGINE.forced_variants and actual != variant:
        return Verdict(
            "error",
            f"asked {ENGINE.name} for model runner {str(variant).upper()} but it ran "
            f"{str(actual).upper()} ({got.info.get('runner_evidence', 'no evidence')})",
        )
    unavailable = check_unavailable(case, got.info)
    if unavailable:
        return Verdict("skip", f"invariance check {case.check}: {unavailable}")
    not_in_effect = check_not_in_effect(case, got.info)
    if not_in_effect:
        return Verdict("error", not_in_effect)
    expected, why_none = ENGINE.expected_choice(case, got.info)
    auto = variant == ENGINE.default_variant
    if auto and why_none:
        return Verdict("error", f"default-runner audit: {why_none}")
    if auto and expected and actual != expected:
        why = ENGINE.why_chosen(got.info, "no reason recorded")
        return Verdict(
            "fail",
            f"default-runner audit: {ENGINE.name} chose {str(actual).upper()} but this family "
            f"expects {expected.upper()} ({why})",
        )
    if case.expect is not None:
        refused = refusals() if refusals else None
        return refusal_divergence(
            case, runner, refusal_verdict(case.expect.refused, refused), refused
        )
    if ref is None:
        return Verdict("error", "reference (hf) was not run")
    if ref.status != "ok":
        known = case.skip_if_error
        if (  # a reference that cannot run here for a known reason (e.g. its package missing)
            ref.status == "error"
            and known
            and "hf" in known.runners
            and known.error_match in (ref.error or "")
        ):
            return Verdict("skip", f"reference (hf) unavailable: {ref.reason} ({known.reason})")
        return Verdict(
            "skip" if ref.status == "skip" else "error",
            f"reference (hf) {ref.status}: {ref.reason}",
        )
    if calibrated and (ref32 is None or ref32.status != "ok"):
        why = "was not run" if ref32 is None else f"{ref32.status}: {ref32.reason}"
        return Verdict(
            "error",
            f"float32 reference (hf in float32, the yardstick of this case's "
            f"calibrated half-precision bounds) {why}",
        )
    try:
        m = measure()
    except Exception as e:  # noqa: BLE001 - a broken output file is this case's error only
        return Verdict("error", f"comparison failed: {type(e).__name__}: {e}")
    return judge(case, runner, m, dtype)
