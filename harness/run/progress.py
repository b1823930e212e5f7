"""Progress while a run executes: a rich bar on a terminal; plain lines where output is a log.

A CI log is not a terminal: a live bar prints nothing there until the end. There we print one
line per finished (case, runner) with its outcome and time, each load and recycle as it starts,
and a heartbeat at least every HEARTBEAT_SECONDS naming what every lane is doing.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

HEARTBEAT_SECONDS = 30.0


class PlainProgress:
    """The executor's progress callback, as plain lines (thread-safe; lanes report concurrently)."""

    def __init__(
        self, console: Console, name: str, total: int, heartbeat: float = HEARTBEAT_SECONDS
    ):
        self.console = console
        self.name = name
        self.total = total
        self.done = 0
        self.heartbeat = heartbeat
        self.t0 = time.monotonic()
        self.doing: dict[str, tuple[str, float]] = {}  # lane (thread name) -> (what, since)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)

    def _line(self, text: str) -> None:
        self.console.print(
            f"{self.name} {time.monotonic() - self.t0:6.0f}s {text}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )

    def __call__(self, msg: str, outcome=None) -> None:
        lane = threading.current_thread().name
        with self._lock:
            if outcome is None:
                self.doing[lane] = (msg, time.monotonic())
                self._line(msg)
                return
            self.done += 1
            self.doing[lane] = (f"after {msg}", time.monotonic())
            secs = (outcome.load_seconds or 0.0) + (outcome.run_seconds or 0.0)
            reason = f": {outcome.reason.splitlines()[0][:160]}" if outcome.reason else ""
            self._line(f"[{self.done}/{self.total}] {msg} ({secs:.1f}s){reason}")

    def note(self, msg: str) -> None:
        """A line about the run as a whole (no lane is doing it from then on)."""
        with self._lock:
            self._line(msg)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            now = time.monotonic()
            with self._lock:
                lanes = (
                    "; ".join(f"{what} ({now - since:.0f}s)" for what, since in self.doing.values())
                    or "preparing models (building synthetic checkpoints, resolving paths)"
                )
                self._line(f"… {self.done}/{self.total} done; in progress: {lanes}")

    def __enter__(self) -> "PlainProgress":
        self._line(f"started: {self.total} (case, runner) outcomes to produce")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@contextmanager
def progress_reporter(console: Console, name: str, total: int) -> Iterator:
    """Yields the callback the executor reports to: a bar on a terminal, plain lines elsewhere."""
    if not console.is_terminal:
        with PlainProgress(console, name, total) as plain:
            yield plain
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
    ) as bar:
        task = bar.add_task(name, total=total, last="")
        yield lambda msg, outcome: bar.update(
            task, advance=1 if outcome is not None else 0, last=msg[:80]
        )
