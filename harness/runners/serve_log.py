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
TRACEBACK = "Traceback (most recent call last)"
TRACEBACK_SCAN = 2000  # lines a traceback's end is looked for in
# vLLM's `ERROR 12-04 21:00:00 [core.py:..]` (after a `(EngineCore_DP0 pid=..)` prefix),
# uvicorn's `ERROR:    Exception in ASGI application`, a Python traceback
ERROR_LINE = re.compile(r"(?:^|[\s)\]])(?:ERROR|CRITICAL)(?=[\s:])|" + re.escape(TRACEBACK))


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


def _raised_at(lines: list[str], header: int) -> int | None:
    """The line of the traceback whose header is line `header` that says what it raised: its
    first line (after the header's prefix, vLLM's `(EngineCore pid=7) ERROR .. [core.py:1512] `)
    that is not indented as the frames are; None when the log ends first."""
    prefix = lines[header][: lines[header].index(TRACEBACK)]
    for i in range(header + 1, min(len(lines), header + TRACEBACK_SCAN)):
        rest = lines[i][len(prefix) :] if lines[i].startswith(prefix) else ""
        if rest.strip() and not rest[0].isspace():  # (another process's lines are skipped)
            return i
    return None


def _innermost(
    lines: list[str], shown: list[int], header: int, raised: int, used: int, room: int = 0
) -> list[int]:
    """A traceback's last lines down to what it raised (line `raised`), as many as fit beside
    the `used` characters already shown, at most `room` lines (default BLOCK_LINES - 1)."""
    inner: list[int] = []
    for i in reversed([i for i in shown if header < i <= raised]):
        used += len(_cut(lines[i])) + 1
        if len(inner) == (room or BLOCK_LINES - 1) or used > BLOCK_CHARS:
            break
        inner.insert(0, i)
    return inner


def _first_error(lines: list[str], shown: list[int], since: int, end: int) -> list[int]:
    """The lines to show of the first error logged from line `since` on, above line `end` (the
    tail's first): the error line and those after it; of a bare traceback, its header and its
    innermost frames down to what it raised (none when the tail shows what it raised)."""
    error = next((i for i in shown if i >= since and ERROR_LINE.search(lines[i])), None)
    if error is None or error >= end:
        return []
    if TRACEBACK in lines[error]:
        raised = _raised_at(lines, error)
        if raised is None or raised >= end:
            return []
        return [error, *_innermost(lines, shown, error, raised, len(_cut(lines[error])))]
    # an error line that a traceback follows (vLLM's "WorkerProc failed to start.", then the
    # traceback whose end says why): the line, the traceback's header, its innermost frames and
    # what it raised, which a block of the lines after the error would cut off
    after = next((i for i in shown if i > error), None)
    if after is not None and after < end and TRACEBACK in lines[after]:
        raised = _raised_at(lines, after)
        if raised is not None and raised < end:
            used = len(_cut(lines[error])) + len(_cut(lines[after])) + 1
            return [error, after, *_innermost(lines, shown, after, raised, used, BLOCK_LINES - 2)]
    block, used = [], 0
    for i in (i for i in shown if error <= i < end):
        used += len(_cut(lines[i])) + 1
        if len(block) == BLOCK_LINES or used > BLOCK_CHARS:
            break
        block.append(i)
    return block


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
    lines = data.decode(errors="replace").split("\n")  # numbered as an editor or grep -n does
    if lines[-1] == "":
        lines.pop()
    first = data[:since].count(b"\n") if 0 < since <= len(data) else 0
    shown = [i for i, ln in enumerate(lines) if ln.strip()]
    tail = shown[-TAIL_LINES:]
    head = f"\nfull server log: {path}" if kept else ""
    block = _first_error(lines, shown, first, tail[0] if tail else 0)
    room = EXCERPT_CHARS
    if block:
        at = {i: n for n, i in enumerate(shown)}
        text = [_cut(lines[block[0]])]
        for a, b in zip(block, block[1:]):  # a gap (a traceback's outer frames) is marked
            text += ["…"] * (at[b] != at[a] + 1) + [_cut(lines[b])]
        where = f"(line {block[0] + 1} of {len(lines)})"
        head += f"\n{FIRST_ERROR_MARK} {where} ---\n" + "\n".join(text)
        room -= sum(len(x) + 1 for x in text)
    kept_tail: list[str] = []
    for i in reversed(tail):  # the newest lines first, as many as fit
        line = _cut(lines[i])
        if room - len(line) - 1 < 0:
            break
        kept_tail.insert(0, line)
        room -= len(line) + 1
    return f"{head}\n{TAIL_MARK}\n" + "\n".join(kept_tail)
