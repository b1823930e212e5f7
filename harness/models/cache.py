"""The model cache folder, and the fingerprint every result and golden is keyed on: a digest of a
checkpoint's tensors, config, tokenizer and sentence-transformers files."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path


class ModelUnavailable(Exception):
    """The model cannot be had on this machine (offline, not installed): the case is skipped."""


# config.json keys that change with the writer's version, not with the model
_VOLATILE_CONFIG_KEYS = {
    "transformers_version",
    "_name_or_path",
    "torch_dtype",
    "dtype",
    "use_cache",
}


_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "merges.txt",
    "vocab.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


_ST_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "preprocessor_config.json",
    "processor_config.json",
)


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


def _pt_tensor_digests(path: Path) -> list[tuple[str, str]]:
    """(name, sha256 of dtype+shape+bytes) per tensor of a torch.save'd state dict: the extra
    head files some checkpoints ship beside their safetensors (BGE-M3's sparse_linear.pt and
    colbert_linear.pt, which vLLM loads too). weights_only: plain tensors, no code runs."""
    import torch

    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise ModelUnavailable(f"{path}: not a state dict of tensors ({type(state).__name__})")
    out = []
    for name in sorted(state):
        t = state[name].detach().contiguous().cpu()
        h = hashlib.sha256(f"{t.dtype}{list(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        out.append((name, h.hexdigest()))
    return out


def fingerprint(model_dir: Path) -> str:
    """sha256 over tensors (safetensors, and top-level .pt heads), tokenizer files, the model
    config and sentence-transformers config."""
    model_dir = Path(model_dir)
    h = hashlib.sha256()
    weights = sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*/*.safetensors"))
    if not weights:
        raise ModelUnavailable(f"{model_dir}: no *.safetensors weights (pickled .bin is not read)")
    for w in weights:
        for name, digest in _safetensors_tensor_digests(w):
            h.update(f"{w.relative_to(model_dir)}:{name}:{digest}\n".encode())
    for w in sorted(model_dir.glob("*.pt")):  # extra heads (BGE-M3), by their tensors
        for name, digest in _pt_tensor_digests(w):
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
