"""The verdict of a case that expects a refusal (`expect.refused`): its rules, asked by
harness.judge.verdict (the one place verdicts are decided), and a divergence recorded as
`accepted` (a release that answers what it must refuse)."""

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


def accepted_divergence(
    case: "Case", runner: str, v: Verdict, refused: list[str | None] | None
) -> Verdict:
    """A refusal case's verdict under a divergence recorded as `accepted` (the runner answers what
    it must refuse): xfail while it answers every item, xpass once it refuses as expected, and a
    failure when it does anything else (some items refused, another error)."""
    div = case.divergence
    if div is None or not div.accepted or runner not in div.runners or v.status == "error":
        return v
    if v.status == "pass":
        return Verdict(
            "xpass",
            f"case is marked as answering what it must refuse ({div.reason}) but now refuses as "
            f"expected: remove the mark",
            notes=v.notes,
        )
    if refused and all(e is None for e in refused):
        return Verdict(
            "xfail", f"expected divergence: {div.reason} (now: {v.reason})", notes=v.notes
        )
    return Verdict(
        "fail",
        f"the recorded divergence changed: it was recorded as answering every item, now: "
        f"{v.reason} (recorded: {div.reason})",
        notes=v.notes,
    )


def _items(idx: list[int]) -> str:
    return ", ".join(map(str, idx[:8])) + (f" and {len(idx) - 8} more" if len(idx) > 8 else "")
