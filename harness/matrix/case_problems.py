"""What is wrong with a case of a matrix (harness.matrix.loader asks), each problem at the key
that says so: a validation error at the layer that set the key, with the valid keys; a request
option outside `request:`; a key only the harness sets; a required metric without a bound, too
few distinct inputs, a bound nothing gates, a dtype without tolerances."""

from __future__ import annotations

from typing import Callable

from pydantic import BaseModel, ValidationError

from harness.matrix.layers import YamlDoc, error_location
from harness.matrix.request import RequestOptions, ServeOptions
from harness.matrix.schema import (
    MODEL_SOURCES,
    MODEL_TAGS,
    Case,
    Divergence,
    SyntheticModel,
    Tolerance,
)
from harness.matrix.tasks import task_kind

# Case fields the harness sets (file:line; on derived check cases, their base, check and options)
INTERNAL_KEYS = ("where", "variant_of", "check", "run_options")


def format_validation(
    err: ValidationError,
    raw: dict,
    doc: YamlDoc,
    i: int,
    fam,
    fam_name: str,
    case_id: str,
    defaults: list[YamlDoc],
) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        # tagged unions add the tag as a path element; drop it for YAML lookup
        yaml_loc = loc
        if len(loc) > 1 and loc[0] == "model" and loc[1] in MODEL_TAGS:
            yaml_loc = (loc[0], *loc[2:])
        where = error_location(yaml_loc, raw, doc, i, fam, fam_name, defaults)
        key = ".".join(str(p) for p in yaml_loc) or "(case)"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            model_fields = _fields_for(yaml_loc)
            msg = (
                f"unknown key; valid keys: {', '.join(model_fields)}"
                if model_fields
                else "unknown key"
            )
        elif e["type"] == "missing":
            msg = "required key is missing (set it on the case, its family or in defaults)"
        lines.append(f"{where}: case {case_id!r}, key {key!r}: {msg}")
    return "\n".join(lines)


def _fields_for(loc: tuple) -> list[str]:
    models: dict[str, type[BaseModel]] = {
        "model": SyntheticModel,
        "divergence": Divergence,
        "request": RequestOptions,
    }
    if loc[:2] == ("request", "serve") and len(loc) == 3:
        return list(ServeOptions.model_fields)
    if len(loc) == 1:
        return [f for f in Case.model_fields if f not in INTERNAL_KEYS]
    if len(loc) == 3 and loc[0] == "tolerances":
        return list(Tolerance.model_fields)
    if len(loc) == 2 and loc[0] in models:
        if loc[0] == "model":
            return sorted({f for m in MODEL_SOURCES for f in m.model_fields})
        return list(models[loc[0]].model_fields)
    return []


def moved_request_keys(merged: dict, locate, case_id: str) -> list[str]:
    """A request option at a case's top level (where it was before `request:`), refused with
    where it is and how to spell it now."""
    return [
        f"{locate((key,))}: case {case_id!r}, key {key!r}: request options live under "
        f"`request:` now; write `request: {{{key}: ...}}` instead of `{key}: ...`"
        for key in RequestOptions.model_fields
        if key in merged
    ]


def _unbounded_required(case: Case) -> str | None:
    """A task's required metrics must each have a bound for every dtype the case lists: a metric
    with no bound cannot fail, so a case gated on nothing would pass anything."""
    groups = task_kind(case.task).required
    missing = []
    for dtype, tol in case.tolerances.items():
        bounded = tol.bounds()
        for group in groups:
            if not any(m in bounded for m in group):
                missing.append(f"{dtype} has no bound for {' or '.join(group)}")
    if case.mteb_tasks:
        missing += [
            f"{dtype} has no bound for main_score (the case has mteb_tasks)"
            for dtype, tol in case.tolerances.items()
            if tol.main_score is None
        ]
    if not missing:
        return None
    return (
        f"task {case.task!r} must gate "
        + ", ".join(" or ".join(g) for g in groups)
        + " for every dtype: "
        + "; ".join(missing)
    )


def _ungated_bounds(case: Case) -> str | None:
    """A main_score bound is gated by `parity mteb` only, which scores a case's mteb_tasks and
    applies no divergence: anywhere else it would gate nothing."""
    if not case.mteb_tasks:
        dtypes = [d for d, tol in case.tolerances.items() if tol.main_score is not None]
        if dtypes:
            return (
                f"key 'tolerances': main_score is bounded for {dtypes} but the case has no "
                f"mteb_tasks, so nothing would gate it; add mteb_tasks or remove the bound"
            )
    if (
        case.divergence is not None
        and case.divergence.bounds is not None
        and case.divergence.bounds.main_score is not None
    ):
        return (
            "key 'divergence.bounds': main_score cannot be an envelope bound (`parity mteb` "
            "applies no divergence); valid envelope keys: cosine_distance, max_abs, max_rel, "
            "rank_disagreement"
        )
    return None


def reserved_problem(merged: dict, case_id: str) -> str | None:
    """A key only the harness sets, or an id spelt as a derived case's; None when neither."""
    internal = sorted(set(INTERNAL_KEYS) & set(merged))
    if internal:
        return f"key {internal[0]!r} is set by the harness, not a matrix"
    if "@" in case_id:
        return "'@' is reserved for derived check cases (<id>@<check>)"
    return None


def case_problem(case: Case, locate: Callable[[tuple], str], where: str) -> str | None:
    """What a validated case still lacks (a bound, distinct inputs, a gate, its dtype's
    tolerances), at the key that says so; None when nothing."""
    unbounded = _unbounded_required(case)
    if unbounded:
        return f"{locate(('tolerances',))}: case {case.id!r}, key 'tolerances': {unbounded}"
    from harness.matrix.inputs import distinct_inputs, input_set

    n_distinct = distinct_inputs(input_set(case.inputs).items)
    if n_distinct < 2:
        return (
            f"{locate(('inputs',))}: case {case.id!r}, key 'inputs': input set {case.inputs!r} "
            f"has {n_distinct} distinct input(s); a case needs >= 2 distinct inputs, "
            f"or nothing shows that the reference varies with its input (a "
            f"constant model would pass)"
        )
    ungated = _ungated_bounds(case)
    if ungated:
        key = ungated.split("'")[1].split(".")[0]
        return f"{locate((key,))}: case {case.id!r}, {ungated}"
    if case.dtype is not None and case.dtype not in case.tolerances:
        return (
            f"{where}: case {case.id!r}, key 'tolerances': no entry for dtype "
            f"{case.dtype!r}; has: {sorted(case.tolerances)}"
        )
    return None
