"""Stopping process trees: every process the harness started, and theirs, with nothing left.

The parent side stops what it started (worker process groups and every descendant it can see)
with SIGTERM, a grace, then SIGKILL. The worker side watches its parent: a harness killed
outright (SIGKILL: no handler runs) must not leave its workers, their servers and engine cores
running forever, so a worker whose parent is gone stops its own process group.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterable

from harness import settings

GRACE_SECONDS = 3.0  # SIGTERM first (vLLM's server shuts its engine down), then SIGKILL
GRACE_ENV = "PARITY_STOP_GRACE"  # seconds; a fixed default, never derived from the host
WATCH_SECONDS = 0.5  # how often a worker looks at its parent


def descendants(pid: int | None = None) -> list:
    """Every live process below `pid` (default: this one), as psutil processes (which guard
    against a reused pid); empty where psutil is missing (the process groups still reach them)."""
    try:
        import psutil
    except ImportError:
        return []
    try:
        return psutil.Process(pid or os.getpid()).children(recursive=True)
    except psutil.Error:
        return []


def _signal_all(procs: list, groups: Iterable[int], sig: int) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for p in procs:
        try:
            p.send_signal(sig)
        except Exception:  # noqa: BLE001 - psutil.Error: gone meanwhile
            pass


def _alive(procs: list, groups: Iterable[int]) -> bool:
    for pgid in groups:
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            pass
    return any(_running(p) for p in procs)


def _running(proc) -> bool:
    """Still running; a zombie (dead, not yet reaped) counts as gone."""
    try:
        import psutil

        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except Exception:  # noqa: BLE001 - psutil.Error: gone
        return False


def grace_seconds() -> float:
    """PARITY_STOP_GRACE, read and checked where every setting is (harness.settings)."""
    return settings.current().stop_grace


def stop_tree(groups: Iterable[int] = (), grace: float | None = None) -> None:
    """Stop `groups` (process group ids) and every descendant of this process: SIGTERM, up to
    `grace` seconds for them to exit, then SIGKILL. The descendants are listed before anything
    is signalled: a server's engine core whose parent dies first is no longer below us."""
    groups = list(groups)
    grace = grace_seconds() if grace is None else grace
    procs = descendants()
    if grace > 0:
        _signal_all(procs, groups, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _alive(procs, groups):
            time.sleep(0.05)
    procs += [p for p in descendants() if p not in procs]  # started meanwhile
    _signal_all(procs, groups, signal.SIGKILL)


def watch_parent(interval: float = WATCH_SECONDS) -> threading.Thread:
    """In a worker: a daemon thread that stops this worker's process group (its server, engine
    cores and their helpers too) once the process that started it is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        procs = descendants()
        _signal_all(procs, (), signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline and any(_running(p) for p in procs):
            time.sleep(0.05)
        if os.getpgrp() == os.getpid():  # a group of its own (the harness starts it so)
            os.killpg(os.getpgrp(), signal.SIGKILL)  # this process and whatever is left in it
        _signal_all(descendants(), (), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
