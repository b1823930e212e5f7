"""Seeded LoRA adapters, built beside a case's model with peft's own save_pretrained.

peft builds the adapter (`get_peft_model` with the case's LoraConfig), every adapter parameter
(lora_A, lora_B and the copies of the modules_to_save) is overwritten with values from a numpy
generator seeded by (spec seed, parameter name) (the synthetic checkpoints' `seeded_values`), and
peft saves it (`adapter_config.json`, `adapter_model.safetensors`). peft's own init would leave
lora_B at zero: an adapter that changes nothing and so proves nothing.

Built once per (model fingerprint, spec, this module, peft's version) into the model cache, in a
subprocess (`python -m harness.models.lora MODEL_DIR FINGERPRINT '<LoraAdapter JSON>'`), as
synthetic checkpoints are.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.matrix.paths import cache_root
from harness.matrix.schema import LoraAdapter
from harness.models.cache import fingerprint

# adapter_config.json keys that name where it was built, not what it is
_VOLATILE_ADAPTER_KEYS = {"base_model_name_or_path", "revision"}


@functools.lru_cache(maxsize=1)
def _builder_digest() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _peft_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("peft")
    except PackageNotFoundError:
        return "absent"


def adapter_dir(model_fingerprint: str, spec: LoraAdapter) -> Path:
    key = json.dumps(
        {
            "model": model_fingerprint,
            "builder": _builder_digest(),
            "peft": _peft_version(),
            **spec.model_dump(),
        },
        sort_keys=True,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_root() / "adapters" / f"lora-{model_fingerprint[:12]}-{digest}"


def adapter_fingerprint(folder: Path) -> str:
    """sha256 over the adapter's tensors and its adapter_config.json (where it was built left
    out)."""
    cfg = json.loads((folder / "adapter_config.json").read_text())
    for k in _VOLATILE_ADAPTER_KEYS:
        cfg.pop(k, None)
    h = hashlib.sha256(fingerprint(folder).encode())
    h.update(json.dumps(cfg, sort_keys=True).encode())
    return h.hexdigest()


def combined_fingerprint(model_fingerprint: str, adapter_fp: str) -> str:
    """The fingerprint of base model + adapter: what a LoRA case's results and goldens are
    keyed on."""
    return hashlib.sha256(f"{model_fingerprint}+lora:{adapter_fp}".encode()).hexdigest()


def build(model_dir: Path, spec: LoraAdapter, target: Path) -> str:
    """Build the adapter of `spec` on the model in `model_dir` atomically into `target`; returns
    its fingerprint. The model is loaded with the class its config names (transformers)."""
    import peft
    import torch
    import transformers

    from harness.models.synthetic import seeded_values

    config = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    arch = (config.architectures or [""])[0]
    cls = getattr(transformers, arch, None)
    if cls is None:
        raise ValueError(f"transformers has no class {arch!r} to build a LoRA adapter on")
    base = cls.from_pretrained(model_dir, dtype=torch.float32, local_files_only=True).eval()
    task_type = "SEQ_CLS" if arch.endswith("ForSequenceClassification") else None
    lora_config = peft.LoraConfig(
        task_type=task_type,
        r=spec.r,
        lora_alpha=spec.lora_alpha,
        target_modules=list(spec.target_modules),
        modules_to_save=list(spec.modules_to_save) or None,
        lora_dropout=0.0,
    )
    model = peft.get_peft_model(base, lora_config)
    seeded = 0
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name or "modules_to_save" in name:
                values = seeded_values(spec.seed, name, tuple(param.shape), spec.std)
                param.copy_(torch.from_numpy(values))
                seeded += 1
    if not seeded:
        raise ValueError(f"the LoRA spec {spec.model_dump()} adds no parameter to {arch}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        (tmp / "README.md").unlink(missing_ok=True)  # peft's model-card stub: not the adapter
        fp = adapter_fingerprint(tmp)
        (tmp / "fingerprint.txt").write_text(fp + "\n")
        if target.exists():
            shutil.rmtree(tmp)
        else:
            os.rename(tmp, target)
        return fp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def build_adapter(
    model_dir: Path, model_fingerprint: str, spec: LoraAdapter, timeout: float = 600
) -> tuple[Path, str]:
    """(the adapter folder, its fingerprint): built once, in a subprocess, then cached."""
    target = adapter_dir(model_fingerprint, spec)
    if not (target / "fingerprint.txt").exists():
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.models.lora",
                str(model_dir),
                model_fingerprint,
                spec.model_dump_json(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
        if proc.returncode != 0 or not (target / "fingerprint.txt").exists():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise RuntimeError(f"building the LoRA adapter failed:\n{tail}")
    return target, (target / "fingerprint.txt").read_text().strip()


def main(argv: list[str]) -> int:
    model_dir, model_fingerprint = Path(argv[0]), argv[1]
    spec = LoraAdapter.model_validate_json(argv[2])
    target = adapter_dir(model_fingerprint, spec)
    if not (target / "fingerprint.txt").exists():
        build(model_dir, spec, target)
    print(json.dumps({"path": str(target)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
