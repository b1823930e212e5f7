"""Reading a matrix: YAML files (with `include`, `defaults`, `families` and `select`) merged
into validated Cases, every error naming its file and line; and the ways a run narrows them
(case globs, model groups, shards).

Layers merge defaults < family < case; an including file's defaults override the included ones'
and its `select` keeps only the cases whose id matches a glob. The files as layers are
harness.matrix.layers; what can be wrong with a case, harness.matrix.case_problems."""

from __future__ import annotations

import fnmatch
import hashlib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.matrix.case_problems import (
    case_problem,
    format_validation,
    moved_request_keys,
    reserved_problem,
)
from harness.matrix.layers import Layers, collect, error_location, merge_layers
from harness.matrix.schema import Case, Matrix, MatrixError, Vocabulary
from harness.shards import parse_shard  # noqa: F401  (the one K/N rule; callers import it here)


def load_matrix(path: str | Path, *, vocabulary: Vocabulary) -> Matrix:
    """Load, merge and validate a matrix file. Raises MatrixError listing every problem."""
    path = Path(path)
    layers = Layers()
    collect(path, layers, ())
    problems: list[str] = []
    cases: list[Case] = []
    seen_ids: dict[str, str] = {}
    checks_at: dict[str, str] = {}  # case id -> file:line of its `checks`
    for raw, doc, i in layers.cases:
        case_id = str(raw.get("id", f"#{i}"))
        fam_name = raw.get("family", layers.defaults.get("family"))
        fam, unknown = _family_of(fam_name, raw, doc, i, layers, case_id)
        if unknown:
            problems.append(unknown)
            continue
        merged = merge_layers(layers.defaults, fam[0] if fam else {}, raw)

        def locate(loc: tuple, raw=raw, doc=doc, i=i, fam=fam, fam_name=str(fam_name)) -> str:
            return error_location(loc, raw, doc, i, fam, fam_name, layers.defaults_src)

        moved = moved_request_keys(merged, locate, case_id)
        if moved:
            problems += moved
            continue
        reserved = reserved_problem(merged, case_id)
        if reserved:
            problems.append(f"{doc.where('cases', i)}: case {case_id!r}: {reserved}")
            continue
        merged["where"] = doc.where("cases", i)
        if isinstance(merged.get("inputs"), dict):  # a set from files or inline: read it now
            from harness.matrix.input_files import InputError, load

            try:
                merged["inputs"] = load(merged["inputs"], doc.path.parent).name
            except InputError as e:
                problems.append(f"{locate(('inputs',))}: case {case_id!r}, key 'inputs': {e}")
                continue
        try:
            case = Case.model_validate(merged, context={"vocabulary": vocabulary})
        except ValidationError as e:
            problems.append(
                format_validation(e, raw, doc, i, fam, str(fam_name), case_id, layers.defaults_src)
            )
            continue
        problem = case_problem(case, locate, doc.where("cases", i))
        if problem:
            problems.append(problem)
            continue
        if case.id in seen_ids:
            problems.append(
                f"{case.where}: case id {case.id!r} already used at {seen_ids[case.id]}"
            )
            continue
        seen_ids[case.id] = case.where
        checks_at[case.id] = locate(("checks",))
        cases.append(case)
    if layers.select is not None:
        cases, unmatched = _selected(layers.select, cases, seen_ids)
        problems += unmatched
    # after `select`: an including file's defaults may give unselected cases other runners
    from harness.matrix.checks import misfit_checks

    problems += [
        f"{checks_at[c.id]}: case {c.id!r}, key 'checks': {m}"
        for c in cases
        for m in misfit_checks(c)
    ]
    if problems:
        raise MatrixError(f"{len(problems)} problem(s) in matrix {path}:\n" + "\n".join(problems))
    if not cases:
        raise MatrixError(f"{path}: the matrix has no cases")
    return Matrix(
        path=str(path),
        cases=sorted(cases, key=lambda c: c.id),
        sha256=layers.digest.hexdigest(),
        files=layers.files,
    )


def _family_of(
    fam_name: Any, raw: dict, doc: Any, i: int, layers: Layers, case_id: str
) -> tuple[Any, str | None]:
    """A case's family (its layer and source) by name, or the problem of an unknown one."""
    if fam_name is None:
        return None, None
    fam = layers.families.get(str(fam_name))
    if fam is not None:
        return fam, None
    at = error_location(("family",), raw, doc, i, None, "", layers.defaults_src)
    valid = ", ".join(sorted(layers.families)) or "(none defined)"
    return None, (
        f"{at}: case {case_id!r}, key 'family': "
        f"unknown family {fam_name!r}; valid families: {valid}"
    )


def _selected(
    select: tuple, cases: list[Case], seen_ids: dict[str, str]
) -> tuple[list[Case], list[str]]:
    """The cases a `select:` names, and a problem for each pattern that matches none."""
    patterns, sdoc = select
    unmatched = [
        f"{sdoc.where('select', j)}: key 'select': {pat!r} matches no case; "
        f"cases: {', '.join(sorted(seen_ids))}"
        for j, pat in enumerate(patterns)
        if not any(fnmatch.fnmatchcase(c, str(pat)) for c in seen_ids)
    ]
    return [c for c in cases if any(fnmatch.fnmatchcase(c.id, str(p)) for p in patterns)], unmatched


def filter_cases(matrix: Matrix, case_globs: list[str] | None = None) -> list[Case]:
    if not case_globs:
        return list(matrix.cases)
    return [c for c in matrix.cases if any(fnmatch.fnmatchcase(c.id, g) for g in case_globs)]


def model_group(case: Case) -> str:
    """Cases sharing weights share a group: they stay on one shard / one xdist worker."""
    return hashlib.sha256(case.model.model_dump_json().encode()).hexdigest()[:12]


def shard_cases(cases: list[Case], k: int, n: int) -> list[Case]:
    """Shard K of N: model groups ordered by their first case id, dealt round-robin, so every
    agent computes the same split and a model loads on one shard only."""
    groups: dict[str, list[Case]] = {}
    for c in sorted(cases, key=lambda c: c.id):
        groups.setdefault(model_group(c), []).append(c)
    ordered = sorted(groups.values(), key=lambda g: g[0].id)
    return [c for i, g in enumerate(ordered) if i % n == k - 1 for c in g]
