"""Reading a matrix: YAML files (with `include`, `defaults`, `families` and `select`) merged
into validated Cases, every error naming its file and line; and the ways a run narrows them
(case globs, model groups, shards).

Layers merge defaults < family < case; an including file's defaults override the included ones'
and its `select` keeps only the cases whose id matches a glob."""

from __future__ import annotations

import copy
import fnmatch
import hashlib
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import BaseModel, ValidationError

from harness.matrix.request import RequestOptions, ServeOptions
from harness.matrix.schema import (
    MODEL_SOURCES,
    MODEL_TAGS,
    Case,
    Divergence,
    Matrix,
    MatrixError,
    SyntheticModel,
    Tolerance,
    Vocabulary,
)
from harness.matrix.tasks import task_kind
from harness.shards import parse_shard  # noqa: F401  (the one K/N rule; callers import it here)

TOP_LEVEL_KEYS = ("include", "defaults", "families", "cases", "select")
# Case fields the harness sets (file:line; on derived check cases, their base, check and options)
INTERNAL_KEYS = ("where", "variant_of", "check", "run_options")


class _Doc:
    """One parsed YAML file: plain data plus its node tree, for line numbers."""

    def __init__(self, path: Path):
        self.path = path
        try:
            text = path.read_text()
        except OSError as e:
            raise MatrixError(f"{path}: cannot read matrix: {e.strerror}") from None
        try:
            self.node = yaml.compose(text, Loader=yaml.SafeLoader)
            self.data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            problem = getattr(e, "problem", None) or str(e)
            raise MatrixError(f"{where}: invalid YAML: {problem}") from None
        if self.data is None:
            self.data = {}
        if not isinstance(self.data, dict):
            raise MatrixError(f"{path}:1: a matrix must be a mapping with keys {TOP_LEVEL_KEYS}")
        unknown = sorted(set(self.data) - set(TOP_LEVEL_KEYS))
        if unknown:
            raise MatrixError(
                f"{self.where(unknown[0])}: unknown top-level key {unknown[0]!r}; "
                f"valid keys: {', '.join(TOP_LEVEL_KEYS)}"
            )

    def line(self, *loc: str | int) -> int | None:
        node = self.node
        line = node.start_mark.line + 1 if node is not None else None
        for key in loc:
            if isinstance(node, yaml.MappingNode):
                match = [v for k, v in node.value if k.value == key]
                if not match:
                    break
                node = match[0]
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
                if key >= len(node.value):
                    break
                node = node.value[key]
            else:
                break
            line = node.start_mark.line + 1
        return line

    def where(self, *loc: str | int) -> str:
        return f"{self.path}:{self.line(*loc)}"


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _merge_layers(*layers: dict) -> dict:
    """Deep merge, except that a `model` of another `source` replaces the inherited one whole."""
    out: dict = {}
    for layer in layers:
        model = layer.get("model")
        if (
            isinstance(model, dict)
            and isinstance(out.get("model"), dict)
            and "source" in model
            and model["source"] != out["model"].get("source")
        ):
            out = {k: v for k, v in out.items() if k != "model"}
        out = _deep_merge(out, layer)
    return out


def _expect(doc: _Doc, value: Any, kind: type, *loc: str | int) -> Any:
    if not isinstance(value, kind):
        raise MatrixError(
            f"{doc.where(*loc)}: key {'.'.join(map(str, loc))!r} must be a "
            f"{'mapping' if kind is dict else 'list'}, got {type(value).__name__}"
        )
    return value


class _Layers:
    """Accumulates defaults, families and raw cases across included files."""

    def __init__(self) -> None:
        self.defaults: dict = {}
        self.defaults_src: list[_Doc] = []  # the files with `defaults:`, in the order merged
        self.families: dict[str, tuple[dict, _Doc]] = {}
        self.cases: list[tuple[dict, _Doc, int]] = []
        self.select: tuple[list[str], _Doc] | None = None
        self.digest = hashlib.sha256()  # every file read, in order
        self.files: list[str] = []


def _collect(path: Path, layers: _Layers, seen: tuple[Path, ...]) -> None:
    path = path.resolve()
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise MatrixError(f"{path}: include cycle: {chain}")
    doc = _Doc(path)
    layers.digest.update(str(path.name).encode() + b"\0" + path.read_bytes() + b"\0")
    layers.files.append(str(path))
    data = doc.data
    includes = data.get("include", [])
    if isinstance(includes, str):
        includes = [includes]
    _expect(doc, includes, list, "include")
    for i, inc in enumerate(includes):
        target = (path.parent / str(inc)).resolve()
        if not target.is_file():
            raise MatrixError(
                f"{doc.where('include', i)}: included file {inc!r} not found ({target})"
            )
        _collect(target, layers, (*seen, path))
    defaults = _expect(doc, data.get("defaults", {}) or {}, dict, "defaults")
    layers.defaults = _deep_merge(layers.defaults, defaults)
    if defaults:
        layers.defaults_src.append(doc)
    families = _expect(doc, data.get("families", {}) or {}, dict, "families")
    for name, fam in families.items():
        _expect(doc, fam, dict, "families", name)
        layers.families[str(name)] = (fam, doc)
    cases = _expect(doc, data.get("cases", []) or [], list, "cases")
    for i, raw in enumerate(cases):
        _expect(doc, raw, dict, "cases", i)
        layers.cases.append((raw, doc, i))
    if "select" in data:
        layers.select = (_expect(doc, data["select"], list, "select"), doc)


def _error_location(
    loc: tuple,
    raw: dict,
    doc: _Doc,
    i: int,
    fam: tuple[dict, _Doc] | None,
    fam_name: str,
    defaults: list[_Doc],
) -> str:
    """Find which layer (case, family, defaults) set the offending key, and its line."""
    key = loc[0] if loc else None
    if key is None or key in raw:
        return doc.where("cases", i, *loc)
    if fam is not None and key in fam[0]:
        return fam[1].where("families", fam_name, *loc)
    src = _defaults_source(defaults, loc)
    if src is not None:
        return src.where("defaults", *loc)
    return doc.where("cases", i)


def _defaults_source(defaults: list[_Doc], loc: tuple) -> _Doc | None:
    """The file whose `defaults:` holds the value at `loc`: of the files that set loc[0], the one
    that goes deepest along `loc` (merged last on a tie: it overrides the earlier ones)."""
    best, depth = None, 0
    for d in defaults:
        node, n = d.data.get("defaults"), 0
        for key in loc:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
                node = node[key]
            else:
                break
            n += 1
        if n and n >= depth:
            best, depth = d, n
    return best


def _format_validation(
    err: ValidationError,
    raw: dict,
    doc: _Doc,
    i: int,
    fam,
    fam_name: str,
    case_id: str,
    defaults: list[_Doc],
) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        # tagged unions add the tag as a path element; drop it for YAML lookup
        yaml_loc = loc
        if len(loc) > 1 and loc[0] == "model" and loc[1] in MODEL_TAGS:
            yaml_loc = (loc[0], *loc[2:])
        where = _error_location(yaml_loc, raw, doc, i, fam, fam_name, defaults)
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


def _moved_request_keys(merged: dict, locate, case_id: str) -> list[str]:
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


def load_matrix(path: str | Path, *, vocabulary: Vocabulary) -> Matrix:
    """Load, merge and validate a matrix file. Raises MatrixError listing every problem."""
    path = Path(path)
    layers = _Layers()
    _collect(path, layers, ())
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
        merged = _merge_layers(layers.defaults, fam[0] if fam else {}, raw)

        def locate(loc: tuple, raw=raw, doc=doc, i=i, fam=fam, fam_name=str(fam_name)) -> str:
            return _error_location(loc, raw, doc, i, fam, fam_name, layers.defaults_src)

        moved = _moved_request_keys(merged, locate, case_id)
        if moved:
            problems += moved
            continue
        reserved = _reserved(merged, case_id)
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
                _format_validation(e, raw, doc, i, fam, str(fam_name), case_id, layers.defaults_src)
            )
            continue
        problem = _case_problem(case, locate, doc.where("cases", i))
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


def _reserved(merged: dict, case_id: str) -> str | None:
    """A key only the harness sets, or an id spelt as a derived case's; None when neither."""
    internal = sorted(set(INTERNAL_KEYS) & set(merged))
    if internal:
        return f"key {internal[0]!r} is set by the harness, not a matrix"
    if "@" in case_id:
        return "'@' is reserved for derived check cases (<id>@<check>)"
    return None


def _family_of(
    fam_name: Any, raw: dict, doc: Any, i: int, layers: _Layers, case_id: str
) -> tuple[Any, str | None]:
    """A case's family (its layer and source) by name, or the problem of an unknown one."""
    if fam_name is None:
        return None, None
    fam = layers.families.get(str(fam_name))
    if fam is not None:
        return fam, None
    at = _error_location(("family",), raw, doc, i, None, "", layers.defaults_src)
    valid = ", ".join(sorted(layers.families)) or "(none defined)"
    return None, (
        f"{at}: case {case_id!r}, key 'family': "
        f"unknown family {fam_name!r}; valid families: {valid}"
    )


def _case_problem(case: Case, locate: Callable[[tuple], str], where: str) -> str | None:
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
