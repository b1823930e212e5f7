"""What vLLM's own source says about itself, read as text (never imported, so neither a GPU nor
vLLM's dependencies are needed): its model registry (architecture -> module), how it converts an
architecture it has no entry for, which of its files import which (an import closure), and the
tables vLLM reads by architecture name rather than by import (models/config.py's
MODELS_CONFIG_MAP, the hybrid-model fix), which an import closure cannot see.

`harness.select.vllm_rules` asks these questions to map a changed vLLM file to the cases it can
affect.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from typing import Callable

MODELS_DIR = "vllm/model_executor/models"
REGISTRY = f"{MODELS_DIR}/registry.py"
# vllm/config/{model,vllm}.py look an architecture up by name in this file's MODELS_CONFIG_MAP
# (no model module imports it for that): the class found rewrites the model's config
CONFIG_MAP_FILE = f"{MODELS_DIR}/config.py"
CONFIG_MAP = "MODELS_CONFIG_MAP"
# applied by vllm/config/vllm.py to every hybrid (attention + mamba/conv) model, by class name
HYBRID_CONFIG = "HybridAttentionMambaModelConfig"
SUFFIXES_FILE = "vllm/config/model.py"
# vLLM's `--model-impl transformers` runs every architecture through this package
TRANSFORMERS_BACKEND = "transformers"


class SourceError(ValueError):
    """vLLM's source cannot be read where it was looked for."""


class VllmSource:
    """A vLLM source tree: `root` holds the `vllm/` package (a git checkout or site-packages)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if not (self.root / "vllm" / "__init__.py").is_file():
            raise SourceError(
                f"{self.root} holds no vLLM source (no vllm/__init__.py): pass --vllm-repo "
                f"a vLLM checkout, or install vllm"
            )
        if not (self.root / REGISTRY).is_file():
            raise SourceError(
                f"{self.root / REGISTRY} is missing: this vLLM has no model registry where "
                f"the selection reads it"
            )

    @classmethod
    def locate(cls, repo: str | Path | None) -> "VllmSource":
        """The checkout `repo`, else the installed vllm package's source (found, not imported)."""
        if repo is not None:
            return cls(Path(repo))
        spec = importlib.util.find_spec("vllm")
        if spec is None or not spec.submodule_search_locations:
            raise SourceError("vllm is not installed here: pass --vllm-repo DIR (a vLLM checkout)")
        return cls(Path(list(spec.submodule_search_locations)[0]).parent)

    def exists(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    @functools.cached_property
    def _registry_tables(self) -> dict[str, dict[str, str]]:
        """Each `_*_MODELS = {arch: (module, class)}` table of the registry, by table name."""
        tables: dict[str, dict[str, str]] = {}
        for node in _parse(self.root / REGISTRY).body:
            target = (
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            )
            if not (
                isinstance(target, ast.Name)
                and target.id.endswith("_MODELS")
                and isinstance(node.value, ast.Dict)
            ):
                continue
            table = {}
            for key, value in zip(node.value.keys, node.value.values):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(value, ast.Tuple)
                    and value.elts
                    and isinstance(value.elts[0], ast.Constant)
                ):
                    table[str(key.value)] = str(value.elts[0].value)
            tables[target.id] = table
        if not tables:
            raise SourceError(
                f"{self.root / REGISTRY}: found no `_*_MODELS = {{...}}` table to read"
            )
        return tables

    @functools.cached_property
    def registry(self) -> dict[str, str]:
        """architecture -> module name (relative to vllm/model_executor/models, or dotted
        absolute)."""
        out: dict[str, str] = {}
        for table in self._registry_tables.values():
            for arch, module in table.items():
                out.setdefault(arch, module)
        return out

    @functools.cached_property
    def late_interaction_archs(self) -> frozenset[str]:
        """Architectures whose `score` is MaxSim over token embeddings (ColBERT, ColPali, ...)."""
        return frozenset(self._registry_tables.get("_LATE_INTERACTION_MODELS", {}))

    @functools.cached_property
    def _suffixes(self) -> list[str]:
        """vLLM's architecture-name suffixes (`_SUFFIX_TO_DEFAULTS`), in its priority order."""
        path = self.root / SUFFIXES_FILE
        if not path.is_file():
            return []
        for node in _parse(path).body:
            target = (
                node.target
                if isinstance(node, ast.AnnAssign)
                else (node.targets[0] if isinstance(node, ast.Assign) else None)
            )
            if (
                isinstance(target, ast.Name)
                and target.id == "_SUFFIX_TO_DEFAULTS"
                and isinstance(node.value, ast.List)
            ):
                return [
                    str(e.elts[0].value)
                    for e in node.value.elts
                    if isinstance(e, ast.Tuple) and e.elts and isinstance(e.elts[0], ast.Constant)
                ]
        return []

    @functools.cached_property
    def registry_class(self) -> dict[str, str]:
        """architecture -> the class name its registry entry names (`("bert", "BertModel")`)."""
        out: dict[str, str] = {}
        for node in _parse(self.root / REGISTRY).body:
            target = _target(node)
            if not (
                isinstance(target, ast.Name)
                and target.id.endswith("_MODELS")
                and isinstance(node.value, ast.Dict)
            ):
                continue
            for key, value in zip(node.value.keys, node.value.values):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(value, ast.Tuple)
                    and len(value.elts) > 1
                    and isinstance(value.elts[1], ast.Constant)
                ):
                    out.setdefault(str(key.value), str(value.elts[1].value))
        return out

    @functools.cached_property
    def config_map(self) -> dict[str, str]:
        """architecture -> class name, from `MODELS_CONFIG_MAP = {...}` in models/config.py (empty
        when this vLLM has no such file or map)."""
        path = self.root / CONFIG_MAP_FILE
        if not path.is_file():
            return {}
        for node in _parse(path).body:
            target = _target(node)
            if (
                isinstance(target, ast.Name)
                and target.id == CONFIG_MAP
                and isinstance(node.value, ast.Dict)
            ):
                pairs = zip(node.value.keys, node.value.values)
                return {
                    str(k.value): _name_of(v)
                    for k, v in pairs
                    if isinstance(k, ast.Constant) and _name_of(v)
                }
        raise SourceError(
            f"{path}: found no `{CONFIG_MAP} = {{...}}` to read (vLLM changed how "
            f"it maps architectures to config fixes; teach harness/select/vllm_source.py "
            f"the new form)"
        )

    def registered_arch(self, arch: str) -> str | None:
        """The registry name vLLM resolves `arch` to: itself, else with its suffix swapped."""
        if arch in self.registry:
            return arch
        suffix = next((s for s in self._suffixes if arch.endswith(s)), None)
        for repl in self._suffixes if suffix is not None else []:
            if arch.replace(suffix, repl) in self.registry:
                return arch.replace(suffix, repl)
        return None

    def config_fixes(self, arch: str, model_impl: str | None = None) -> list[str]:
        """The models/config.py classes vLLM applies to `arch`, found as vllm/config/vllm.py does:
        MODELS_CONFIG_MAP by the name, then by the resolved registry name; plus the hybrid fix
        when the model class is hybrid (its class, or a base of it, lists `IsHybrid`)."""
        if model_impl == TRANSFORMERS_BACKEND:
            return []  # vLLM's architecture is then a Transformers* backend class, not in the map
        names = [arch] + [a for a in [self.registered_arch(arch)] if a and a != arch]
        fixes = [
            f"{self.config_map[a]} ({CONFIG_MAP}[{a!r}])" for a in names if a in self.config_map
        ][:1]
        if self.is_hybrid(arch):
            fixes.append(f"{HYBRID_CONFIG} (hybrid model)")
        return fixes

    def is_hybrid(self, arch: str) -> bool:
        """Whether the class the registry names for `arch` declares `IsHybrid` among its bases,
        directly or through a base class defined in a file its module imports."""
        base = self.registered_arch(arch)
        if base is None or base not in self.registry_class:
            return False
        start = self.module_files(self.registry[base])
        files = self.closure(start, lambda f: f.startswith(MODELS_DIR))
        classes: dict[str, list[str]] = {}  # where two files define one name: the union of bases
        for f in sorted(files):
            for name, bases in self._classes(f).items():
                classes.setdefault(name, []).extend(bases)
        todo, seen = [self.registry_class[base]], set()
        while todo:
            name = todo.pop()
            if name == "IsHybrid":
                return True
            if name not in seen:
                seen.add(name)
                todo += classes.get(name, [])
        return False

    @functools.lru_cache(maxsize=None)
    def _classes(self, rel: str) -> dict[str, list[str]]:
        """The top-level classes of a file and the names of their bases."""
        tree = _parse(self.root / rel)
        return {
            n.name: [b for b in map(_name_of, n.bases) if b]
            for n in tree.body
            if isinstance(n, ast.ClassDef)
        }

    def module_of(self, arch: str, model_impl: str | None = None) -> tuple[str, bool] | None:
        """(module, converted) vLLM loads `arch` from, as its registry resolves it: a direct entry,
        else the architecture with its suffix swapped (`Qwen3Model` -> `Qwen3ForCausalLM`, wrapped
        by the pooling adapters: converted=True). None: vLLM has no module for it."""
        if model_impl == "transformers":
            return TRANSFORMERS_BACKEND, False
        if arch in self.registry:
            return self.registry[arch], False
        suffix = next((s for s in self._suffixes if arch.endswith(s)), None)
        if suffix is not None:
            for repl in self._suffixes:
                base = arch.replace(suffix, repl)
                if base in self.registry:
                    return self.registry[base], True
        return None

    def module_files(self, module: str) -> list[str]:
        """The files of a registry module: `bert` -> vllm/model_executor/models/bert.py, a
        package -> its files; a dotted module (`vllm.models.x`) is taken from the repository
        root."""
        base = module.replace(".", "/") if module.startswith("vllm.") else f"{MODELS_DIR}/{module}"
        if (self.root / f"{base}.py").is_file():
            return [f"{base}.py"]
        return sorted(str(p.relative_to(self.root)) for p in (self.root / base).rglob("*.py"))

    def reached_from_registry(self, rel: str, roots: list[str] = ()) -> bool:
        """Whether `rel` is a registered architecture's module file, one of `roots`, or imported by
        such a file (directly or not). Only files whose text names `rel`'s module are parsed."""
        registered = {f for m in set(self.registry.values()) for f in self.module_files(m)}
        registered |= set(roots)
        todo, seen = [rel], set()
        while todo:
            f = todo.pop()
            if f in registered:
                return True
            if f in seen:
                continue
            seen.add(f)
            word = Path(f).parent.name if f.endswith("/__init__.py") else Path(f).stem
            todo += [g for g in self._text_mentions(word) if f in self.imports(g)]
        return False

    def _text_mentions(self, word: str) -> list[str]:
        """The files of vLLM's models package whose text contains `word`."""
        return [rel for rel, text in self._model_texts.items() if word in text]

    @functools.cached_property
    def _model_texts(self) -> dict[str, str]:
        return {
            str(p.relative_to(self.root)): p.read_text(encoding="utf-8", errors="replace")
            for p in sorted((self.root / MODELS_DIR).rglob("*.py"))
        }

    def closure(self, files: list[str], within: Callable[[str], bool]) -> frozenset[str]:
        """`files` and every file they import, directly or not, through files `within` accepts
        (imports anywhere in a file count, also those inside functions)."""
        seen: set[str] = set()
        todo = [f for f in files if self.exists(f)]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            todo += [g for g in self.imports(f) if within(g) and g not in seen]
        return frozenset(seen)

    @functools.lru_cache(maxsize=None)
    def imports(self, rel: str) -> tuple[str, ...]:
        """The repository files `rel` imports (modules and packages resolved to their files)."""
        package = rel.rsplit("/", 1)[0].replace("/", ".") if "/" in rel else ""
        if rel.endswith("/__init__.py"):
            package = rel[: -len("/__init__.py")].replace("/", ".")
        names: list[str] = []
        for node in ast.walk(_parse(self.root / rel)):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
                mod = ".".join(p for p in (base, node.module or "") if p)
                names.append(mod)
                names += [f"{mod}.{a.name}" for a in node.names]  # `from pkg import submodule`
        out = []
        for name in names:
            path = name.replace(".", "/")
            for cand in (f"{path}.py", f"{path}/__init__.py"):
                if self.exists(cand):
                    out.append(cand)
        return tuple(sorted(set(out)))


def _target(node: ast.AST) -> ast.AST | None:
    """The one name an assignment (`X = ...` or `X: T = ...`) binds, else None."""
    if isinstance(node, ast.AnnAssign):
        return node.target
    return node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None


def _name_of(node: ast.AST) -> str:
    """`Foo` or `mod.Foo` -> "Foo"; `(Foo)` is Foo too; anything else -> ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # `Generic[T]`
        return _name_of(node.value)
    return ""


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError) as e:
        raise SourceError(f"{path}: cannot read it as Python: {e}") from None
