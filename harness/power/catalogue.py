"""The mutation catalogue: one module per mutation under harness/power/mutations/.

Each module declares, at top level and with stdlib only (it is loaded in every process):
  TARGETS    vLLM versions it applies to (a PEP 440 specifier, e.g. ">=0.32,<0.33")
  BUG_CLASS  one of BUG_CLASSES
  REPLAYS    the upstream issue / PR it replays ("vllm#47772") or None
  MODULE     the vLLM module whose code it patches (apply runs right after it executes)
  FILES      the vLLM source files it stands for (what `parity select --changed-files` reads)
  apply(module)  the monkeypatch
optional:
  NEEDS      "gpu" when only a GPU (or two) can exhibit it (run by ci/gpu-check)
  CASES      case-id globs narrowing the selected rows (`parity run -k`), where the code it
             patches serves only those cases (e.g. mean pooling: the mean-pooled cases)
  RUNNERS    runner names narrowing the rows (`parity run -r`), e.g. a V1-only bug
  MATRIX     the matrix holding its cases when that is not the default one (e.g.
             "matrices/extended.yaml"); against any other matrix it is not applicable
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from harness.power.hook import MUTATIONS_DIR, load_mutation

BUG_CLASSES = (
    "pooling method",
    "normalisation/activation",
    "head",
    "tokenisation",
    "batching/order",
    "chunked-prefill/prefix-cache state",
    "server encoding",
    "multimodal routing",
    "engine start",
    "adapters (LoRA)",
)
REPLAY_RE = re.compile(r"^vllm#\d+$")


class CatalogueError(Exception):
    """A mutation module that does not declare what it must (names the file and the field)."""


@dataclass(frozen=True)
class Mutation:
    name: str
    path: Path
    doc: str
    targets: str
    bug_class: str
    replays: str | None
    module: str
    files: tuple[str, ...]
    needs: str | None = None
    cases: tuple[str, ...] = field(default_factory=tuple)
    runners: tuple[str, ...] = field(default_factory=tuple)
    matrix: str | None = None  # the matrix its cases live in (repo-relative), None: any


def _check(name: str, path: Path, mod: ModuleType) -> Mutation:
    def need(attr: str, kind, optional: bool = False):
        if not hasattr(mod, attr):
            if optional:
                return None
            raise CatalogueError(f"{path}: mutation {name!r} does not declare {attr}")
        value = getattr(mod, attr)
        if value is not None and not isinstance(value, kind):
            raise CatalogueError(f"{path}: {attr} = {value!r} should be {kind}")
        return value

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    targets = need("TARGETS", str)
    try:
        SpecifierSet(targets)
    except InvalidSpecifier as e:
        raise CatalogueError(
            f"{path}: TARGETS {targets!r} is not a version specifier ({e})"
        ) from None
    bug_class = need("BUG_CLASS", str)
    if bug_class not in BUG_CLASSES:
        raise CatalogueError(f"{path}: BUG_CLASS {bug_class!r}; valid: {', '.join(BUG_CLASSES)}")
    if not hasattr(mod, "REPLAYS"):
        raise CatalogueError(f"{path}: mutation {name!r} does not declare REPLAYS (None if none)")
    replays = mod.REPLAYS
    if replays is not None and not (isinstance(replays, str) and REPLAY_RE.match(replays)):
        raise CatalogueError(f"{path}: REPLAYS {replays!r} should be 'vllm#NUMBER' or None")
    module = need("MODULE", str)
    if not module.startswith("vllm."):
        raise CatalogueError(f"{path}: MODULE {module!r} is not a vLLM module")
    files = tuple(need("FILES", (list, tuple)))
    if not files or any(
        not (isinstance(f, str) and f.startswith("vllm/") and f.endswith(".py")) for f in files
    ):
        raise CatalogueError(f"{path}: FILES {files!r} should be vllm/... .py paths")
    if not callable(getattr(mod, "apply", None)):
        raise CatalogueError(f"{path}: mutation {name!r} has no apply(module)")
    needs = need("NEEDS", str, optional=True)
    if needs not in (None, "gpu"):
        raise CatalogueError(f"{path}: NEEDS {needs!r}; valid: 'gpu' or absent")
    doc = (mod.__doc__ or "").strip()
    if not doc:
        raise CatalogueError(f"{path}: mutation {name!r} has no docstring saying what it breaks")
    return Mutation(
        name=name,
        path=path,
        doc=doc.splitlines()[0],
        targets=targets,
        bug_class=bug_class,
        replays=replays,
        module=module,
        files=files,
        needs=needs,
        cases=tuple(need("CASES", (list, tuple), optional=True) or ()),
        runners=tuple(need("RUNNERS", (list, tuple), optional=True) or ()),
        matrix=need("MATRIX", str, optional=True),
    )


def names(folder: Path = MUTATIONS_DIR) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def load(only: list[str] | None = None, folder: Path = MUTATIONS_DIR) -> list[Mutation]:
    """Every mutation (or those named), checked; an unknown name is an error listing the known."""
    known = names(folder)
    unknown = [n for n in only or [] if n not in known]
    if unknown:
        raise CatalogueError(
            f"no mutation {', '.join(unknown)} in {folder}; known: {', '.join(known)}"
        )
    return [_check(n, folder / f"{n}.py", load_mutation(n, folder)) for n in (only or known)]
