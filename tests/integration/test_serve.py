"""vLLM's HTTP server against HF on V1 and V2: concurrent requests, float and base64 answers,
token ids, a server that cannot start, and no process left behind."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def serve_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("serve")
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "-m", str(DATA / "serve-faults.yaml"),
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=1200)
    return proc, {(r["case_id"], r["runner"]): r for r in json.loads((out / "report.json").read_text())["results"]}


@pytest.mark.parametrize("case", ["srv-embed", "srv-embed-base64"])
@pytest.mark.parametrize("runner, actual", [("vllm-serve-v1", "v1"), ("vllm-serve-v2", "v2")])
def test_server_answers_match_hf_on_both_runners(serve_run, case, runner, actual):
    proc, results = serve_run
    r = results[(case, runner)]
    assert r["status"] == "pass", r["reason"] + proc.stderr[-2000:]
    assert r["actual_runner"] == actual and "server log" in r["info"]["runner_evidence"]
    assert r["checks"]["token_ids"] == "token ids equal for 24 of 24 items"  # from the server's /tokenize
    assert r["info"]["server"]["url"].startswith("http://127.0.0.1:")


def test_one_server_serves_every_case_of_its_model(serve_run):
    _, results = serve_run
    for runner in ("vllm-serve-v1", "vllm-serve-v2"):
        assert results[("srv-embed", runner)]["info"]["server"]["pid"] == results[("srv-embed-base64", runner)]["info"]["server"]["pid"]


def test_a_server_that_cannot_start_is_an_error_with_its_log(serve_run):
    proc, results = serve_run
    r = results[("srv-refuses-to-start", "vllm-serve-v1")]
    assert r["status"] == "error" and "vllm serve exited with code" in r["reason"], r["reason"]
    assert "--- server log tail ---" in r["reason"] and "max_model_len" in r["reason"].lower()
    assert proc.returncode == 1  # the error fails the gate; the other cases still ran (above)


def test_no_server_process_outlives_the_run(serve_run):
    _, results = serve_run
    pids = {r["info"]["server"]["pid"] for r in results.values() if r["info"].get("server")}
    assert pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    leftover = subprocess.run(["pgrep", "-f", "parity-serve-.*|vllm.entrypoints.openai.api_server --model .*bertmodel"],
                              capture_output=True, text=True).stdout.split()
    assert not [p for p in leftover if int(p) != os.getpid()], leftover


def test_a_request_that_times_out_and_an_http_error_each_get_their_verdict(serve_run):
    _, results = serve_run
    timeout = results[("srv-request-timeout", "vllm-serve-v1")]
    assert timeout["status"] == "error" and "timed out after 0.001 s" in timeout["reason"], timeout["reason"]
    refused = results[("srv-unsupported-task-4xx", "vllm-serve-v1")]
    assert refused["status"] == "error" and "HTTP 4" in refused["reason"] and "/classify" in refused["reason"], refused["reason"]
    # the server that answered them kept serving the other cases of its model
    assert results[("srv-embed", "vllm-serve-v1")]["status"] == "pass"
    assert timeout["info"]["server"]["pid"] == results[("srv-embed", "vllm-serve-v1")]["info"]["server"]["pid"]
