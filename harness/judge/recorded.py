"""The checks of what each side recorded per item beside its outputs: prompt token ids, the
prompt form the engine was handed, a server's usage.prompt_tokens and /rerank answers."""

from __future__ import annotations

import numpy as np

from harness.judge.answers import rerank_problem, usage_problem, usage_units
from harness.judge.verdict_types import Measurement
from harness.matrix.evidence import RequestRecord
from harness.matrix.schema import Tolerance


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
