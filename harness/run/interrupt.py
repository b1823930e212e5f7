"""Signals that stop a run: SIGINT (Ctrl-C) and SIGTERM (what CI systems and `timeout` send).

The first signal stops every worker and every other process the run started, at once
(harness.runners.pool.stop_all), then raises Interrupted in the main thread wherever it is
(planning, checkpoint builds, a load, a case): the session keeps every result obtained and
writes a partial report. Once every result is in (comparisons, golden writes, report writing,
all short) a first signal no longer interrupts: the report is finished. A second signal stops
at once: every process the run started is killed and this one exits without waiting.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from harness.runners import pool

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[str] = []
_finishing = threading.Event()


class Interrupted(KeyboardInterrupt):
    """The run was told to stop by a signal; KeyboardInterrupt's kind, so every place that keeps
    results on Ctrl-C keeps them on SIGTERM too."""

    def __init__(self, signame: str = "SIGINT"):
        super().__init__(signame)
        self.signame = signame


def reason(exc: BaseException) -> str:
    """The partial report's reason for an interruption."""
    name = getattr(exc, "signame", "SIGINT")
    how = "Ctrl-C, SIGINT" if name == "SIGINT" else name
    return f"interrupted ({how}): cases not reached are reported as errors"


def while_planning(exc: BaseException) -> str:
    """A signal while planning (checkpoint builds): the partial report's reason; from now on the
    report is finished first."""
    finishing()
    return f"{reason(exc).split(':')[0]} while planning: no case ran"


def _say(text: str) -> None:
    try:  # os.write: a handler may run while this thread is inside a print
        os.write(2, f"parity: {text}\n".encode())
    except OSError:
        pass


def _handle(signum: int, frame) -> None:
    name = signal.Signals(signum).name
    _received.append(name)
    if len(_received) > 1:
        _say(f"{name} again: stopping now, no report")
        pool.stop_all(grace=0)
        os._exit(128 + signum)
    if _finishing.is_set():
        _say(f"{name}: every result is in; finishing the report (again: stop now)")
        return
    _say(f"{name}: stopping every worker; the report keeps every result obtained (again: now)")
    pool.stop_all()
    raise Interrupted(name)


def finishing() -> None:
    """Every result is in: from now on a first signal lets the report be finished."""
    _finishing.set()


def received() -> list[str]:
    """The signals received since handling() began, by name."""
    return list(_received)


@contextmanager
def handling() -> Iterator[None]:
    """Stop on SIGINT and SIGTERM as described above, for the block (a command). Only the main
    thread can receive Python signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()  # a new command: no stop, no "finishing" left from one run before it
    _finishing.clear()
    old = {sig: signal.signal(sig, _handle) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        _received.clear()
        _finishing.clear()
        pool.resume()
