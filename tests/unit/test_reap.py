"""Stopping process trees (harness.runners.reap) and the worker registry's stop (pool.stop_all):
SIGTERM, a grace, then SIGKILL for what ignores it; no worker starts once the run is stopping."""

import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import asdict

import psutil
import pytest

from harness.runners import LoadRequest, pool, reap

# a child that starts a grandchild deaf to SIGTERM, prints both pids, then waits
TREE = textwrap.dedent(
    """
    import signal, subprocess, sys, time
    deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(600)"
    g = subprocess.Popen([sys.executable, "-c", deaf], stdout=subprocess.PIPE, text=True)
    g.stdout.readline()  # its SIGTERM is ignored from now on
    print(g.pid, flush=True)
    time.sleep(600)
    """
)


def _gone(pid: int) -> bool:
    try:
        p = psutil.Process(pid)
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + 30  # a hang guard: the kill itself is immediate
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if not _gone(p)]


def test_stop_tree_kills_what_ignores_sigterm_and_what_its_parent_left():
    child = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    reap.stop_tree(grace=0.5)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGTERM  # it took the SIGTERM
    # the grandchild ignored SIGTERM and lost its parent: listed before, killed after the grace
    assert _wait_gone([grandchild]) == []


def test_no_worker_starts_once_the_run_is_stopping(tmp_path):
    pool.stop_all(grace=0)
    try:
        w = pool.Worker("fake", {}, tmp_path / "fake.log")
        with pytest.raises(pool.WorkerStopped, match="the run is stopping"):
            w.start(timeout=60)
        assert w.proc is None
    finally:
        pool.resume()
    assert not pool.stopping()


def test_a_worker_stopped_mid_request_is_stopped_not_failing(tmp_path):
    log = tmp_path / "fake.log"
    w = pool.Worker("fake", {}, log)
    w.start(timeout=120)
    engine = {"behaviour": "hang-load", "say": "LOADING"}
    load = {"op": "load", "request": asdict(LoadRequest(str(tmp_path), "float32", "cpu", engine))}
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            w.request(load, 600, "model load")
        except BaseException as e:  # noqa: BLE001 - what the lane would see
            errors.append(e)

    lane = threading.Thread(target=ask)
    lane.start()
    try:
        deadline = time.monotonic() + 120  # a hang guard; the event is the log line
        while "LOADING" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        pool.stop_all(grace=5)
        lane.join(timeout=60)
        assert len(errors) == 1 and isinstance(errors[0], pool.WorkerStopped), errors
        assert "stopped during model load" in str(errors[0])
    finally:
        pool.resume()
        w.kill()


def test_a_bad_grace_setting_names_itself(monkeypatch):
    monkeypatch.setenv(reap.GRACE_ENV, "soon")
    with pytest.raises(ValueError, match="PARITY_STOP_GRACE='soon'"):
        reap.grace_seconds()
