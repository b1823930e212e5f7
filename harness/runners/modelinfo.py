"""vLLM's inspection of model classes, done for a run's architectures in one process before any
engine starts.

The first time an engine meets an architecture, vLLM inspects its model class (a pooling model?
multimodal? which tasks?) in a subprocess of its own, which imports vLLM again: about 10 s on this
CPU, once per architecture, then cached per model file in `VLLM_CACHE_ROOT/modelinfos`. A first
run of the default matrix paid that 17 times, one engine load after another. `warm` has vLLM's own
code do those inspections in one process (`python -m harness.runners.modelinfo ARCH ...`), with
vLLM's subprocess call replaced by a call in that process: it is itself a throwaway process, so
what vLLM isolates the inspection from (initialising a device in the engine's process) is still
kept apart. Everything here is best effort: an architecture it could not inspect is inspected by
vLLM itself when an engine loads it, as without the warm-up; nothing it does decides a result.

A stamp beside vLLM's cache (`parity-warmed.json`: per vLLM package, the architectures inspected
and vLLM's cache file of each) lets a warm machine skip the process without importing vLLM.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.engine.target import vllm_version

STAMP = "parity-warmed.json"
# stands for every Transformers* class of vLLM's registry (its Transformers backend)
TRANSFORMERS_BACKEND = "Transformers*"


def cache_dir(env: Mapping[str, str | None]) -> Path:
    """vLLM's model-info cache folder in an environment (VLLM_CACHE_ROOT, as vllm.envs reads it)."""
    root = env.get("VLLM_CACHE_ROOT") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vllm"
    )
    return Path(os.path.expanduser(root)) / "modelinfos"


def vllm_key() -> str | None:
    """Which vLLM this process would import (its package folder and version), found without
    importing it; None when there is none."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return f"{list(spec.submodule_search_locations)[0]}@{vllm_version() or '?'}"


def unwarmed(archs: Iterable[str], folder: Path, key: str) -> list[str]:
    """The architectures the stamp does not list for this vLLM, or whose cache file is gone."""
    try:
        done = json.loads((folder / STAMP).read_text()).get(key, {})
    except (OSError, ValueError, AttributeError):
        done = {}
    return sorted(
        {a for a in archs if not (a in done and done[a] and (folder / done[a]).is_file())}
    )


def case_archs(model_dir: Path, engine: Mapping) -> list[str]:
    """The architectures a vLLM engine resolves for a model folder: config.json's, or those the
    case's hf_overrides put in their place."""
    engine = engine or {}
    # vLLM's Transformers backend runs the model as one of its Transformers* classes
    extra = [TRANSFORMERS_BACKEND] if engine.get("model_impl") == "transformers" else []
    overrides = engine.get("hf_overrides") or {}
    if isinstance(overrides, Mapping) and overrides.get("architectures"):
        return [*overrides["architectures"], *extra]
    try:
        archs = json.loads((Path(model_dir) / "config.json").read_text())["architectures"]
    except (OSError, ValueError, KeyError, TypeError):
        archs = []
    return [*archs, *extra]


def _stamp(folder: Path, key: str, files: dict[str, str]) -> str | None:
    """Add what was inspected to the stamp; None, or why it could not be written (a cache folder
    vLLM could not create, a read-only one): the next run then inspects again, nothing worse."""
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        stamp = {}
    if not isinstance(stamp, dict) or not isinstance(stamp.get(key, {}), dict):
        stamp = {}
    stamp.setdefault(key, {}).update(files)
    tmp = folder / f"{STAMP}.{os.getpid()}"
    try:
        tmp.write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, folder / STAMP)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return f"{type(e).__name__}: {e}"
    return None


def warm(
    archs: Iterable[str], env: Mapping[str, str | None], timeout: float = 300
) -> dict[str, object]:
    """Inspect the architectures vLLM has not inspected yet (per the stamp), in one process with
    the workers' environment. Returns what it did, for the run's log; never raises."""
    t0 = time.perf_counter()
    full = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    key = vllm_key()
    if key is None:
        return {"skipped": "vLLM is not importable here"}
    folder = cache_dir(full)
    todo = unwarmed(archs, folder, key)
    if not todo:
        return {"skipped": "every architecture already inspected"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness.runners.modelinfo", *todo],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full,
        )
        lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    except (subprocess.TimeoutExpired, OSError, ValueError) as e:
        return {"error": f"{type(e).__name__}: {e}", "seconds": time.perf_counter() - t0}
    files = {x["arch"]: x["file"] for x in lines if x.get("file")}
    stamped = _stamp(folder, key, files) if files else None
    return {
        **({"stamp_not_written": stamped} if stamped else {}),
        "inspected": sorted(files),
        "not_inspected": {x["arch"]: x["error"] for x in lines if x.get("error")},
        "seconds": round(time.perf_counter() - t0, 1),
        **({"stderr_tail": done.stderr[-2000:]} if done.returncode else {}),
    }


def _backend_classes(known: Mapping) -> list[str]:
    return sorted(a for a in known if a.startswith("Transformers"))


def _normalized(reg, arch: str) -> str:
    """The registry entry vLLM inspects for an architecture name it has no entry for (e.g.
    `Qwen3Model`, run as `Qwen3ForCausalLM` converted to pooling): vLLM's own mapping, as it
    resolves a model whose runner and conversion are not given."""
    if arch in reg.models or not hasattr(reg, "_normalize_arch"):
        return arch
    from types import SimpleNamespace

    return reg._normalize_arch(arch, SimpleNamespace(runner_type=None, convert_type=None))


def _inspect(reg, arch: str) -> str | None:
    """Have vLLM inspect one architecture; print a line of JSON; return its cache file's name."""
    line: dict[str, str] = {"arch": arch}
    try:
        model = reg.models[_normalized(reg, arch)]
        model.inspect_model_cls()  # computes and caches, vLLM's own code
        name = getattr(model, "_get_cache_filename", None)
        if name is None:  # a class registered in-process: vLLM caches nothing for it
            line["error"] = "not a lazily registered model (nothing cached)"
        else:
            line["file"] = name()
    except Exception as e:  # noqa: BLE001 - best effort, vLLM inspects it itself later
        line["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(line), flush=True)
    return line.get("file")


def main(argv: list[str]) -> int:
    """In the engine's environment: have vLLM inspect each architecture, in this process."""
    from vllm.model_executor.models import registry
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # as vLLM's inspection subprocess does first
    # vLLM runs the inspection in a fresh interpreter to keep it away from the engine's process;
    # this process is that fresh interpreter, shared by every architecture
    registry._run_in_subprocess = lambda fn: fn()
    known = registry.ModelRegistry.models
    for arg in argv:
        group = _backend_classes(known) if arg == TRANSFORMERS_BACKEND else [arg]
        files = [_inspect(registry.ModelRegistry, arch) for arch in group]
        if arg == TRANSFORMERS_BACKEND and files and all(files):
            # the group is stamped as one: its first class's cache file stands for it
            print(json.dumps({"arch": arg, "file": files[0]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
