"""The package layout's contract, read from the source (every import, function-level ones too).

Layers, lowest first; a module imports only from its own layer or lower ones:

    engine, settings < matrix < models < runners < judge < report < run < select, mteb, power,
    check, repro < cli

`harness.engine` and `harness.settings` are standard library only (nox runs them before anything
is installed), a worker process never imports the matrix schema or yaml, no module imports
another's private name, and no two modules import each other, directly or round a circle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = [
    {"engine", "settings", "shards", "triton_cpu", "plugins"},
    {"matrix"},
    {"models"},
    {"runners"},
    {"judge"},
    {"report"},
    {"run"},
    {"select", "mteb", "power", "check", "repro"},
    {"cli", "pytest_plugin", "matrix_tests", "__init__"},
]
# what runs inside a worker process: its entry point and every runner implementation
WORKER_ROOTS = (
    "harness.runners.worker",
    "harness.runners.hf",
    "harness.runners.vllm",
    "harness.runners.serve",
    "harness.runners.fake",
    "harness.runners.mteb",
)
# packages that find their modules at run time (pkgutil): reaching one reaches all its modules
DISCOVERING = ("harness.runners.hf", "harness.models.synthetic")
NOT_IN_A_WORKER = ("harness.matrix.schema", "harness.matrix.loader", "harness.run.matrices", "yaml")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(p): p
    for p in sorted((ROOT / "harness").rglob("*.py"))
    if "data" not in p.relative_to(ROOT).parts
}  # data/: remote code of checkpoints
Import = tuple[str, tuple[str, ...], str]  # (module imported, names taken, "file:line")


def _imports_of(path: Path) -> list[Import]:
    out: list[Import] = []
    where = lambda node: f"{path.relative_to(ROOT)}:{node.lineno}"  # noqa: E731
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, (), where(node)) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [a.name for a in node.names]
            # `from harness.x import y` where y is a module imports the module y
            subs = [f"{node.module}.{n}" for n in names if f"{node.module}.{n}" in MODULES]
            out += [(s, (), where(node)) for s in subs]
            rest = tuple(n for n in names if f"{node.module}.{n}" not in MODULES)
            if rest or not subs:
                out.append((node.module, rest, where(node)))
    return out


IMPORTS: dict[str, list[Import]] = {m: _imports_of(p) for m, p in MODULES.items()}


def _ours(imports: list[Import]) -> list[Import]:
    return [i for i in imports if i[0].startswith("harness.")]


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"{module}: its package {top!r} is in no layer of test_layout.LAYERS")


def upward_imports(imports: dict[str, list[Import]]) -> list[str]:
    return [
        f"{where}: {module} imports {target}, a layer above it"
        for module, its in imports.items()
        for target, _, where in _ours(its)
        if _layer(target) > _layer(module)
    ]


def private_imports(imports: dict[str, list[Import]]) -> list[str]:
    return [
        f"{where}: {module} takes {', '.join(private)} from {target}"
        for module, its in imports.items()
        for target, names, where in _ours(its)
        if (private := [n for n in names if n.startswith("_") and not n.startswith("__")])
        and target != module
    ]


def circles(imports: dict[str, list[Import]]) -> list[str]:
    graph = {
        m: sorted({t for t, _, _ in _ours(its) if t in imports and t != m})
        for m, its in imports.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in graph[m]:
            if state.get(t) == 1:
                found.append(" -> ".join(stack[stack.index(t) :] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def worker_reach(imports: dict[str, list[Import]]) -> set[str]:
    """Every module a worker could import, lazy imports included."""
    seen: set[str] = set()
    todo = list(WORKER_ROOTS)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if m in DISCOVERING:  # it imports every module of its package, by pkgutil, not by name
            todo += [s for s in imports if s.startswith(m + ".")]
        for target, _, _ in imports.get(m, ()):
            parts = target.split(".")
            todo += [".".join(parts[:k]) for k in range(1, len(parts) + 1)]  # packages run too
    return seen


def test_every_package_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_imports_go_down_the_layers_only():
    assert not (wrong := upward_imports(IMPORTS)), "\n".join(wrong)


def test_no_module_imports_a_private_name_of_another():
    assert not (wrong := private_imports(IMPORTS)), "\n".join(wrong)


def test_no_import_circles():
    assert not (found := circles(IMPORTS)), "import circles:\n" + "\n".join(found)


def test_a_worker_process_imports_neither_the_matrix_schema_nor_yaml():
    reach = worker_reach(IMPORTS)
    assert "harness.runners.options" in reach  # the walk follows lazy imports
    assert not (banned := sorted(reach & set(NOT_IN_A_WORKER))), f"a worker can reach {banned}"


def test_the_engine_package_and_the_settings_are_standard_library_only():
    plain = ("harness.engine", "harness.settings", "harness.shards")  # run before any install
    wrong = [
        f"{where}: imports {target}"
        for module, its in IMPORTS.items()
        if module.startswith(plain)
        for target, _, where in its
        if target.split(".")[0] not in sys.stdlib_module_names and not target.startswith(plain)
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "rule, extra",
    [
        (
            upward_imports,
            {"harness.matrix.bad": [("harness.run.session", ("run_cases",), "bad:1")]},
        ),
        (
            private_imports,
            {"harness.cli_bad": [("harness.run.session", ("_a_private_name",), "bad:1")]},
        ),
        (
            circles,
            {
                "harness.judge.verdict": [
                    *IMPORTS["harness.judge.verdict"],
                    ("harness.judge.bad", (), "verdict:1"),
                ],
                "harness.judge.bad": [("harness.judge.verdict", ("Verdict",), "bad:1")],
            },
        ),
        (
            lambda imports: sorted(worker_reach(imports) & set(NOT_IN_A_WORKER)),
            {"harness.runners.options": [("yaml", (), "options:1")]},
        ),
        (  # a recipe module no module names, found by discovery
            lambda imports: sorted(worker_reach(imports) & set(NOT_IN_A_WORKER)),
            {"harness.runners.hf.bad": [("harness.matrix.schema", ("Case",), "bad:1")]},
        ),
    ],
)
def test_each_rule_bites_on_a_seeded_breach(rule, extra):
    assert rule(IMPORTS) == []
    assert rule({**IMPORTS, **extra}) != []


MAX_FUNCTION_LINES = 80
# the longer functions still to split; it only shrinks: an entry whose function is gone or fits is
# an error too, so the list cannot go stale
LONG_FUNCTIONS: set[str] = set()


def long_functions(modules: dict[str, Path], limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """`path::name` -> lines of every function (methods and nested ones too) over `limit`."""
    out: dict[str, int] = {}
    for path in modules.values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > limit:
                    out[f"{_rel(path)}::{node.name}"] = lines
    return out


def test_no_function_is_over_80_lines_but_the_shrinking_allow_list():
    found = long_functions(MODULES)
    new = {f"{k} ({v} lines)" for k, v in found.items() if k not in LONG_FUNCTIONS}
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines: {sorted(new)}"
    fixed = sorted(LONG_FUNCTIONS - set(found))
    assert not fixed, (
        f"now within {MAX_FUNCTION_LINES} lines (or gone): drop from LONG_FUNCTIONS: {fixed}"
    )


def test_the_function_length_rule_bites_on_a_seeded_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    seeded = tmp_path / "long.py"
    seeded.write_text(f"def f():\n{body}\n\n\ndef g():\n    return 1\n")
    found = long_functions({"long": seeded}, limit=MAX_FUNCTION_LINES)
    assert list(found.values()) == [MAX_FUNCTION_LINES + 1] and len(found) == 1


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
