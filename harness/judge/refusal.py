"""The verdict of a case that expects a refusal (`expect.refused`): its rules, asked by
harness.judge.verdict (the one place verdicts are decided), and its recorded divergence (a
release that answers what it must refuse, or refuses it with another error)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.judge.verdict_types import Verdict

if TYPE_CHECKING:
    from harness.matrix.schema import Case


def refusal_verdict(pattern: str, refused: list[str | None] | None) -> Verdict:
    """The verdict of a case that expects every item refused with an error matching `pattern`,
    from what the runner recorded per item: the error it raised, or None when it answered."""
    import re

    rule = f"the expected outcome is a refusal matching {pattern!r}; no HF reference applies"
    if refused is None:
        return Verdict("error", f"no per-item outcome was recorded ({rule})")
    if not refused:
        return Verdict("fail", f"no item was sent, so no refusal was seen ({rule})")
    accepted = [i for i, e in enumerate(refused) if e is None]
    other = [(i, e) for i, e in enumerate(refused) if e is not None and not re.search(pattern, e)]
    notes = {"refusal": f"{len(refused) - len(accepted) - len(other)} of {len(refused)} refused"}
    if accepted:
        return Verdict(
            "fail",
            f"accepted a request it must refuse: item(s) {_items(accepted)} answered ({rule})",
            notes=notes,
        )
    if other:
        i, e = other[0]
        return Verdict(
            "error",
            f"refused item(s) {_items([i for i, _ in other])} with another error than expected "
            f"({rule}); item {i}: {e[:300]}",
            notes=notes,
        )
    return Verdict(
        "pass",
        f"refused as expected, all {len(refused)} items ({rule}): {refused[0][:200]}",
        notes=notes,
    )


def refusal_divergence(
    case: "Case", runner: str, v: Verdict, refused: list[str | None] | None
) -> Verdict:
    """A refusal case's verdict under its recorded divergence: `accepted` (the runner answers what
    it must refuse) or `error_match` (it refuses with another error, e.g. an HTTP 500 where a
    clear refusal is due). xfail while every item does that, xpass once it refuses as expected,
    a failure when it does a mix of those; any other error, or no per-item record, is an error."""
    div = case.divergence
    if div is None or runner not in div.runners or refused is None:
        return v
    if v.status == "pass":
        return Verdict(
            "xpass",
            f"case is marked as not refusing as expected ({div.reason}) but now refuses as "
            f"expected: remove the mark",
            notes=v.notes,
        )
    import re

    crashes = [
        e
        for e in refused
        if e is not None
        and not re.search(case.expect.refused, e)
        and not (div.error_match and div.error_match in e)
    ]
    if crashes:  # neither the refusal asked for nor the recorded error: a crash stays an error
        return Verdict(
            "error",
            f"an item failed with neither the expected refusal nor the recorded divergence "
            f"({div.reason}): {crashes[0][:300]}",
            notes=v.notes,
        )
    if div.accepted:
        held, recorded = all(e is None for e in refused), "answering every item"
    else:
        held = all(e is not None and div.error_match in e for e in refused)
        recorded = f"refusing every item with {div.error_match!r}"
    if refused and held:
        return Verdict(
            "xfail", f"expected divergence: {div.reason} (now: {v.reason})", notes=v.notes
        )
    return Verdict(
        "fail",
        f"the recorded divergence changed: it was recorded as {recorded}, now: {v.reason} "
        f"(recorded: {div.reason})",
        notes=v.notes,
    )


def _items(idx: list[int]) -> str:
    return ", ".join(map(str, idx[:8])) + (f" and {len(idx) - 8} more" if len(idx) > 8 else "")
