"""A `vllm serve` process's log: where it is kept, and what of it a failure's reason carries.

A worker of a run logs to `<run>/logs/<runner>[.<lane>].log` (PARITY_WORKER_LOG, set by
harness.runners.pool for each worker); each server it starts logs beside it, one file per start
(`<runner>[.<lane>].server-<k>.log`: a restart, or a restarted worker, never overwrites an
earlier one). A server started with no worker log known (a test, a script using the runner
directly) logs into a temporary folder that is removed when the server stops.

A failure's reason carries the full log's path, the log's first error block (vLLM's EngineCore
prints the root cause, say "Worker proc VllmWorker-0 died unexpectedly", and then a long
traceback whose last lines say only "RuntimeError: cancelled"), and the log's last lines;
bounded, since reasons go into every report."""

from __future__ import annotations

import re
import shutil
import tempfile
from itertools import count
from pathlib import Path

from harness import settings

TAIL_MARK = "--- server log tail ---"  # harness.report.html splits a reason's log off here
FIRST_ERROR_MARK = "--- server log, first error"  # ... or here, when it comes first
TAIL_LINES = 30
BLOCK_LINES = 12  # the first error line and the lines after it
LINE_CHARS = 200  # a longer log line is cut (a request dumped into the log)
BLOCK_CHARS = 1200  # the first error block, at most
EXCERPT_CHARS = 3200  # everything taken from the log: the worker caps an error at 4000
# vLLM's `ERROR 12-04 21:00:00 [core.py:..]` (after a `(EngineCore_DP0 pid=..)` prefix),
# uvicorn's `ERROR:    Exception in ASGI application`, a Python traceback
ERROR_LINE = re.compile(
    r"(?:^|[\s)\]])(?:ERROR|CRITICAL)(?=[\s:])|Traceback \(most recent call last\)"
)


def new_log() -> tuple[Path, Path | None]:
    """(the log file of a server about to start, the temporary folder holding it or None).
    Beside the worker's log when this process is a run's worker, else in a new temporary
    folder that `remove_temporary` takes away when the server stops."""
    worker_log = settings.current().worker_log
    if worker_log is None:
        folder = Path(tempfile.mkdtemp(prefix="parity-serve-"))
        return folder / "server.log", folder
    worker_log.parent.mkdir(parents=True, exist_ok=True)
    stem = worker_log.name.removesuffix(".log")
    for k in count(1):  # the first number not taken: created here, so no other start takes it
        path = worker_log.parent / f"{stem}.server-{k}.log"
        try:
            path.open("xb").close()
        except FileExistsError:
            continue
        return path, None
    raise AssertionError("unreachable")


def remove_temporary(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def excerpt(path: Path | None, since: int = 0, kept: bool = True) -> str:
    """What a failure's reason carries of a server log, to append to its message: the full log's
    path (when `kept`: a temporary log is gone once its server stops), the first error block
    written from byte `since` on (this case's, not an earlier case's) unless the tail holds it,
    and the log's last lines. At most EXCERPT_CHARS from the log."""
    try:
        data = Path(path).read_bytes() if path is not None else None
    except OSError:
        data = None
    if data is None:
        return f"\n{TAIL_MARK}\n(no server log)"
    lines = data.decode(errors="replace").splitlines()
    first = data[:since].count(b"\n") if 0 < since <= len(data) else 0
    shown = [i for i, ln in enumerate(lines) if ln.strip()]
    tail = shown[-TAIL_LINES:]
    head = f"\nfull server log: {path}" if kept else ""
    block: list[str] = []
    error = next(
        (i for i in shown if i >= first and ERROR_LINE.search(lines[i])),
        None,
    )
    if error is not None and tail and error < tail[0]:
        used = 0
        for i in (i for i in shown if error <= i < tail[0]):
            line = _cut(lines[i])
            if len(block) == BLOCK_LINES or used + len(line) > BLOCK_CHARS:
                break
            block.append(line)
            used += len(line) + 1
        head += f"\n{FIRST_ERROR_MARK} (line {error + 1} of {len(lines)}) ---\n" + "\n".join(block)
    room = EXCERPT_CHARS - sum(len(x) + 1 for x in block)
    kept_tail: list[str] = []
    for i in reversed(tail):  # the newest lines first, as many as fit
        line = _cut(lines[i])
        if room - len(line) - 1 < 0:
            break
        kept_tail.insert(0, line)
        room -= len(line) + 1
    return f"{head}\n{TAIL_MARK}\n" + "\n".join(kept_tail)
