"""Where a command runs: in the environment of the vLLM under test (`--vllm SPEC`, else
PARITY_VLLM, else the pinned release), set up or reused under PARITY_ENGINES. This process never
imports vLLM: it runs the command in-process when it already is that environment, else it
launches `python -m harness.cli ...` with the environment's Python and waits for its exit code."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

from harness.cli.common import UsageError, err
from harness.engine.env import IN_ENGINE_ENV, EngineEnv, ensure
from harness.engine.target import (
    IMPORTABLE,
    EngineSpec,
    EngineSpecError,
    check_runnable,
    driver_present,
    spec_from_env,
    vllm_provenance,
)
from harness.settings import child_environ, current

# what a command needs in its environment besides the harness and vLLM (pyproject extras)
EXTRAS = {"mteb": ("mteb",)}


def resolve(text: str | None) -> EngineSpec:
    """The EngineSpec of a --vllm value (None: PARITY_VLLM, else the pinned release)."""
    try:
        spec = spec_from_env(text=text)
        check_runnable(spec)
    except EngineSpecError as e:
        raise UsageError(str(e)) from None
    return spec


def is_here(spec: EngineSpec) -> bool:
    """Whether this process already runs in `spec`'s environment: launched there by `parity`
    (or nox, or ci/parity-gate), asked for `importable`, or a Python whose installed vLLM is that
    very release."""
    if spec.kind == IMPORTABLE or current().in_engine == spec.describe():
        if spec.kind == IMPORTABLE:
            _environment(spec)  # refuses a Python with no vLLM
        return True
    if spec.kind != "release":
        return False
    p = vllm_provenance()
    return p.get("kind") == "release" and p.get("distribution") == spec.requirement


def _environment(spec: EngineSpec, extras: tuple[str, ...] = ()) -> EngineEnv:
    t0 = time.perf_counter()
    try:
        env = ensure(spec, extras)
    except EngineSpecError as e:
        raise UsageError(str(e)) from None
    except subprocess.CalledProcessError as e:
        raise UsageError(
            f"the environment of {spec.describe()} could not be set up: {e} (see above)"
        ) from None
    how = "reused" if env.reused else f"set up in {time.perf_counter() - t0:.0f} s"
    overlay = f", overlay {env.pythonpath[0]}" if env.pythonpath else ""
    err.print(
        f"parity: vLLM under test: {spec.describe()} ({env.python}{overlay}; {how})",
        highlight=False,
        markup=False,
    )
    return env


def child_env(spec: EngineSpec, env: EngineEnv) -> dict[str, str]:
    """The environment of a command launched in `env`: its Python first, the overlay and the
    harness on PYTHONPATH, the spec it runs, and on a GPU host a CPU build kept on the CPU."""
    full = {**env.env(), **child_environ()}  # with what this command decided for itself
    full[IN_ENGINE_ENV] = spec.describe()
    if spec.backend == "cpu" and driver_present() and not current().device:
        full["PARITY_DEVICE"] = "cpu"  # the user asked for vLLM's CPU build on a GPU host
    return full


def launch(spec: EngineSpec, argv: list[str], command: str) -> int:
    """Run `parity ARGV` in the environment of `spec` (set up or reused); its exit code."""
    env = _environment(spec, EXTRAS.get(command, ()))
    cmd = [env.python, "-m", "harness.cli", *argv]
    return run_forwarding(cmd, child_env(spec, env))


def run_forwarding(cmd: list[str], env: dict[str, str]) -> int:
    """Run `cmd` to its end, handing it every SIGINT and SIGTERM this process gets, once each: the
    child stops its own workers and servers and writes its partial report (a second signal is its
    "now"). In a session of its own, so a terminal's Ctrl-C reaches it once, through us."""
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)

    def forward(signum, _frame) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    signals = (signal.SIGINT, signal.SIGTERM)
    main = threading.current_thread() is threading.main_thread()
    before = {s: signal.signal(s, forward) for s in signals} if main else {}
    try:
        code = proc.wait()
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    return 128 - code if code < 0 else code  # killed by signal N: the shell's 128 + N


def here_or_launch(spec: EngineSpec, argv: list[str], command: str) -> int | None:
    """None when this process is `spec`'s environment (run the command here); else the exit code
    of the command launched there."""
    if is_here(spec):
        return None
    return launch(spec, argv, command)


def with_vllm(argv: list[str], spec_text: str | None) -> list[str]:
    """ARGV with --vllm SPEC appended (a child asked for one spec of several), or unchanged."""
    return [*argv, "--vllm", spec_text] if spec_text is not None else list(argv)
