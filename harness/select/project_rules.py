"""The rules for a changed file of this project: a matrix selects its cases, a golden its case,
refmodels.py the cases built on its architectures, a recipe module the cases of its recipes, a
synthetic builder module the cases of its architectures. Paths are relative to the project root
(the working directory). Any other file falls to rows.effect_of's wider rules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from harness.matrix.schema import SyntheticModel
from harness.select.facts import Context, Effect


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


def project_effect(path: str, ctx: Context) -> Effect | None:
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
