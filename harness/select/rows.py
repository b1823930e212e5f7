"""Which (case, runner) rows a change can affect, and why: `parity select` and `parity run
--changed-files / --vllm-diff`.

Each changed file gets one rule and one reason. vLLM files are mapped with what vLLM's own source
says (`harness.select.vllm_source`): a model file selects the cases whose architecture's module
imports it; pooler files select the cases of their pooling level; runner code selects the rows of
its model runner; entrypoints select offline or server rows. Docs, tests and CI files select
nothing. This project's files: a matrix its cases, a golden its case, refmodels the cases built on
it, a recipe module the cases of its recipes, a synthetic builder module the cases of its
architectures, anything else in harness/ every row. A file no rule knows selects every row, and
says so.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from harness.engine import target
from harness.matrix.checks import expand_checks
from harness.matrix.runner_names import REFERENCE_RUNNER, runner_info
from harness.matrix.schema import Case, Matrix, SyntheticModel
from harness.select.vllm_source import CONFIG_MAP_FILE, MODELS_DIR, REGISTRY, VllmSource

Origin = Literal[
    "any", "vllm"
]  # `--vllm-diff` names only vLLM files; `--changed-files` either kind
# which rows a rule touches: every row, every vLLM row, one model runner's, offline or server rows
Rows = Literal["all", "vllm", "v1", "v2", "offline", "server"]

WORKER = "vllm/v1/worker/"
V2_PACKAGES = (f"{WORKER}gpu/", f"{WORKER}cpu/")  # Model Runner V2 (GPU, and its CPU subclass)
V1_RUNNERS = (f"{WORKER}gpu_model_runner.py", f"{WORKER}cpu_model_runner.py")
V2_RUNNERS = (f"{WORKER}gpu/model_runner.py", f"{WORKER}cpu/model_runner.py")
ENTRYPOINTS = "vllm/entrypoints/"
OFFLINE_ENTRY = f"{ENTRYPOINTS}llm.py"
SERVER_ENTRY = f"{ENTRYPOINTS}openai/api_server.py"  # what the vllm-serve-* runners start
POOLER = "vllm/model_executor/layers/pooler"
ADAPTERS = f"{MODELS_DIR}/adapters.py"  # wraps a converted architecture (Qwen3Model -> pooling)
# the vLLM call each harness task makes (harness.runners.vllm / serve): which API a file serves
API_OF_TASK = {
    "embed": "embed",
    "classify": "classify",
    "score": "score",
    "token_embed": "pooling",
    "token_classify": "pooling",
    "reward": "pooling",
    "step_reward": "pooling",
    "embed&token_classify": "pooling",
}
API_WORDS = {
    "embed": {"embed", "embedding", "embeddings"},
    "classify": {"classify", "classification"},
    "score": {"score", "scoring", "rerank"},
    "pooling": {"pooling"},
}
NO_BEHAVIOUR_DIRS = (
    "docs/",
    "tests/",
    ".buildkite/",
    ".github/",
    ".ci/",
    "benchmarks/",
    "examples/",
    "vllm/benchmarks/",
)
NO_BEHAVIOUR_FILES = (
    "LICENSE",
    "CODEOWNERS",
    "MANIFEST.in",
    ".gitignore",
    ".pre-commit-config.yaml",
    "mkdocs.yaml",
    ".readthedocs.yaml",
    ".markdownlint.yaml",
    ".shellcheckrc",
)
BUILD = (
    "csrc/",
    "cmake/",
    "requirements/",
    "CMakeLists.txt",
    "setup.py",
    "pyproject.toml",
    "noxfile.py",
    "ci/",
    "harness/",
)


class SelectionError(ValueError):
    """The change cannot be read (a git range unknown to git, a folder that is not a checkout)."""


@dataclass(frozen=True)
class Effect:
    """What one changed file can affect: the cases (None: every case) and which of their rows."""

    path: str
    rule: str
    reason: str
    cases: frozenset[str] | None = frozenset()
    rows: Rows = "vllm"

    def picks(self, case: Case, runner: str) -> bool:
        base = case.variant_of or case.id
        if self.cases is not None and base not in self.cases:
            return False
        return _in_rows(self.rows, case, runner)


def _in_rows(rows: Rows, case: Case, runner: str) -> bool:
    info = runner_info(runner)
    if info.is_reference:
        return rows == "all"
    if rows in ("all", "vllm"):
        return True
    if rows in ("offline", "server"):
        return info.is_server == (rows == "server")
    variant = info.variant if info.is_vllm else None
    if variant == "auto":  # the runner vLLM picks; unknown expectation: either
        want = case.expected_auto_runner
        if isinstance(want, dict):  # by release: the vLLM under test's, else either runner named
            want, _ = case.expected_auto_for(target.vllm_version())
            return want is None and rows in case.expected_auto_runner.values() or want == rows
        return want in (None, rows)
    return variant == rows


@dataclass(frozen=True)
class CaseFacts:
    arch: str | None
    model_files: frozenset[str] | None  # None: vLLM's module for the case is unknown here
    api: str
    token_level: bool  # pooled per token (token_* tasks, reward, late-interaction score)
    late_interaction: bool
    config_fixes: tuple[str, ...] = ()  # models/config.py classes vLLM applies to the architecture


def case_architecture(case: Case, base_dir: Path) -> str | None:
    """The architecture vLLM runs: the case's `hf_overrides` architectures where it gives them
    (e.g. an original Qwen3-Reranker, a Qwen3ForCausalLM, run as Qwen3ForSequenceClassification
    through adapters.py), else the one it reads from config.json (a synthetic case names it)."""
    overridden = (case.engine.get("hf_overrides") or {}).get("architectures")
    if overridden:
        return overridden[0]
    if isinstance(case.model, SyntheticModel):
        return case.model.arch
    from harness.models.resolve import stored_model_dir

    try:
        cfg = json.loads((stored_model_dir(case.model, base_dir) / "config.json").read_text())
    except Exception:  # noqa: BLE001 - a model not here has an unknown architecture, selected widely
        return None
    return (cfg.get("architectures") or [None])[0]


def case_facts(case: Case, source: VllmSource, base_dir: Path) -> CaseFacts:
    arch = case_architecture(case, base_dir)
    found = source.module_of(arch, case.engine.get("model_impl")) if arch else None
    files = None
    if found is not None:
        module, converted = found
        start = source.module_files(module) + ([ADAPTERS] if converted else [])
        files = source.closure(start, lambda f: f.startswith(MODELS_DIR + "/"))
    late = arch in source.late_interaction_archs
    token = case.task in ("token_embed", "token_classify", "reward", "step_reward") or (
        case.task == "score" and late
    )
    fixes = tuple(source.config_fixes(arch, case.engine.get("model_impl"))) if arch else ()
    # serve.api pooling: an embed or classify case the server runners send to /pooling
    api = "pooling" if case.request.serve.api == "pooling" else API_OF_TASK[case.task]
    return CaseFacts(arch, files, api, token, late, fixes)


@dataclass
class Context:
    """What the rules consult: the cases (checks expanded), their facts, vLLM's source."""

    matrix: Matrix
    cases: list[Case]
    facts: dict[str, CaseFacts]
    source: VllmSource

    def ids(self, keep) -> frozenset[str]:
        return frozenset(
            c.id for c in self.cases if c.variant_of is None and keep(c, self.facts[c.id])
        )

    @functools.cached_property
    def worker_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        return _worker_sets(self.source)

    @functools.cached_property
    def entry_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        """Entrypoint files the offline LLM class imports, and those vLLM's server imports."""
        inside = lambda f: f.startswith(ENTRYPOINTS)  # noqa: E731
        return self.source.closure([OFFLINE_ENTRY], inside), self.source.closure(
            [SERVER_ENTRY], inside
        )


def _worker_sets(source: VllmSource) -> tuple[frozenset[str], frozenset[str]]:
    """Files of V1's model runner and of V2's, as their imports say. V1's runner imports a helper or
    two from V2's package: those count for V1 too, but not what they import in turn."""
    top = lambda f: f.startswith(WORKER) and "/" not in f[len(WORKER) :]  # noqa: E731
    v1 = source.closure(list(V1_RUNNERS), top) | {
        f for r in V1_RUNNERS if source.exists(r) for f in source.imports(r) if f.startswith(WORKER)
    }
    v2 = source.closure(list(V2_RUNNERS), lambda f: f.startswith(WORKER))
    return frozenset(v1), frozenset(v2)


def _api_of_entrypoint(path: str) -> str | None:
    """The one pooling API an entrypoint file serves (`pooling/scoring/...`, `serving_score.py`)."""
    rest = path[len(ENTRYPOINTS) :]
    sub = rest[len("pooling/") :].split("/")[0] if rest.startswith("pooling/") else Path(rest).stem
    words = set(re.split(r"[_./]", sub))
    apis = [api for api, ws in API_WORDS.items() if words & ws]
    return apis[0] if len(apis) == 1 else None


def _vllm_effect(path: str, ctx: Context) -> Effect:
    every = lambda rule, why: Effect(path, rule, why, None, "vllm")  # noqa: E731
    if path in (REGISTRY, f"{MODELS_DIR}/__init__.py"):
        return every("model-registry", "vLLM's model registry: every architecture")
    if path.startswith(MODELS_DIR + "/"):
        return _model_file_effect(path, ctx)
    if path.startswith(POOLER):
        if "/seqwise/" in path:
            return Effect(
                path,
                "pooler",
                "sequence-level pooler: embed, classify, cross-encoder score",
                ctx.ids(lambda c, f: not f.token_level),
            )
        if "/tokwise/" in path:
            return Effect(
                path,
                "pooler",
                "token-level pooler: token_embed, token_classify, reward, MaxSim score",
                ctx.ids(lambda c, f: f.token_level),
            )
        return every("pooler", "task-generic pooler code: every pooling case")
    if path.startswith("vllm/v1/pool/") and ("late_interaction" in path or "maxsim" in path):
        return Effect(
            path,
            "pooler",
            "late-interaction (MaxSim) scoring",
            ctx.ids(lambda c, f: f.late_interaction),
        )
    if path in (
        "vllm/pooling_params.py",
        "vllm/tasks.py",
        "vllm/config/pooler.py",
    ) or path.startswith("vllm/v1/pool/"):
        return every("pooling", "task-generic pooling module: every pooling case")
    if path.startswith(WORKER):
        return _worker_effect(path, ctx)
    if path.startswith(ENTRYPOINTS):
        return _entrypoint_effect(path, ctx)
    return every("unknown", "no narrower rule for this vLLM file: every vLLM row (conservative)")


def _model_file_effect(path: str, ctx: Context) -> Effect:
    """A file of vLLM's models package: the cases whose architecture's module imports it."""
    src, known = ctx.source, ctx.source.exists(path)
    every = lambda rule, why: Effect(path, rule, why, None, "vllm")  # noqa: E731
    if not known:
        return every(
            "model",
            f"not in the vLLM source read ({src.root}): cannot tell which architectures "
            "import it, so every case",
        )
    if path == CONFIG_MAP_FILE:
        return _config_map_effect(path, ctx)
    if not src.reached_from_registry(path, [ADAPTERS]):
        return every(
            "model",
            "no registered architecture's module imports it: vLLM reads it "
            "by name elsewhere, so every case (conservative)",
        )
    cases = ctx.ids(lambda c, f: f.model_files is None or path in f.model_files)
    unknown = sorted(ctx.ids(lambda c, f: f.model_files is None))
    used = sorted({ctx.facts[c].arch or "?" for c in cases})
    why = (
        f"imported by the vLLM module of {', '.join(used)}"
        if used
        else "the vLLM module of no case's architecture imports it"
    )
    pooled, poolers = _pooler_importers(path, ctx)
    if poolers:  # e.g. adapters.py's _load_st_projector, the ST Dense of every embed model
        cases = cases | pooled
        why += f"; imported by the pooler ({', '.join(poolers)}): the cases of its level"
    if unknown:
        why += f" (selected as well, architecture not known here: {', '.join(unknown)})"
    return Effect(path, "model", why, cases, "vllm")


def _worker_effect(path: str, ctx: Context) -> Effect:
    """Worker code: one model runner's rows, or both runners'."""
    known = ctx.source.exists(path)
    every = lambda rule, why: Effect(path, rule, why, None, "vllm")  # noqa: E731
    v1, v2 = ctx.worker_sets
    in_v1, in_v2 = path in v1, path in v2 or (not known and path.startswith(V2_PACKAGES))
    if in_v1 != in_v2:
        which = "v1" if in_v1 else "v2"
        return Effect(
            path,
            f"{which}-runner",
            f"Model Runner {which.upper()} code: its rows only",
            None,
            which,
        )
    return every(
        "worker",
        "worker code both model runners use"
        if in_v1
        else "worker code above the model runners (or not in the source read): both runners",
    )


def _entrypoint_effect(path: str, ctx: Context) -> Effect:
    """An entrypoint: the offline rows, the server's, or both, of its API's cases."""
    known = ctx.source.exists(path)
    api = _api_of_entrypoint(path)
    cases = ctx.ids(lambda c, f: f.api == api) if api else None
    scope = f"the {api} API" if api else "every pooling API"
    offline, server = (path in files for files in ctx.entry_sets)
    if not known or offline == server:
        where = "used offline (LLM) and by the server" if known else "not in the source read"
        return Effect(
            path,
            "entrypoint",
            f"entrypoint {where}: offline and server rows, {scope}",
            cases,
            "vllm",
        )
    rows: Rows = "offline" if offline else "server"
    return Effect(
        path,
        f"{rows}-entrypoint",
        f"{rows} entrypoint ({'LLM' if offline else 'vllm serve'}), {scope}",
        cases,
        rows,
    )


def _pooler_importers(path: str, ctx: Context) -> tuple[frozenset[str], list[str]]:
    """The pooler files importing a models-package file (directly), and the cases of their
    pooling level as the pooler rule gives them: a model file the poolers call (adapters.py's
    sentence-transformers projector loader) reaches models that never import it."""
    root = ctx.source.root
    users = sorted(
        rel
        for rel in (str(p.relative_to(root)) for p in (root / POOLER).rglob("*.py"))
        if path in ctx.source.imports(rel)
    )
    cases: frozenset[str] = frozenset()
    for rel in users:
        if "/seqwise/" in rel:
            cases |= ctx.ids(lambda c, f: not f.token_level)
        elif "/tokwise/" in rel:
            cases |= ctx.ids(lambda c, f: f.token_level)
        else:
            cases |= ctx.ids(lambda c, f: True)
    return cases, users


def _config_map_effect(path: str, ctx: Context) -> Effect:
    """models/config.py: vllm/config/ looks its classes up by architecture name (MODELS_CONFIG_MAP,
    the hybrid fix); the modules that import it (for the base class) count too."""
    configured = ctx.ids(lambda c, f: bool(f.config_fixes))
    imported = ctx.ids(lambda c, f: f.model_files is None or path in f.model_files)
    fixes = sorted(
        {f"{ctx.facts[c].arch}: {fix}" for c in configured for fix in ctx.facts[c].config_fixes}
    )
    users = sorted({ctx.facts[c].arch or "?" for c in imported - configured})
    why = "the config fixes vLLM applies by architecture name: " + (
        "; ".join(fixes) or "none of the cases'"
    )
    if users:
        why += f"; imported by the vLLM module of {', '.join(users)}"
    return Effect(path, "model-config", why, configured | imported, "vllm")


def _refmodel_archs(path: Path) -> set[str]:
    """The keys of harness.models.refmodels.REFERENCE_ARCHS, read from the file (importing it
    needs torch)."""
    for node in ast.parse(path.read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if (
            isinstance(target, ast.Name)
            and target.id == "REFERENCE_ARCHS"
            and isinstance(node.value, ast.Dict)
        ):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return set()


# packages whose modules register themselves (harness.plugins.Discovery): a module selects the
# cases of what it registers, found by the call that registers it
PLUGIN_PACKAGES = {
    "harness/runners/hf": ("recipe", "recipe module"),
    "harness/models/synthetic": ("register", "synthetic builder"),
}


def _registered_names(path: Path, call: str) -> set[str]:
    """The first argument of every `call("name", ...)` in a module, statement or decorator
    (read from the file, as refmodels.py is)."""
    return {
        node.args[0].value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == call
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def sibling_users(package_dir: Path, stem: str) -> set[str]:
    """The modules of a plugin package that import module `stem` of it, directly or through
    another one (a helper one module shares reaches what every importer registers)."""
    dotted = ".".join(package_dir.parts)
    imports: dict[str, set[str]] = {}
    for file in package_dir.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                mod = node.module if node.level == 0 else f"{dotted}.{node.module}"
                if mod.startswith(dotted + "."):
                    found.add(mod[len(dotted) + 1 :].split(".")[0])
        imports[file.stem] = found
    users, todo = {stem}, [stem]
    while todo:
        used = todo.pop()
        for mod, its in imports.items():
            if used in its and mod not in users:
                users.add(mod)
                todo.append(mod)
    return users


def _plugin_effect(path: str, ctx: Context) -> Effect | None:
    """A recipe module selects the cases whose reference recipe it registers; a synthetic
    builder module the synthetic cases of the architectures it registers. Their package's
    __init__ (the registry, shared helpers) falls to the every-row rule."""
    file = Path(path)
    if str(file.parent) not in PLUGIN_PACKAGES or file.suffix != ".py":
        return None
    if file.stem.startswith("_"):
        return None
    call, what = PLUGIN_PACKAGES[str(file.parent)]
    if not file.is_file():
        return Effect(path, what, f"{what} not readable here: every case", None, "all")
    names = set()
    for stem in sorted(sibling_users(file.parent, file.stem)):
        names |= _registered_names(file.parent / f"{stem}.py", call)
    if call == "recipe":
        from harness.runners import hf

        unknown = names - set(hf.RECIPE_VERSIONS)
        picked = ctx.ids(
            lambda c, f: f.arch is None or hf.resolve_recipe(c.task, f.arch, c.reference) in names
        )
        reason = f"the cases whose reference recipe is {', '.join(sorted(names)) or 'none'}"
    else:
        from harness.models import synthetic

        unknown = names - set(synthetic.ARCHS)
        archs = {a for n in names - unknown for a in synthetic.ARCHS[n].archs}
        picked = ctx.ids(lambda c, f: isinstance(c.model, SyntheticModel) and c.model.arch in archs)
        reason = f"the synthetic checkpoints of {', '.join(sorted(archs)) or 'no architecture'}"
    if unknown or not names:
        why = (
            f"registers {sorted(unknown)}, unknown to the registry"
            if unknown
            else "registers nothing"
        )
        return Effect(path, what, f"{why}: every case", None, "all")
    return Effect(path, what, reason, picked, "all")


def _project_effect(path: str, ctx: Context) -> Effect | None:
    """This project's own files (paths relative to its root, the working directory)."""
    full = str(Path(path).resolve())
    if path.endswith((".yaml", ".yml")) and (
        path.startswith("matrices/") or full in ctx.matrix.files
    ):
        if full not in ctx.matrix.files:
            return Effect(path, "matrix", f"not part of {ctx.matrix.path}: no case of this run")
        doc = yaml.safe_load(Path(full).read_text()) if Path(full).is_file() else None
        if (
            not isinstance(doc, dict)
            or doc.get("defaults")
            or doc.get("families")
            or doc.get("include")
        ):
            return Effect(
                path,
                "matrix",
                "its defaults, families or includes reach every case of the run",
                None,
                "all",
            )
        return Effect(
            path,
            "matrix",
            "the cases it defines",
            ctx.ids(lambda c, f: c.where.rsplit(":", 1)[0] == full),
            "all",
        )
    m = re.match(r"golden/(?:mteb/)?([^/]+?)(?:\.json)?(?:/|$)", path)
    if m:
        return Effect(
            path,
            "golden",
            f"the golden of case {m.group(1)}",
            ctx.ids(lambda c, f: c.id == m.group(1)),
            "all",
        )
    plugin = _plugin_effect(path, ctx)
    if plugin is not None:
        return plugin
    if path == "harness/models/refmodels.py":
        archs = _refmodel_archs(Path(path)) if Path(path).is_file() else set()
        if not archs:
            return Effect(
                path, "reference", "refmodels.py not readable here: every case", None, "all"
            )
        return Effect(
            path,
            "reference",
            f"reference architectures {', '.join(sorted(archs))} (their synthetic "
            "checkpoints and HF references)",
            ctx.ids(lambda c, f: f.arch in archs),
            "all",
        )
    return None


def effect_of(path: str, origin: Origin, ctx: Context) -> Effect:
    path = path.strip().removeprefix("./")
    name = path.rsplit("/", 1)[-1]
    if (
        path.startswith(NO_BEHAVIOUR_DIRS)
        or path.endswith((".md", ".rst"))
        or name in NO_BEHAVIOUR_FILES
    ):
        return Effect(
            path,
            "no-behaviour",
            "docs, tests or CI configuration: cannot change what a case computes",
        )
    if path.startswith("vllm/"):
        return _vllm_effect(path, ctx)
    project = _project_effect(path, ctx) if origin == "any" else None
    if project is not None:
        return project
    if path.startswith(BUILD):
        return Effect(
            path, "build", "kernels, build, dependencies or harness code: every row", None, "all"
        )
    return Effect(path, "unknown", "no rule knows this file: every row (conservative)", None, "all")


@dataclass
class Selection:
    effects: list[Effect]
    rows: dict[tuple[str, str], list[Effect]] = field(
        default_factory=dict
    )  # (case id, runner) -> why
    vllm_source: str = ""
    vllm_range: str | None = None
    # the vLLM under test, and the selected cases its version is outside the `vllm_releases` of
    # (case id -> why): a run plans them as skips
    vllm_version: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    def runners_of(self, case_id: str) -> list[str]:
        return [r for (c, r) in self.rows if c == case_id]

    def to_json(self) -> dict:
        return {
            "vllm_source": self.vllm_source,
            "vllm_range": self.vllm_range,
            "files": [
                {
                    "path": e.path,
                    "rule": e.rule,
                    "reason": e.reason,
                    "rows": sum(e in why for why in self.rows.values()),
                }
                for e in self.effects
            ],
            "vllm_version": self.vllm_version,
            "rows": [
                {
                    "case": c,
                    "runner": r,
                    "because": [e.path for e in why],
                    **({"skip": self.skipped[c]} if c in self.skipped else {}),
                }
                for (c, r), why in sorted(self.rows.items())
            ],
        }

    def summary(self) -> str:
        """One line a log or report can carry: how many rows, from how many files."""
        cases = {c for c, _ in self.rows}
        return (
            f"{len(self.rows)} row(s) of {len(cases)} case(s) selected by "
            f"{len(self.effects)} changed file(s)"
            if self.rows
            else f"nothing selected: none of the {len(self.effects)} changed file(s) can affect "
            f"a case"
        )


def to_text(sel: Selection) -> str:
    """The selection for a terminal or a CI log: each file's rule and reason, then each row's
    files."""
    lines = [
        f"vLLM source read: {sel.vllm_source}"
        + (f" · range {sel.vllm_range}" if sel.vllm_range else "")
    ]
    for f in sel.to_json()["files"]:
        lines.append(f"  {f['path']}  [{f['rule']}] {f['reason']} -> {f['rows']} row(s)")
    if sel.rows:
        width = max(len(c) for c, _ in sel.rows)
        lines.append("selected (case, runner) <- changed file(s):")
        lines += [
            f"  {c:<{width}}  {r:<15} <- {', '.join(e.path for e in why)}"
            for (c, r), why in sorted(sel.rows.items())
        ]
    lines += [f"  skipped: {c}: {why}" for c, why in sorted(sel.skipped.items())]
    lines.append(sel.summary().upper() if not sel.rows else sel.summary())
    return "\n".join(lines) + "\n"


def select(
    matrix: Matrix,
    cases: list[Case],
    changed: list[str],
    origin: Origin,
    source: VllmSource,
    vllm_range: str | None = None,
) -> Selection:
    """The rows of `cases` (invariance checks expanded) that the changed files can affect."""
    expanded = expand_checks(cases)
    base_dir = Path(matrix.path).parent
    facts = {c.id: case_facts(c, source, base_dir) for c in expanded if c.variant_of is None}
    ctx = Context(matrix, expanded, facts, source)
    effects = [effect_of(p, origin, ctx) for p in dict.fromkeys(p for p in changed if p.strip())]
    sel = Selection(effects, vllm_source=str(source.root), vllm_range=vllm_range)
    sel.vllm_version = target.vllm_version()
    for case in expanded:
        for runner in case.runners:
            why = [e for e in effects if e.picks(case, runner)]
            if why:
                sel.rows[(case.id, runner)] = why
        gate = case.vllm_releases.skip_reason(sel.vllm_version) if case.vllm_releases else None
        if gate and sel.runners_of(case.id):
            sel.skipped[case.id] = gate
    return sel


def narrow(cases: list[Case], sel: Selection) -> list[Case]:
    """The cases with only their selected runners (the reference kept where a row needs it)."""
    out = []
    for case in cases:
        picked = set(sel.runners_of(case.id))
        if picked:
            keep = [
                r for r in case.runners if r in picked or (r == REFERENCE_RUNNER and picked - {r})
            ]
            out.append(case.model_copy(update={"runners": keep}))
    return out


def git_changed_files(vllm_range: str, repo: str | Path) -> list[str]:
    """`git -C repo diff --name-only RANGE`, with errors that say what was wrong."""
    repo = Path(repo)
    if not repo.is_dir():
        raise SelectionError(f"--vllm-repo {repo}: no such folder")
    probe = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise SelectionError(f"--vllm-repo {repo}: not a git checkout ({probe.stderr.strip()})")
    proc = subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", vllm_range, "--"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SelectionError(
            f"--vllm-diff {vllm_range!r}: git in {repo} does not know this range "
            f"({proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else 'no message'}); "
            f"give A..B or A...B of commits the checkout has (fetch them first)"
        )
    return [line for line in proc.stdout.splitlines() if line.strip()]
