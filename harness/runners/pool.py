"""The parent side of a worker process: start it, send requests, wait with timeouts, and turn a
crash or hang into an exception that carries the worker's log tail."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.runners.reap import stop_tree

LOG_TAIL_MARK = "\n--- worker log tail ---\n"
WORKER_LOG_ENV = "PARITY_WORKER_LOG"  # harness.settings: Settings.worker_log

# every worker process group alive in this process, for stop_all; once stopping, none starts
_LIVE: set[int] = set()
_LIVE_LOCK = threading.RLock()  # re-entrant: a signal handler may run while its thread holds it
_STOPPING = threading.Event()


def stopping() -> bool:
    """The run is being stopped (a signal): a worker that dies now was stopped, not failing."""
    return _STOPPING.is_set()


def stop_all(grace: float | None = None) -> None:
    """Stop every worker (its whole process group: servers, engine cores) and every other
    process this one started; from now on no worker starts. Idempotent."""
    with _LIVE_LOCK:
        _STOPPING.set()
        groups = list(_LIVE)
    stop_tree(groups, grace)


def resume() -> None:
    """After a stopped run (stop_all), in a process that goes on: workers may start again."""
    _STOPPING.clear()


class WorkerFailure(Exception):
    """The worker died or hung; the message ends with the tail of its log."""

    @property
    def summary(self) -> str:
        """The failure itself, without the log tail (a log may mention anything)."""
        return str(self).split(LOG_TAIL_MARK, 1)[0]


class WorkerStopped(WorkerFailure):
    """The run is being stopped (stop_all): this worker was stopped or not started."""


class WorkerTimeout(WorkerFailure):
    """The worker did not answer in time and was killed: on a slow or loaded machine this looks
    the same as a hang, so it is told apart (`timed_out`) from a crash."""

    timed_out = True


def log_tail(path: Path, lines: int = 25, what: str = "worker") -> str:
    """The last `lines` non-blank lines of a log, for a verdict's reason."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return f"(no {what} log)"
    tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(tail)


class Worker:
    def __init__(
        self, runner: str, env: dict[str, str | None], log_path: Path, threads: int | None = None
    ):
        self.runner = runner
        self.env = env
        self.log_path = Path(log_path)
        self.threads = threads
        self.proc: subprocess.Popen | None = None
        self._reply = None
        self._buf = b""
        self.starts = 0
        self.lane: int | None = None
        self.loads = 0
        self.recycles = 0
        self.rss_mb: float | None = None  # resident memory after its last load or unload
        self.peak_rss_mb: float | None = None  # over every process this worker has been

    def note_memory(self, ans: dict) -> None:
        """Take the memory figures a worker reports with its answers."""
        if ans.get("rss_mb") is not None:
            self.rss_mb = float(ans["rss_mb"])
        peak = ans.get("peak_rss_mb")
        if peak is not None:
            self.peak_rss_mb = max(float(peak), self.peak_rss_mb or 0.0)

    def stats(self) -> dict:
        return {
            "runner": self.runner,
            "lane": self.lane,
            "log": str(self.log_path),
            "starts": self.starts,
            "loads": self.loads,
            "recycles": self.recycles,
            "last_rss_mb": self.rss_mb,
            "peak_rss_mb": self.peak_rss_mb,
        }

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 300) -> None:
        env = dict(os.environ)
        for k, v in self.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        if self.threads:
            env.setdefault("OMP_NUM_THREADS", str(self.threads))
        # where the worker's own output goes; what it starts (a `vllm serve`) logs beside it
        env[WORKER_LOG_ENV] = str(self.log_path.resolve())
        r, w = os.pipe()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        log.write(f"\n===== start {self.runner} at {time.strftime('%H:%M:%S')} =====\n".encode())
        log.flush()
        try:
            with _LIVE_LOCK:  # stop_all either sees this group or this start sees it stopping
                if _STOPPING.is_set():
                    os.close(r)
                    raise WorkerStopped(f"{self.runner} worker not started: the run is stopping")
                self.proc = subprocess.Popen(
                    [
                        *(sys.executable, "-m", "harness.runners.worker", self.runner),
                        *("--reply-fd", str(w)),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    pass_fds=(w,),
                    start_new_session=True,  # its own group: stop_all and kill reach its children
                )
                _LIVE.add(self.proc.pid)
        finally:
            os.close(w)
            log.close()
        self._reply = os.fdopen(r, "rb", buffering=0)
        self._buf = b""
        self.starts += 1
        hello = self._read(timeout, "start")
        if not hello.get("ready"):
            raise WorkerFailure(f"{self.runner} worker sent {hello!r} instead of ready")

    def _read(self, timeout: float, what: str) -> dict:
        assert self._reply is not None and self.proc is not None
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self._reply, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise WorkerTimeout(
                        f"{self.runner} worker timed out after {timeout:.0f} s during {what}; "
                        "killed."
                        f"{LOG_TAIL_MARK}{log_tail(self.log_path)}"
                    )
                if not sel.select(timeout=min(left, 1.0)):
                    continue
                chunk = os.read(self._reply.fileno(), 65536)
                if not chunk:
                    code = self.proc.wait(timeout=30)
                    if _STOPPING.is_set():
                        raise WorkerStopped(f"{self.runner} worker stopped during {what}")
                    raise WorkerFailure(
                        f"{self.runner} worker died during {what} ({describe_exit(code)})."
                        f"{LOG_TAIL_MARK}{log_tail(self.log_path)}"
                    )
                self._buf += chunk
        finally:
            sel.close()
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, msg: dict, timeout: float, what: str) -> dict:
        if not self.alive:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the read below reports the death with the log
        return self._read(timeout, what)

    def kill(self) -> None:
        """Kill the worker's whole process group, even when the worker itself is already dead: a
        server it started may still be running in it."""
        if self.proc is not None:
            with _LIVE_LOCK:
                mine = self.proc.pid in _LIVE
                _LIVE.discard(self.proc.pid)
            if mine:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        self._close()

    def stop(self, timeout: float = 30) -> None:
        if self.alive:
            try:
                self.request({"op": "shutdown"}, timeout, "shutdown")
                assert self.proc is not None
                self.proc.wait(timeout=timeout)
            except (WorkerFailure, subprocess.TimeoutExpired, OSError):
                pass
        self.kill()

    def _close(self) -> None:
        if self._reply is not None:
            self._reply.close()
            self._reply = None
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (killed: out of memory?)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"
