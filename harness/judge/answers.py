"""What a server's answers must satisfy besides their numbers: `usage.prompt_tokens` is the number
of tokens the reference ran; a /rerank answer ranks the documents as the reference's scores do,
maps each result to its document by `index`, and with top_n returns exactly the reference's top
n. Problems found here fail the case (harness.judge.verdict)."""

from __future__ import annotations

import numpy as np

from harness.judge.metrics import ranks_as_reference, slack
from harness.matrix.evidence import RequestRecord
from harness.matrix.inputs import query_groups
from harness.matrix.schema import Tolerance


def rerank_problem(
    tolerance: Tolerance, ref: list[np.ndarray], items: tuple, metas: list[RequestRecord] | None
) -> tuple[str | None, str]:
    """(problem, note) for the /rerank answers recorded per item (RequestRecord.rerank, from
    harness.runners.serve.match_rerank); ("", "") when the runner did not rerank."""
    reranks = [m.rerank for m in (metas or [])]
    if not any(reranks):
        return None, ""
    r = np.array([float(np.asarray(x).reshape(-1)[0]) for x in ref])
    groups = query_groups(items)
    top_n = None
    for g, idx in enumerate(groups):
        head = f"/rerank, query group {g} ({str(items[idx[0]][0])[:40]!r})"
        got = {j: reranks[j] for j in idx if j < len(reranks) and reranks[j] is not None}
        if len(got) != len(idx):
            return f"{head}: no rerank answer for item(s) {sorted(set(idx) - set(got))}", ""
        wrong_doc = [j for j in idx if not got[j].document_matches]
        if wrong_doc:
            return (
                f"{head}: the result for item(s) {wrong_doc} carries another document's text "
                f"(index mapped wrongly)",
                "",
            )
        expected = sorted(idx, key=lambda j: -r[j])
        order = sorted(idx, key=lambda j: got[j].rank)
        if not ranks_as_reference(order, r, tolerance):
            return (
                f"{head}: the server ranks items {order}, the reference's scores rank them "
                f"{expected} (reference scores {[round(float(r[j]), 6) for j in order]} in the "
                f"server's order)"
            ), ""
        top_n = got[idx[0]].top_n
        if top_n is None:
            continue
        want = min(top_n, len(idx))
        top = sorted((j for j in idx if got[j].top_rank is not None), key=lambda j: got[j].top_rank)
        if len(top) != want:
            return (
                f"{head}: top_n={top_n} returned {len(top)} documents for {len(idx)}, "
                f"expected {want}",
                "",
            )
        rest = [j for j in idx if j not in top]
        best_rest = max(rest, key=lambda j: r[j]) if rest else None
        if not ranks_as_reference(top, r, tolerance) or (
            best_rest is not None and not ranks_as_reference([top[-1], best_rest], r, tolerance)
        ):
            return (
                f"{head}: top_n={top_n} returned items {top}, the reference's top {want} are "
                f"{expected[:want]}",
                "",
            )
        for j in top:
            diff = abs(got[j].top_score - r[j])
            if diff > slack(tolerance, r[j]):
                return (
                    f"{head}: top_n={top_n} scores item {j} {got[j].top_score:.7g}, "
                    f"the reference "
                    f"{r[j]:.7g} (|diff| {diff:.3g} beyond the case's tolerance)"
                ), ""
    note = f"rerank: {len(groups)} query groups ranked as the reference, results matched by index"
    return None, note + (f"; top_n={top_n} returned each group's top {top_n}" if top_n else "")


def usage_problem(
    ref_ids: list | None, metas: list[RequestRecord] | None, items: tuple
) -> tuple[str | None, str]:
    """(problem, note): each answer's `usage.prompt_tokens` against the number of tokens the
    reference tokenized for its items (one item a request; a /rerank answer covers its query
    group); ("", "") when no answer had usage."""
    units = usage_units(metas)
    if not units:
        return None, ""
    if ref_ids is None:
        return None, "usage.prompt_tokens not compared: the reference recorded no token ids"
    compared = 0
    for what, idx, count in units:
        if any(j >= len(ref_ids) or ref_ids[j] is None for j in idx):
            continue
        compared += len(idx)
        ran = sum(len(ref_ids[j]) for j in idx)
        if count != ran:
            return (
                f"usage.prompt_tokens of {what} is {count}, but the reference ran {ran} tokens "
                f"(input {str(items[idx[0]])[:80]!r})"
            ), ""
    if compared == 0:
        return (
            None,
            "usage.prompt_tokens not compared: the reference tokenizes no item as one sequence",
        )
    return (
        None,
        f"usage.prompt_tokens equal to the reference's token count for {compared} of "
        f"{len(items)} items",
    )


def usage_units(metas: list[RequestRecord] | None) -> list[tuple[str, list[int], int]]:
    """(what, its item indices, usage.prompt_tokens) per answer that reported usage."""
    units, groups, batches = [], {}, {}
    for i, m in enumerate(metas or []):
        if m.usage_prompt_tokens is not None:
            units.append((f"item {i}", [i], int(m.usage_prompt_tokens)))
        rerank = m.rerank
        if rerank is not None and rerank.prompt_tokens is not None:
            groups.setdefault(rerank.group, (int(rerank.prompt_tokens), []))[1].append(i)
        batch = m.batch  # several items in one request (items_per_request)
        if batch is not None and batch.prompt_tokens is not None:
            batches.setdefault(batch.request, (int(batch.prompt_tokens), []))[1].append(i)
    return (
        units
        + [
            (f"/rerank query group {g} (items {idx})", idx, n)
            for g, (n, idx) in sorted(groups.items())
        ]
        + [(f"request {r} (items {idx})", idx, n) for r, (n, idx) in sorted(batches.items())]
    )
