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
    read_by: str = "`parity`, nox"


# Each PARITY_* setting of the harness is declared once, in harness/settings.py (`described()`);
# this list holds only the variables the ci/ scripts read themselves (bash, not the harness).
# tests/unit/test_docs.py fails when a PARITY_* name read in harness/, ci/ or noxfile.py is in
# neither, or when a name here is read nowhere.
GATE = "`ci/parity-gate`"
ENV_VARS = (
    EnvVar("PARITY_MATRIX", "matrices/pooling.yaml", "the matrix", True, GATE),
    EnvVar(
        "PARITY_AGAINST",
        "golden",
        "the reference, `hf` or `golden`",
        True,
        GATE,
    ),
    EnvVar("PARITY_SHARD", "-", "this agent's shard, `K/N`", True, GATE),
    EnvVar("PARITY_OUT", "parity-report", "the report folder", True, GATE),
    EnvVar(
        "PARITY_VLLM_DIFF",
        "-",
        "a git range of PARITY_VLLM_REPO: only the rows it can affect run",
        True,
        GATE,
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
    """Every variable: harness.settings' declarations, then the ci/ scripts' own (above)."""
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
        "Generated at build time from `harness/settings.py`, where each setting is declared once,",
        "and the `ci/` scripts' own variables. Every `PARITY_*` name that `harness/`, `ci/` and",
        "`noxfile.py` read is here (a unit test holds the two together).",
        "",
    ]
    for title, user in (("For users", True), ("Internal (set by the harness itself)", False)):
        lines += [f"## {title}", "", "| variable | default | what it does | read by |"]
        lines.append("|---|---|---|---|")
        for v in sorted(env_vars(), key=lambda v: (v.read_by.startswith("`ci"), v.name)):
            if v.user == user:
                row = f"| `{v.name}` | {_cell(v.default)} | {_cell(v.doc)} | {v.read_by} |"
                lines.append(row)
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
