"""Synthetic tiny checkpoints, deterministic across runs and library releases.

Weights are drawn from a numpy generator seeded by (spec seed, parameter name), never from
torch's init code, so a new torch or transformers does not change them. Tokenizers are built
from a vocabulary shipped in harness/data (no training: WordPiece training is not deterministic).

This module is the core: the ArchFamily registry, seeded weights, build() and the cache key.
Each backbone family is one builder module of this package (bert, qwen, modernbert, lfm2, clip,
colpali, qwen2_vl, xlm_roberta) that calls `register(name, ArchFamily(...))`; `discover()` imports
them all the first time ARCHS is read, so adding a module is enough (docs/contributing/).

Run as `python -m harness.models.synthetic '<SyntheticModel JSON>'` to build one into the cache.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from harness.matrix.paths import cache_root
from harness.matrix.schema import SyntheticModel
from harness.models.cache import fingerprint
from harness.plugins import Discovery

# bump when a builder's output changes for the same spec
BUILDER_VERSION = 2
DATA = Path(__file__).resolve().parents[2] / "data"  # harness/data


@dataclass(frozen=True)
class ArchFamily:
    model_type: str
    config: dict  # tiny defaults; a spec's `config:` overrides them
    tokenizer: Callable[..., None]  # (out_dir, config, **spec.tokenizer options)
    archs: tuple[str, ...] = field(default_factory=tuple)
    # arch -> the transformers class that builds it, where the names differ (ColBERTLfm2Model)
    hf_class: dict[str, str] = field(default_factory=dict)
    # saved weight-name prefix -> the published checkpoints' prefix (first match wins)
    checkpoint_prefixes: dict[str, str] = field(default_factory=dict)
    # extra files after saving (e.g. a sentence-transformers Dense projection)
    post_build: Callable[[Path, SyntheticModel, object], None] | None = None


# name -> family, filled by the builder modules of this package as discover() imports them; read
# it as ARCHS (a module attribute that discovers first) or through family_of()
_ARCHS: dict[str, ArchFamily] = {}


def register(name: str, family: ArchFamily) -> ArchFamily:
    """Add a backbone family (called at import by its builder module). Its name and its
    architectures are each one family's only."""
    taken = {a: n for n, f in _ARCHS.items() for a in f.archs if n != name}
    if name in _ARCHS and _ARCHS[name] != family:
        raise ValueError(f"synthetic family {name!r} is registered twice, differently")
    if clash := sorted(a for a in family.archs if a in taken):
        raise ValueError(
            f"synthetic family {name!r}: architecture(s) {clash} already belong to "
            f"{sorted({taken[a] for a in clash})}; an architecture has one family"
        )
    _ARCHS[name] = family
    return family


discover = Discovery(__name__)


def __getattr__(name: str) -> Any:
    if name == "ARCHS":
        discover()
        return _ARCHS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 / Qwen byte-to-unicode table of byte-level BPE."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def add_merge_chain(
    symbols: list[str], vocab: dict[str, int], merges: list[tuple[str, str]]
) -> None:
    """Merge `symbols` left to right into one token, adding each new merge and token once."""
    cur = symbols[0]
    for sym in symbols[1:]:
        nxt = cur + sym
        if nxt not in vocab:
            vocab[nxt] = len(vocab)
            merges.append((cur, sym))
        cur = nxt


def family_of(arch: str) -> ArchFamily:
    discover()
    for fam in _ARCHS.values():
        if arch in fam.archs:
            return fam
    valid = sorted(a for f in _ARCHS.values() for a in f.archs)
    raise ValueError(f"unknown synthetic arch {arch!r}; valid: {', '.join(valid)}")


@functools.lru_cache(maxsize=1)
def builder_digest() -> str:
    """What shapes a checkpoint besides its spec: the builder's code (this package's every
    module: architecture configs, tokenizers, post-build steps; and refmodels.py) and the data
    files it reads. Editing any of them is a new key,
    so a stale checkpoint is never reused silently."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for path in sorted([*here.glob("*.py"), here.parent / "refmodels.py", *DATA.rglob("*")]):
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and "mteb" not in path.relative_to(DATA.parent).parts
        ):
            h.update(str(path.relative_to(DATA.parent)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def spec_dir(spec: SyntheticModel) -> Path:
    key = json.dumps(
        {
            "v": BUILDER_VERSION,
            "builder": builder_digest(),
            "family": _family_data(spec.arch),
            **spec.model_dump(),
        },
        sort_keys=True,
        default=str,
    )
    return (
        cache_root()
        / "models"
        / f"{spec.arch.lower()}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    )


def _family_data(arch: str) -> dict:
    """The ArchFamily as data (its functions by name), so a change made at run time counts too."""
    try:
        fam = family_of(arch)
    except ValueError:
        return {}
    return (
        {k: getattr(v, "__qualname__", v) for k, v in dataclasses.asdict(fam).items()}
        if dataclasses.is_dataclass(fam)
        else {"repr": repr(fam)}
    )


def seeded_values(seed: int, name: str, shape: tuple[int, ...], std: float) -> np.ndarray:
    """The value of one parameter: a function of (seed, name, shape) only."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    leaf = name.rsplit(".", 1)[-1]
    is_norm = "norm" in name.lower() and leaf == "weight"
    if is_norm:
        return (1.0 + rng.normal(0.0, 0.1, shape)).astype(np.float32)
    if leaf == "bias":
        return rng.normal(0.0, 0.02, shape).astype(np.float32)
    return rng.normal(0.0, std, shape).astype(np.float32)


def build(spec: SyntheticModel, target: Path) -> str:
    """Write the checkpoint atomically into `target`; returns its fingerprint."""
    import torch
    import transformers

    from harness.models.refmodels import REFERENCE_ARCHS, checkpoint_names

    fam = family_of(spec.arch)
    if spec.head and fam.post_build is None:
        raise ValueError(f"{spec.arch}: `head` options {spec.head} but its family writes no head")
    absent = {k for k, v in spec.config.items() if v is None}  # left out of config.json
    cfg = {k: v for k, v in {**fam.config, **spec.config}.items() if k not in absent}
    config = transformers.AutoConfig.for_model(fam.model_type, **cfg)
    config.architectures = [spec.arch]
    torch.manual_seed(0)  # irrelevant to the result: every parameter is overwritten below
    if spec.arch in REFERENCE_ARCHS:
        ref_cls, num_labels = REFERENCE_ARCHS[spec.arch]
        if num_labels is not None:
            config.num_labels = num_labels
        model = ref_cls(config).eval()
    else:
        model = getattr(transformers, fam.hf_class.get(spec.arch, spec.arch))(config).eval()
    std = float(cfg.get("initializer_range", 0.2))
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.from_numpy(seeded_values(spec.seed, name, tuple(param.shape), std)))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        if isinstance(model, transformers.PreTrainedModel):
            model.save_pretrained(tmp, safe_serialization=True)
            if fam.checkpoint_prefixes:
                _rename_saved_weights(tmp / "model.safetensors", fam.checkpoint_prefixes)
        else:  # a harness reference architecture: plain safetensors + config
            from safetensors.torch import save_file

            # index buffers (position_ids, token_type_ids) are not weights: vLLM rejects them
            state = {
                k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("_ids")
            }
            save_file(
                checkpoint_names(type(model), state),
                str(tmp / "model.safetensors"),
                metadata={"format": "pt"},
            )
            config.save_pretrained(tmp)
        if absent:  # whatever default the installed transformers writes for them
            update_config_json(tmp, drop=absent)
        if fam.post_build is not None:
            fam.post_build(tmp, spec, config)
        fam.tokenizer(tmp, cfg, **spec.tokenizer)
        if spec.pooling:
            _write_sentence_transformers(
                tmp, spec, config.hidden_size, cfg.get("max_position_embeddings", 512)
            )
        fp = fingerprint(tmp)
        (tmp / "fingerprint.txt").write_text(fp + "\n")
        if target.exists():  # another process won the race; theirs is identical
            shutil.rmtree(tmp)
        else:
            os.rename(tmp, target)
        return fp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def update_config_json(out: Path, changes: dict | None = None, drop=()) -> None:
    """Rewrite out/config.json with `changes` set and the keys in `drop` left out, in the one
    layout every builder step writes it (sorted keys, indent 2, a final newline)."""
    cfg = {k: v for k, v in json.loads((out / "config.json").read_text()).items() if k not in drop}
    cfg.update(changes or {})
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def _rename_saved_weights(path: Path, prefixes: dict[str, str]) -> None:
    from safetensors.numpy import load_file, save_file

    from harness.models.refmodels import renamed

    save_file(
        {renamed(k, prefixes): v for k, v in load_file(str(path)).items()},
        str(path),
        metadata={"format": "pt"},
    )


def _write_sentence_transformers(out: Path, spec: SyntheticModel, dim: int, max_len: int) -> None:
    """The modules.json layout sentence-transformers and vLLM both read for pooling/normalize."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
    ]
    pooling_dir = out / "1_Pooling"
    pooling_dir.mkdir()
    modes = {
        "mean": "pooling_mode_mean_tokens",
        "cls": "pooling_mode_cls_token",
        "lasttoken": "pooling_mode_lasttoken",
    }
    if spec.pooling_format == "compact":  # sentence-transformers >= 5.4 writes this
        pooling_cfg = {"embedding_dimension": dim, "pooling_mode": spec.pooling}
    else:
        pooling_cfg = {
            "word_embedding_dimension": dim,
            **{v: k == spec.pooling for k, v in modes.items()},
        }
    (pooling_dir / "config.json").write_text(json.dumps(pooling_cfg, indent=2, sort_keys=True))
    modules.append(
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
    )
    width = dim
    for layer in spec.dense:  # Dense modules after Pooling, as EmbeddingGemma's 2_Dense, 3_Dense
        idx = len(modules)
        folder = layer.folder or f"{idx}_Dense"
        _write_st_dense(out / folder, spec.seed, idx, width, layer)
        modules.append(
            {
                "idx": idx,
                "name": str(idx),
                "path": folder,
                "type": "sentence_transformers.models.Dense",
            }
        )
        width = layer.out_features
    if spec.normalize:
        idx = len(modules)
        (out / f"{idx}_Normalize").mkdir()
        modules.append(
            {
                "idx": idx,
                "name": str(idx),
                "path": f"{idx}_Normalize",
                "type": "sentence_transformers.models.Normalize",
            }
        )
    (out / "modules.json").write_text(json.dumps(modules, indent=2))
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_len, "do_lower_case": False}, indent=2)
    )
    if spec.prompts:
        (out / "config_sentence_transformers.json").write_text(
            json.dumps(
                {
                    "prompts": dict(spec.prompts),
                    "default_prompt_name": spec.default_prompt_name,
                    "similarity_fn_name": "cosine",
                },
                indent=2,
            )
        )


def _write_st_dense(folder: Path, seed: int, idx: int, in_features: int, layer) -> None:
    """One sentence-transformers Dense module as its save() writes it: config.json (keys at their
    default omitted, as Dense.get_config_dict does for use_residual) and model.safetensors with
    `linear.weight` / `linear.bias` (and `residual.weight` when a residual changes the width).
    Weights are seeded by (seed, module folder, name), scaled 1/sqrt(in_features) so the output
    stays O(1) and a Tanh does not saturate."""
    from safetensors.numpy import save_file

    folder.mkdir()
    std = 1.0 / float(np.sqrt(in_features))
    name = f"{idx}_Dense"
    weights = {
        "linear.weight": seeded_values(
            seed, f"{name}.linear.weight", (layer.out_features, in_features), std
        )
    }
    if layer.bias:
        weights["linear.bias"] = seeded_values(
            seed, f"{name}.linear.bias", (layer.out_features,), std
        )
    if layer.use_residual and layer.out_features != in_features:
        weights["residual.weight"] = seeded_values(
            seed, f"{name}.residual.weight", (layer.out_features, in_features), std
        )
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "in_features": in_features,
        "out_features": layer.out_features,
        "bias": layer.bias,
        "activation_function": layer.activation_function,
    }
    if layer.use_residual:
        config["use_residual"] = True
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))


def main(argv: list[str]) -> int:
    """Build each spec (a SyntheticModel JSON) in turn, in this one process: the imports of torch
    and transformers are paid once for the batch. A line of JSON per spec says where it is, or
    why it failed; a failure does not stop the specs after it (exit 1 if any failed)."""
    failed = 0
    for arg in argv:
        try:
            spec = SyntheticModel.model_validate_json(arg)
            target = spec_dir(spec)
            done = target / "fingerprint.txt"
            fp = done.read_text().strip() if done.exists() else build(spec, target)
            line = {"path": str(target), "fingerprint": fp}
        except Exception as e:  # noqa: BLE001 - one broken spec never stops the batch
            failed += 1
            line = {"spec": arg, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(line), flush=True)
    return 1 if failed else 0
