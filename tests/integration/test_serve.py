"""vLLM's HTTP server against HF on V1 and V2: concurrent requests, float and base64 answers,
token ids, a server that cannot start, a port already taken, a server killed mid-case and
restarted, and no process left behind."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import psutil
import pytest

from tests.conftest import ROOT, SUBPROCESS_GUARD
from tests.requests import req

DATA = Path(__file__).parent / "data"
# this module's run and everything it starts carry it in their environment (workers and servers
# inherit it), so "nothing left" is asked of this run's processes only, not of another job's
# on the same host (a second test suite, a parity run beside it)
MARK = ("SERVE_TEST_RUN", f"{os.getpid()}-{time.time_ns()}")


def _marked() -> list[int]:
    """The live processes started by this module's run (its MARK in their environment)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get(MARK[0]) == MARK[1]:
                found.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.fixture(scope="module")
def serve_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("serve")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "-m",
            str(DATA / "serve-faults.yaml"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=SUBPROCESS_GUARD,
        env={**os.environ, MARK[0]: MARK[1]},
    )
    return proc, {
        (r["case_id"], r["runner"]): r
        for r in json.loads((out / "report.json").read_text())["results"]
    }


@pytest.mark.parametrize("case", ["srv-embed", "srv-embed-base64"])
@pytest.mark.parametrize("runner, actual", [("vllm-serve-v1", "v1"), ("vllm-serve-v2", "v2")])
def test_server_answers_match_hf_on_both_runners(serve_run, case, runner, actual):
    proc, results = serve_run
    r = results[(case, runner)]
    assert r["status"] == "pass", r["reason"] + proc.stderr[-2000:]
    assert r["actual_runner"] == actual and "server log" in r["info"]["runner_evidence"]
    assert (
        r["checks"]["token_ids"] == "token ids equal for 24 of 24 items"
    )  # from the server's /tokenize
    assert r["info"]["server"]["url"].startswith("http://127.0.0.1:")


def test_one_server_serves_every_case_of_its_model(serve_run):
    _, results = serve_run
    for runner in ("vllm-serve-v1", "vllm-serve-v2"):
        assert (
            results[("srv-embed", runner)]["info"]["server"]["pid"]
            == results[("srv-embed-base64", runner)]["info"]["server"]["pid"]
        )


def test_a_server_that_cannot_start_is_an_error_with_its_log(serve_run):
    proc, results = serve_run
    r = results[("srv-refuses-to-start", "vllm-serve-v1")]
    assert r["status"] == "error" and "vllm serve exited with code" in r["reason"], r["reason"]
    assert "--- server log tail ---" in r["reason"] and "max_model_len" in r["reason"].lower()
    assert proc.returncode == 1  # the error fails the gate; the other cases still ran (above)


def test_each_server_logs_into_the_runs_own_logs_folder(serve_run):
    """Beside its worker's log, one file per start (nothing in /tmp); a failure names it."""
    _, results = serve_run
    logs = {Path(r["info"]["server"]["log"]) for r in results.values() if r["info"].get("server")}
    assert logs and all(p.exists() for p in logs), logs
    for p in logs:
        assert p.parent.name == "logs" and (p.parent.parent / "report.json").exists(), p
        assert re.fullmatch(r"vllm-serve-v[12](\.\d+)?\.server-\d+\.log", p.name), p
    reason = results[("srv-refuses-to-start", "vllm-serve-v1")]["reason"]
    named = re.search(r"full server log: (\S+)", reason)
    assert named and Path(named[1]).parent == next(iter(logs)).parent, reason


def test_no_server_process_outlives_the_run(serve_run):
    _, results = serve_run
    pids = {r["info"]["server"]["pid"] for r in results.values() if r["info"].get("server")}
    assert pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    leftover = _marked()  # workers, servers, engine cores, their children: none may outlive it
    assert not leftover, [psutil.Process(p).cmdline() for p in leftover if psutil.pid_exists(p)]


def test_the_leftover_check_sees_a_process_of_this_run_and_not_another_jobs():
    mine = subprocess.Popen(["sleep", "60"], env={**os.environ, MARK[0]: MARK[1]})
    theirs = subprocess.Popen(["sleep", "60"], env={**os.environ, MARK[0]: "another-job"})
    try:
        found = _marked()
        assert mine.pid in found and theirs.pid not in found
    finally:
        for p in (mine, theirs):
            p.kill()
            p.wait()


def test_a_request_that_times_out_and_an_http_error_each_get_their_verdict(serve_run):
    _, results = serve_run
    timeout = results[("srv-request-timeout", "vllm-serve-v1")]
    assert timeout["status"] == "error" and "timed out after 0.001 s" in timeout["reason"], timeout[
        "reason"
    ]
    refused = results[("srv-unsupported-task-4xx", "vllm-serve-v1")]
    assert (
        refused["status"] == "error"
        and "HTTP 4" in refused["reason"]
        and "/classify" in refused["reason"]
    ), refused["reason"]
    # the server that answered them kept serving the other cases of its model
    assert results[("srv-embed", "vllm-serve-v1")]["status"] == "pass"
    assert (
        timeout["info"]["server"]["pid"]
        == results[("srv-embed", "vllm-serve-v1")]["info"]["server"]["pid"]
    )


# --- one real server driven directly (no worker): a taken port, a server killed mid-case, a restart ---


class _KillServerAfter(httpx.AsyncBaseTransport):
    """The real transport; on the n-th request it SIGKILLs the server first (a crash mid-case)."""

    def __init__(self, n: int, pid: int):
        self.inner, self.n, self.pid, self.count = httpx.AsyncHTTPTransport(), n, pid, 0

    async def handle_async_request(self, request):
        self.count += 1
        if self.count == self.n:
            os.kill(self.pid, signal.SIGKILL)
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


@pytest.fixture(scope="module")
def live_server():
    from harness.matrix.schema import SyntheticModel
    from harness.models.resolve import resolve
    from harness.runners import LoadRequest, serve, serve_process
    from harness.runners.platform import Platform

    model = resolve(
        SyntheticModel(
            source="synthetic", arch="BertModel", seed=0, pooling="mean", normalize=True
        ),
        ROOT,
    )
    env = Platform("cpu").worker_env("vllm-serve-v1")
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()  # bound and listening: the server's bind of this port fails
    first = iter([taken.getsockname()[1]])
    real_free_port = serve_process.free_port
    serve_process.free_port = lambda: next(first, None) or real_free_port()
    runner = serve.ServeRunner("v1")
    pids: list[int] = []
    try:
        t0 = time.perf_counter()
        info = runner.load(LoadRequest(model_dir=str(model.path), dtype="float32", device="cpu"))
        info["test_load_seconds"] = time.perf_counter() - t0
        yield runner, info, taken.getsockname()[1], pids
    finally:
        runner.unload()
        serve_process.free_port = real_free_port
        taken.close()
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


TEXTS = [
    "a cat sat on the mat",
    "the river runs past the old mill",
    "tiny models answer in milliseconds",
] * 8


def _server_pids(runner) -> list[int]:
    return [runner.server.proc.pid, *(p.pid for p in runner.server.tree)]


def test_a_port_already_taken_is_retried_on_another(live_server):
    runner, info, taken, pids = live_server
    assert info["server"]["ports_in_use"] == [taken], info["server"]
    assert not runner.server.url.endswith(f":{taken}") and runner.run(
        "embed", TEXTS, req()
    ).outputs[0].shape == (64,)


def test_a_server_killed_mid_case_errors_that_case_and_the_next_case_restarts_it(live_server):
    from harness.runners.serve_decode import ServerFailure

    runner, _, _, pids = live_server
    before = runner.run("embed", TEXTS, req(max_in_flight=1)).outputs
    killed = _server_pids(runner)
    pids += killed
    runner.transport = _KillServerAfter(5, runner.server.proc.pid)
    with pytest.raises(ServerFailure) as e:
        runner.run("embed", TEXTS, req(max_in_flight=1))
    assert str(e.value).startswith("server exited (killed by SIGKILL"), str(e.value)
    assert "--- server log tail ---" in str(e.value)
    runner.transport = None
    t0 = time.perf_counter()
    after = runner.run(
        "embed", TEXTS, req()
    ).outputs  # the next case: a fresh server, the same answers
    print(f"restart and case: {time.perf_counter() - t0:.1f} s")
    pids += _server_pids(runner)
    assert runner.server.restarts == 1 and runner.server.proc.pid not in killed
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    for pid in killed:  # the killed server's engine core went with the restart
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, (
            pid
        )


def test_no_process_of_the_live_server_outlives_unload(live_server):
    runner, _, _, pids = live_server
    pids += _server_pids(runner)
    runner.unload()
    alive = [
        p
        for p in pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert pids and not alive, alive
