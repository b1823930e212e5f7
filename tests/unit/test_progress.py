"""Progress where output is a log, not a terminal: a line per outcome, loads as they start, and a
heartbeat naming what each lane is doing."""

import io
import threading
import time

from rich.console import Console

from harness.run.execute import RunOutcome
from harness.run.progress import PlainProgress, progress_reporter


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=False, width=200), buf


def _until(text: str, buf: io.StringIO, guard: float = 60.0) -> None:
    """Until the heartbeat has written `text` (an event, not a pause: on a loaded host a thread
    may wake late); `guard` only stops a heartbeat that never comes."""
    deadline = time.monotonic() + guard
    while text not in buf.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_plain_lines_for_loads_outcomes_and_a_heartbeat():
    console, buf = _console()
    with PlainProgress(console, "parity", total=2, heartbeat=0.05) as progress:
        progress("loading tiny-bert in vllm-v2", None)
        _until("in progress: loading", buf)  # a slow load: the heartbeat must name it
        progress(
            "case-a [vllm-v2] ok",
            RunOutcome("case-a", "vllm-v2", "ok", load_seconds=1.5, run_seconds=0.25),
        )
        progress(
            "case-b [vllm-v2] error",
            RunOutcome("case-b", "vllm-v2", "error", "engine refused\nlong tail"),
        )
    text = buf.getvalue()
    assert "started: 2 (case, runner) outcomes" in text
    assert "loading tiny-bert in vllm-v2" in text
    assert "0/2 done; in progress: loading tiny-bert in vllm-v2" in text
    assert "[1/2] case-a [vllm-v2] ok (1.8s)" in text
    assert "[2/2] case-b [vllm-v2] error (0.0s): engine refused" in text and "long tail" not in text
    assert "\x1b[" not in text  # no terminal control codes in a log


def test_lanes_report_concurrently_and_each_is_counted_once():
    console, buf = _console()
    with PlainProgress(console, "parity", total=40, heartbeat=10) as progress:

        def lane(n):
            for i in range(20):
                progress(f"c{n}-{i} [hf] ok", RunOutcome(f"c{n}-{i}", "hf", "ok"))

        threads = [threading.Thread(target=lane, args=(n,), name=f"slot_{n}") for n in range(2)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    assert progress.done == 40 and "[40/40]" in buf.getvalue()


def test_reporter_picks_plain_lines_when_not_a_terminal():
    console, _ = _console()
    with progress_reporter(console, "parity", 1) as progress:
        assert isinstance(progress, PlainProgress)


def test_a_note_is_a_line_of_its_own_and_no_lanes_state():
    console, buf = _console()
    with PlainProgress(console, "parity", total=1, heartbeat=0.05) as progress:
        progress.note("vLLM inspected 3 model classes in one process (9.1 s)")
        _until("in progress:", buf)
    text = buf.getvalue()
    assert "vLLM inspected 3 model classes in one process (9.1 s)" in text
    assert "in progress: preparing models" in text and "in progress: vLLM" not in text
