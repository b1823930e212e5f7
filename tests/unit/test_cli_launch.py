"""The launcher hands a signal to the command it runs in the engine's environment: SIGTERM to
`parity` (what CI and `timeout` send) must reach the run that owns the workers, or they live on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

# the child: says it is ready, then waits; on SIGTERM it writes what it got and exits 143
CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    out = Path(sys.argv[1])
    def stop(signum, frame):
        (out / "got").write_text(str(signum))
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    (out / "ready").write_text(str(__import__("os").getpid()) + "\\n")  # a line: complete
    while True:
        time.sleep(0.05)
    """
)

LAUNCHER = textwrap.dedent(
    """
    import sys
    from harness.cli.launch import run_forwarding
    sys.exit(run_forwarding([sys.executable, "-c", sys.argv[1], sys.argv[2]], dict(__import__("os").environ)))
    """
)


def _wait_for(path: Path, proc: subprocess.Popen, bound: float = 120.0) -> None:
    """Until `path` exists (an event); the bound only guards against a hang."""
    import time

    end = time.monotonic() + bound
    while not path.exists():
        assert proc.poll() is None, f"launcher ended early with {proc.returncode}"
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.05)


def _read_pid(path: Path, proc: subprocess.Popen, bound: float = 120.0) -> int:
    """The pid the child wrote once its line is complete: the file exists from the moment it is
    opened, before its text is in it (seen on a loaded machine: an empty read)."""
    import time

    end = time.monotonic() + bound
    _wait_for(path, proc, bound)
    while not path.read_text().endswith("\n"):
        assert proc.poll() is None, f"launcher ended early with {proc.returncode}"
        assert time.monotonic() < end, f"{path.name} was never completed"
        time.sleep(0.05)
    return int(path.read_text())


def test_the_pid_is_read_only_once_the_child_has_written_it_whole(tmp_path):
    """The file appears empty first and its line later (a writer delayed between the two, as a
    loaded machine delays one): the pid is read from the whole line, not the empty file."""
    import threading

    ready = tmp_path / "ready"
    waiter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ready.touch()
        writer = threading.Timer(0.3, lambda: ready.write_text("4242\n"))
        writer.start()
        assert _read_pid(ready, waiter) == 4242  # an empty read would not be a number
        writer.join()
    finally:
        waiter.kill()
        waiter.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _run(tmp_path: Path, signum: int) -> tuple[int, str, int]:
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, CHILD, str(tmp_path)], env=env)
    try:
        child = _read_pid(tmp_path / "ready", proc)
        proc.send_signal(signum)
        code = proc.wait(timeout=120)
    finally:
        _stop_tree(proc)
    return code, (tmp_path / "got").read_text(), child


def _stop_tree(proc: subprocess.Popen) -> None:
    """The launcher and what it started, when a test stops before the signal ended them: a
    failed assertion must not leave the waiting child behind."""
    import psutil

    if proc.poll() is None:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()


def test_sigterm_to_the_launcher_reaches_the_command_and_its_exit_code_comes_back(tmp_path):
    code, got, child = _run(tmp_path, signal.SIGTERM)
    assert got == str(int(signal.SIGTERM))
    assert code == 128 + signal.SIGTERM
    assert not _alive(child)


def test_sigint_reaches_the_command_once(tmp_path):
    code, got, child = _run(tmp_path, signal.SIGINT)
    assert got == str(int(signal.SIGINT))
    assert code == 128 + signal.SIGINT
    assert not _alive(child)


def test_a_test_stopped_early_leaves_no_child_behind(tmp_path):
    """What _run's cleanup does when an assertion fires before the signal: the launcher's child
    (the command, waiting) goes with the launcher."""
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, CHILD, str(tmp_path)], env=env)
    child = _read_pid(tmp_path / "ready", proc)
    _stop_tree(proc)
    assert proc.poll() is not None
    import psutil

    try:  # killed: gone, or a zombie until the init process reaps it
        assert psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        pass
