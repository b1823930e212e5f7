"""Where a `vllm serve` log is kept (the run's logs/, nothing left in /tmp) and what of it a
served failure's reason carries (the root cause far above the tail, the full log's path), from
stand-in server modules and a test double of the server: no vLLM needed."""

import json
import tempfile

import httpx
import psutil
import pytest

from harness.report.html import split_log_tail
from harness.runners import LoadRequest, serve_log, serve_process
from harness.runners.pool import Worker
from harness.runners.serve import ServeRunner
from harness.runners.serve_decode import ServerFailure
from tests.requests import req

# what vLLM 0.32 printed when a worker process died under the engine core (a real log's lines,
# paths shortened): the line that says what happened, then a traceback whose last lines say only
# "cancelled"
ROOT_CAUSE = (
    "(EngineCore pid=7) ERROR 12-04 21:22:09 [multiproc_executor.py:315] Worker proc "
    "VllmWorker-0 died unexpectedly (exit code: None), shutting down executor."
)
AT = "(EngineCore pid=7) ERROR 12-04 21:22:09 [core.py:1512]"
TRACEBACK = [
    f"{AT} EngineCore encountered a fatal error.",
    f"{AT} Traceback (most recent call last):",
    *(f'{AT}   File "vllm/v1/engine/core.py", line {n}, in step' for n in range(50)),
    f"{AT} RuntimeError: cancelled",
]
# a stand-in for vLLM's server module: logs, then dies at start or answers /health
SERVER = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

print("INFO starting", flush=True)
if {die}:
    print({root!r})
    print("\\n".join({traceback!r}), flush=True)
    sys.exit(1)

class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Health).serve_forever()
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """Starts a ServerProcess of a stand-in server: `start(die)`; temporary folders go to
    tmp_path/tmp, so a folder left behind is seen."""
    for name, die in (("dies_at_start", True), ("healthy", False)):
        text = SERVER.format(die=die, root=ROOT_CAUSE, traceback=TRACEBACK)
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.delenv("PARITY_WORKER_LOG", raising=False)
    server = serve_process.ServerProcess()

    def start(die: bool):
        monkeypatch.setattr(serve_process, "SERVER_MODULE", "dies_at_start" if die else "healthy")
        return server.start(LoadRequest(model_dir="m", dtype="float32", device="cpu"), {})

    yield server, start
    server.stop()


def test_a_server_logs_beside_its_worker_one_file_per_start(tmp_path, monkeypatch, stand_in):
    server, start = stand_in
    logs = tmp_path / "run" / "logs"
    monkeypatch.setenv("PARITY_WORKER_LOG", str(logs / "vllm-serve-v1.1.log"))
    with pytest.raises(ServerFailure) as first:
        start(die=True)
    start(die=False)  # a second start: its own file, the first one kept
    assert sorted(p.name for p in logs.iterdir()) == [
        "vllm-serve-v1.1.server-1.log",
        "vllm-serve-v1.1.server-2.log",
    ]
    assert ROOT_CAUSE in (logs / "vllm-serve-v1.1.server-1.log").read_text()
    assert server.log_path == logs / "vllm-serve-v1.1.server-2.log"
    assert f"full server log: {logs / 'vllm-serve-v1.1.server-1.log'}\n" in str(first.value)
    server.stop()
    assert (logs / "vllm-serve-v1.1.server-2.log").exists()
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing in the temporary folder


def test_a_log_no_run_keeps_is_removed_when_its_server_stops(tmp_path, stand_in):
    server, start = stand_in
    start(die=False)
    assert server.log_path.parent.parent == tmp_path / "tmp" and server.log_path.exists()
    server.stop()
    assert list((tmp_path / "tmp").iterdir()) == []
    with pytest.raises(ServerFailure) as e:  # a server that died at start leaves none either
        start(die=True)
    assert list((tmp_path / "tmp").iterdir()) == []
    assert ROOT_CAUSE in str(e.value) and "full server log" not in str(e.value)  # gone


def test_a_start_failure_keeps_the_root_cause_above_the_tail(stand_in):
    _, start = stand_in
    with pytest.raises(ServerFailure) as e:
        start(die=True)
    reason = str(e.value)
    assert reason.startswith("vllm serve exited with code 1 before it was healthy.")
    assert ROOT_CAUSE in reason and reason.endswith(TRACEBACK[-1])


class _Alive:
    pid = 0

    def poll(self):
        return None


def _failing_case(tmp_path, earlier: str) -> str:
    """The reason of a case whose requests got HTTP 500 while the server logged ROOT_CAUSE and
    its traceback; the log held `earlier` (an earlier case's lines) before the case."""
    log = tmp_path / "server.log"
    log.write_text(earlier)

    def handler(request):
        if request.url.path != "/v1/embeddings":  # /metrics, asked before and after a case
            return httpx.Response(404)
        with open(log, "a") as f:  # the server logs the crash while the case runs
            f.write("\n".join(["INFO request", ROOT_CAUSE, *TRACEBACK]) + "\n")
        msg = "EngineCore encountered an issue. See stack trace (above) for the root cause."
        return httpx.Response(500, text=json.dumps({"error": msg}))

    runner = ServeRunner("v1")
    runner.server.url, runner.model, runner.server.proc = "http://server.test", "m", _Alive()
    runner.server.log_path = log
    runner.transport = httpx.MockTransport(handler)
    with pytest.raises(ServerFailure) as e:
        runner.run("embed", ["a text"], req())
    return str(e.value)


def test_a_served_failure_keeps_this_cases_first_error_and_the_logs_path(tmp_path):
    earlier = "INFO started\nERROR 12-04 20:00:00 [serving.py:1] an earlier case's refusal\n"
    reason = _failing_case(tmp_path, earlier)
    assert reason.startswith("HTTP 500 from /v1/embeddings for item 0:")
    assert f"\nfull server log: {tmp_path / 'server.log'}\n" in reason
    first = reason.index("--- server log, first error (line 4 of 57) ---\n")
    assert reason.index(ROOT_CAUSE) > first  # this case's error, not the earlier one
    assert "an earlier case's refusal" not in reason
    # the tail: the log's last lines, as many of its last 30 as the bound leaves room for
    tail = reason.split("--- server log tail ---\n")[1].split("\n")
    assert 10 <= len(tail) <= 30 and tail == TRACEBACK[-len(tail) :]
    assert len(reason) < 4000  # the worker sends at most 4000 characters of an error
    # the HTML report shows the message and path as the reason, the log parts apart
    text, log = split_log_tail(reason)
    assert text.endswith(f"full server log: {tmp_path / 'server.log'}")
    assert log.startswith("--- server log, first error") and ROOT_CAUSE in log


def test_an_excerpt_is_bounded_however_long_the_logs_lines(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join(["ERROR " + "x" * 10_000, *(["y" * 10_000] * 100)]) + "\n")
    text = serve_log.excerpt(log)
    assert len(text) < serve_log.EXCERPT_CHARS + 200  # + the path and the headings
    assert "\nERROR xxx" in text and text.endswith("y…")


def test_a_traceback_shows_what_it_raised_once(tmp_path):
    frames = [f'  File "x.py", line {n}, in f\n    g()' for n in range(40)]
    log = tmp_path / "server.log"
    raised = ["Traceback (most recent call last):", *frames, "ValueError: the root cause"]
    # what it raised far above the tail: its header, a gap, its innermost frames, the exception
    log.write_text("\n".join(["INFO start", *raised, *(f"INFO {n}" for n in range(40))]) + "\n")
    block = serve_log.excerpt(log).split(serve_log.TAIL_MARK)[0]
    assert block.endswith("    g()\nValueError: the root cause\n")
    assert "first error (line 2 of 123) ---\nTraceback (most recent call last):\n…\n  File" in block
    # what it raised in the tail: the tail shows it; no block repeats the traceback's top
    log.write_text("\n".join(["INFO start", *raised]) + "\n")
    text = serve_log.excerpt(log)
    assert "first error" not in text and text.endswith("ValueError: the root cause")


def test_the_worker_tells_its_runner_where_its_log_is(tmp_path):
    w = Worker("fake", {}, tmp_path / "logs" / "fake.2.log")
    try:
        w.start()
        env = psutil.Process(w.proc.pid).environ()
    finally:
        w.kill()
    assert env["PARITY_WORKER_LOG"] == str(tmp_path / "logs" / "fake.2.log")


def test_the_worker_log_setting_is_a_path():
    from harness.settings import Settings

    assert Settings.from_env({"PARITY_WORKER_LOG": "/r/logs/x.log"}).worker_log.name == "x.log"
    assert Settings.from_env({}).worker_log is None


def test_an_error_line_opening_a_traceback_shows_what_that_traceback_raised(tmp_path):
    """vLLM 0.28's worker at start: "WorkerProc failed to start.", then a long traceback whose
    last line is the cause (vllm#43271's IndexError): the block keeps that line, not only the
    frames after the error line."""
    at = "(Worker pid=2185) ERROR 12-05 04:12:51 [multiproc_executor.py:941]"
    frames = [f'{at}   File "vllm/x.py", line {n}, in f\n{at}     g()' for n in range(40)]
    lines = [
        "INFO start",
        f"{at} WorkerProc failed to start.",
        f"{at} Traceback (most recent call last):",
        *frames,
        f"{at} IndexError: list index out of range",
        *(f"(APIServer pid=1950) INFO {n}" for n in range(40)),
    ]
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    block = serve_log.excerpt(log).split(serve_log.TAIL_MARK)[0]
    assert f"---\n{at} WorkerProc failed to start.\n{at} Traceback (most recent" in block
    assert block.endswith(f"{at}     g()\n{at} IndexError: list index out of range\n")
