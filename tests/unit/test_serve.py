"""The server runner's pieces that need no server: flags, names, the runner read from the log, and
its handling of answers, from a test double of the server."""

import asyncio
import base64
import hashlib
import json
import re
import signal

import httpx
import numpy as np
import pytest

from harness.judge.compare import measure
from harness.judge.side import Side
from harness.judge.verdict import check_not_in_effect, judge
from harness.matrix.checks import expand_checks
from harness.matrix.inputs import input_set
from harness.matrix.runner_names import model_runner_variant, runner_kind
from harness.matrix.schema import Case, MatrixError, Tolerance
from harness.run.matrices import load_matrix
from harness.runners import serve_decode
from harness.runners.platform import Platform
from harness.runners.serve import ServeRunner
from harness.runners.serve_decode import ServerFailure, ServerTimeout
from harness.runners.serve_process import cli_args, free_port, runner_from_log
from tests.fake_server import AliveProcess, served
from tests.requests import req


def test_engine_kwargs_become_server_flags():
    flags = cli_args(
        {
            "enforce_eager": True,
            "enable_prefix_caching": False,
            "kv_cache_memory_bytes": 64,
            "pooler_config": {"step_tag_id": 4711},
            "model_impl": "transformers",
            "skip": None,
        }
    )
    assert flags == [
        "--enforce-eager",
        "--no-enable-prefix-caching",
        "--kv-cache-memory-bytes",
        "64",
        "--pooler-config",
        '{"step_tag_id": 4711}',
        "--model-impl",
        "transformers",
    ]


def test_runner_names_and_environment():
    assert runner_kind("vllm-serve-v2") == ("vllm-serve", "v2") and runner_kind("vllm-v2") == (
        "vllm",
        "v2",
    )
    assert model_runner_variant("vllm-serve-auto") == "auto" and model_runner_variant("hf") is None
    env = Platform("cpu").worker_env("vllm-serve-v2")
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "1" and env["TRITON_INTERPRET"] == "1"
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] is None  # a server keeps vLLM's own process layout
    assert Platform("cpu").worker_env("vllm-serve-v1")["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert (
        Platform("cpu").runner_label("vllm-serve-v2", "v2")
        == "vLLM serve V2 on CPU, interpreted Triton kernels"
    )


def test_the_model_runner_is_read_from_the_server_log():
    assert runner_from_log("INFO [cpu_worker.py:162] Using V2 Model Runner")[0] == "v2"
    assert runner_from_log("INFO [cpu_model_runner.py:68] Starting to load model")[0] == "v1"
    assert runner_from_log("nothing useful")[0] == "unknown"


def test_free_port_is_on_loopback_and_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


# --- answers from a test double of the server (httpx.MockTransport), checked as a run checks them ---

PAIRS = input_set("query-document-pairs").items
SCORE_TOL = Tolerance(max_abs=1e-5, max_rel=1e-4, rank_disagreement=0.0)


def _score(query: str, doc: str) -> float:
    return float(
        np.random.default_rng(
            int.from_bytes(hashlib.sha256(f"{query}|{doc}".encode()).digest()[:4], "little")
        ).random()
    )


def _rerank_server(fault: str = ""):
    async def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/rerank"
        await asyncio.sleep(
            0.001
        )  # a server takes time: the other groups' requests go out meanwhile
        body = json.loads(request.content)
        results = sorted(
            (
                {"index": k, "document": {"text": d}, "relevance_score": _score(body["query"], d)}
                for k, d in enumerate(body["documents"])
            ),
            key=lambda r: -r["relevance_score"],
        )
        if fault in ("swap-index", "swap-result"):  # two results claim each other's document
            a, b = results[0], results[1]
            a["index"], b["index"] = b["index"], a["index"]
            if fault == "swap-result":  # ... and carry its text too: only the scores can tell
                a["document"], b["document"] = b["document"], a["document"]
        if fault == "top-n-ignored":
            body["top_n"] = 0
        tokens = sum(len(_ids(f"{body['query']} {d}")) for d in body["documents"]) + (
            fault == "usage-off"
        )
        return httpx.Response(
            200,
            json={
                "results": results[: body.get("top_n") or None],
                "usage": {"prompt_tokens": tokens},
            },
        )

    return handler


def _rerank_measure(fault: str = "", top_n: int | None = 2):
    runner = served(_rerank_server(fault))
    result = runner.run(
        "score", [list(p) for p in PAIRS], req(api="rerank", top_n=top_n, max_in_flight=4)
    )
    got = result.outputs
    ref = [np.asarray([_score(q, d)], dtype=np.float32) for q, d in PAIRS]
    ref_ids = [_ids(f"{q} {d}") for q, d in PAIRS]
    return measure(
        SCORE_TOL,
        ("max_abs", "max_rel", "rank_disagreement"),
        Side(ref, token_ids=ref_ids),
        Side.of(got, result.evidence.records),
        PAIRS,
    )


def test_a_rerank_answer_matching_the_reference_passes_with_its_checks_named():
    m = _rerank_measure()
    assert m.problem is None and all(x.ok for x in m.metrics), m
    assert m.notes["rerank"] == (
        "rerank: 6 query groups ranked as the reference, results matched by index; "
        "top_n=2 returned each group's top 2"
    )
    assert (
        m.notes["usage"]
        == "usage.prompt_tokens equal to the reference's token count for 24 of 24 items"
    )


@pytest.mark.parametrize(
    "fault, expected",
    [
        ("swap-index", "carries another document's text (index mapped wrongly)"),
        ("swap-result", "the server ranks items"),
        ("top-n-ignored", "top_n=2 returned 4 documents for 4, expected 2"),
        ("usage-off", "usage.prompt_tokens of /rerank query group 0 (items [0, 1, 2, 3]) is "),
    ],
)
def test_a_reordered_or_untruncated_rerank_answer_fails(fault, expected):
    m = _rerank_measure(fault)
    assert m.problem is not None and expected in m.problem, m.problem
    assert judge(_case("score"), "vllm-serve-v1", m).status == "fail"


def test_rerank_results_are_matched_by_index_not_position():
    # the server lists results best first: positions differ from the order sent for most groups
    runner = served(_rerank_server())
    result = runner.run("score", [list(p) for p in PAIRS], req(api="rerank", max_in_flight=4))
    got, records = result.outputs, result.evidence.records
    assert max(meta["in_flight"] for meta in records) == 4  # 6 query groups, 4 at once
    assert [float(g[0]) for g in got] == pytest.approx([_score(q, d) for q, d in PAIRS], abs=1e-7)
    assert any(meta["rerank"]["rank"] != k % 4 for k, meta in enumerate(records))


def test_a_rerank_index_out_of_range_is_the_servers_error():
    def handler(request):
        return httpx.Response(200, json={"results": [{"index": 9, "relevance_score": 0.5}]})

    with pytest.raises(
        ServerFailure, match=r"result 0 has index 9; expected each of 0..3 at most once"
    ):
        served(handler).run("score", [list(p) for p in PAIRS], req(api="rerank"))


def test_rerank_needs_a_score_case_and_top_n_needs_rerank(write_matrix):
    head = "families: {f: {}}\ncases:\n  - {id: c, family: f, task: %s, model: {source: synthetic, arch: BertModel}, inputs: short-texts, runners: [hf],\n"
    tol = "     tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}}, request: {serve: %s}}\n"
    with pytest.raises(MatrixError, match="serve.api 'rerank' needs task 'score', not 'embed'"):
        load_matrix(write_matrix(head % "embed" + tol % "{api: rerank}"))
    with pytest.raises(MatrixError, match="serve.top_n applies to serve.api 'rerank' only"):
        load_matrix(write_matrix(head % "embed" + tol % "{top_n: 2}"))


def _case(task: str, tolerance: Tolerance = SCORE_TOL):
    return Case(
        id="c",
        family="f",
        task=task,
        model={"source": "synthetic", "arch": "BertModel"},
        inputs="short-texts",
        runners=["hf", "vllm-serve-v1"],
        tolerances={"float32": tolerance},
    )


TEXTS = input_set("short-texts").items
EMBED_TOL = Tolerance(cosine_distance=1e-6, max_abs=1e-5)


def _ids(text: str) -> list[int]:
    return [101, *(len(w) for w in text.split()), 102]


def _vector(text: str) -> list[float]:
    return [
        float(x) for x in np.random.default_rng(len(text) * 7919 + len(text.split())).normal(size=8)
    ]


def _embed_server(usage_offset: int = 0):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": _ids(body["prompt"])})
        n = len(_ids(body["input"])) + usage_offset * (body["input"] == TEXTS[3])
        return httpx.Response(
            200,
            json={
                "data": [{"embedding": _vector(body["input"])}],
                "usage": {"prompt_tokens": n, "total_tokens": n},
            },
        )

    return handler


def _embed_measure(handler, options: dict | None = None):
    runner = served(handler)
    result = runner.run("embed", list(TEXTS), req(**(options or {})))
    ref = [np.asarray(_vector(t), dtype=np.float32) for t in TEXTS]
    return measure(
        EMBED_TOL,
        ("cosine_distance", "max_abs"),
        Side(ref, token_ids=[_ids(t) for t in TEXTS]),
        Side.of(result.outputs, result.evidence.records),
        TEXTS,
    )


def test_usage_prompt_tokens_equal_to_the_reference_token_count_is_noted():
    m = _embed_measure(_embed_server())
    assert m.problem is None and all(x.ok for x in m.metrics)
    assert (
        m.notes["usage"]
        == f"usage.prompt_tokens equal to the reference's token count for {len(TEXTS)} of {len(TEXTS)} items"
    )


def test_usage_prompt_tokens_off_by_one_fails_naming_the_item():
    m = _embed_measure(_embed_server(usage_offset=1))
    n = len(_ids(TEXTS[3]))
    assert (
        m.problem
        == f"usage.prompt_tokens of item 3 is {n + 1}, but the reference ran {n} tokens (input {TEXTS[3]!r})"
    )
    assert judge(_case("embed", EMBED_TOL), "vllm-serve-v1", m).status == "fail"


def _delayed_embed_server(swap_pairs: bool = False):
    """Answers arrive in reverse order of sending (later texts are answered sooner). With
    swap_pairs, two requests in flight together get each other's answer: a server that mixes up
    concurrent requests; a request alone gets its own."""
    waiting: list = []

    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": _ids(body["prompt"])})
        text = body["input"]
        await asyncio.sleep(0.002 * (len(TEXTS) - TEXTS.index(text)))
        if swap_pairs:
            if waiting:
                partner, box = waiting.pop()
                box.set_result(text)
                text = partner
            else:
                box = asyncio.get_running_loop().create_future()
                waiting.append((text, box))
                try:
                    text = await asyncio.wait_for(asyncio.shield(box), 0.05)
                except asyncio.TimeoutError:
                    waiting.remove((text, box))
        n = len(_ids(body["input"]))
        return httpx.Response(
            200, json={"data": [{"embedding": _vector(text)}], "usage": {"prompt_tokens": n}}
        )

    return handler


def test_concurrent_answers_are_matched_by_request_and_the_peak_in_flight_is_recorded():
    m = _embed_measure(_delayed_embed_server(), {"max_in_flight": 16})
    assert m.problem is None and all(x.ok for x in m.metrics), m
    runner = served(_delayed_embed_server())
    many = runner.run("embed", list(TEXTS), req(max_in_flight=16)).evidence.records
    assert max(meta["in_flight"] for meta in many) == 16
    one = runner.run("embed", list(TEXTS), req(max_in_flight=1)).evidence.records
    assert {meta["in_flight"] for meta in one} == {1}


def test_a_server_that_swaps_concurrent_answers_fails_concurrent_and_passes_sequential():
    swapped = _embed_measure(_delayed_embed_server(swap_pairs=True), {"max_in_flight": 16})
    verdict = judge(_case("embed", EMBED_TOL), "vllm-serve-v1", swapped)
    assert verdict.status == "fail" and "cosine_distance" in verdict.reason, verdict.reason
    alone = _embed_measure(_delayed_embed_server(swap_pairs=True), {"max_in_flight": 1})
    assert judge(_case("embed", EMBED_TOL), "vllm-serve-v1", alone).status == "pass"


@pytest.mark.parametrize(
    "check, peak, error",
    [
        ("concurrent", 16, None),
        (
            "concurrent",
            1,
            "did not take effect: at most 1 requests were in flight at once (more than one needed)",
        ),
        ("sequential", 1, None),
        (
            "sequential",
            3,
            "did not take effect: at most 3 requests were in flight at once (exactly one needed)",
        ),
        (
            "sequential",
            None,
            "did not take effect: at most None requests were in flight at once "
            "(exactly one needed)",
        ),
    ],
)
def test_a_concurrency_check_must_prove_it_took_effect(check, peak, error):
    base = _case("embed", EMBED_TOL).model_copy(update={"checks": [check]})
    (derived,) = [c for c in expand_checks([base]) if c.variant_of]
    assert (
        derived.runners == ["vllm-serve-v1"]
        and derived.request.serve.max_in_flight == {"concurrent": 16, "sequential": 1}[check]
    )
    # the server's own counts: some step held 2+ (concurrent), every step held one (sequential)
    batched = {"engine_steps": 3 if check == "concurrent" else 24, "requests_finished": 24}
    requests = {"peak_in_flight": peak, "server_metrics": batched}
    reason = check_not_in_effect(derived, {"requests": requests})
    assert reason == (None if error is None else f"invariance check {check} " + error)


def _metered_embed_server(per_step: int, metrics: bool = True):
    """An embedding server that counts like vLLM's /metrics: requests finished, and engine steps
    (one per `per_step` requests: 1 = a server that runs every request alone, however many are
    in flight). Counters start from an earlier case's values."""
    count = {"steps": 7, "done": 30}

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            if not metrics:
                return httpx.Response(404, text="Not Found")
            return httpx.Response(
                200,
                text=(
                    "# TYPE vllm:iteration_tokens_total histogram\n"
                    'vllm:iteration_tokens_total_count{engine="0",model_name="m"} '
                    f"{count['steps']}.0\n"
                    'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} '
                    f"{count['done']}.0\n"
                    'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} '
                    "0.0\n"
                ),
            )
        body = json.loads(request.content)
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": _ids(body["prompt"])})
        await asyncio.sleep(0.001)
        if count["done"] % per_step == 0:
            count["steps"] += 1
        count["done"] += 1
        return httpx.Response(
            200,
            json={
                "data": [{"embedding": _vector(body["input"])}],
                "usage": {"prompt_tokens": len(_ids(body["input"]))},
            },
        )

    return handler


@pytest.mark.parametrize(
    "per_step, metrics, error",
    [
        (4, True, None),
        (
            1,
            True,
            "the server finished 24 requests in 24 engine steps, so no step is known to have "
            "held more than one",
        ),
        (
            4,
            False,
            "the server's /metrics could not be read (HTTPStatusError: Client error "
            "'404 Not Found'",
        ),
    ],
)
def test_concurrent_is_proven_by_the_servers_own_step_counts_not_the_clients(
    tmp_path, per_step, metrics, error
):
    from harness.runners.worker import _requests

    runner = served(_metered_embed_server(per_step, metrics))
    result = runner.run("embed", list(TEXTS), req(max_in_flight=16))
    requests = _requests(result.evidence, str(tmp_path / "out"))
    assert requests["peak_in_flight"] == 16  # the client had 16 in flight every time
    if metrics:
        assert requests["server_metrics"] == {
            "engine_steps": 24 // per_step,
            "requests_finished": 24,
            "peak_batch_at_least": per_step,
        }
    base = _case("embed", EMBED_TOL).model_copy(update={"checks": ["concurrent"]})
    (derived,) = [c for c in expand_checks([base]) if c.variant_of]
    reason = check_not_in_effect(derived, {"requests": requests})
    if error is None:
        assert reason is None
    else:
        assert reason.startswith("invariance check concurrent is not proven: " + error), reason


def test_sequential_is_an_error_when_the_server_counts_more_requests_than_steps(tmp_path):
    from harness.runners.worker import _requests

    base = _case("embed", EMBED_TOL).model_copy(update={"checks": ["sequential"]})
    (derived,) = [c for c in expand_checks([base]) if c.variant_of]
    alone = served(_metered_embed_server(1))
    evidence = alone.run("embed", list(TEXTS), req(max_in_flight=1)).evidence
    assert (
        check_not_in_effect(derived, {"requests": _requests(evidence, str(tmp_path / "a"))}) is None
    )
    # seeded: a server whose counts say it ran requests together though one was sent at a time
    odd = served(_metered_embed_server(4))
    evidence = odd.run("embed", list(TEXTS), req(max_in_flight=1)).evidence
    reason = check_not_in_effect(derived, {"requests": _requests(evidence, str(tmp_path / "b"))})
    assert reason == (
        "invariance check sequential did not take effect: one request was in flight "
        "at a time, yet the server finished 24 requests in 6 engine steps"
    )


# --- faults: each its own error, with the server's log tail ---


def _b64(vector, dtype: str = "<f4") -> str:
    return base64.b64encode(np.asarray(vector, dtype=dtype).tobytes()).decode()


def _base64_server(cut_item: int | None = None, cut=lambda vector: _b64(vector)):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": _ids(body["prompt"])})
        assert (body["encoding_format"], body["embed_dtype"], body["endianness"]) == (
            "base64",
            "float32",
            "little",
        )
        vector = _vector(body["input"])
        payload = (
            cut(vector)
            if cut_item is not None and body["input"] == TEXTS[cut_item]
            else _b64(vector)
        )
        return httpx.Response(200, json={"data": [{"embedding": payload}]})

    return handler


def _with_log(runner: ServeRunner, tmp_path) -> ServeRunner:
    runner.server.log_path = tmp_path / "server.log"
    runner.server.log_path.write_text(
        "INFO the server's own words\nERROR EngineCore failed: boom\n"
    )
    return runner


def test_http_500_is_an_error_naming_the_item_with_the_server_log_tail(tmp_path):
    def handler(request):
        return httpx.Response(500, text='{"error": "Internal Server Error"}')

    runner = _with_log(served(handler), tmp_path)
    with pytest.raises(ServerFailure) as e:
        runner.run("embed", list(TEXTS), req(shuffle_seed=3))
    assert re.match(
        r"HTTP 500 from /v1/embeddings for item \d+: \{\"error\": \"Internal Server Error\"\}",
        str(e.value),
    )
    assert str(e.value).endswith(
        "--- server log tail ---\nINFO the server's own words\nERROR EngineCore failed: boom"
    )


@pytest.mark.parametrize(
    "cut, message",
    [
        (
            lambda v: _b64(v)[:-4],
            "item 5: the base64 embedding decodes to 30 bytes, not a whole number of 4-byte float32 "
            "values (truncated?)",
        ),
        (lambda v: _b64(v)[:-3], "item 5: the base64 embedding (41 characters) does not decode"),
        (
            lambda v: _b64(v[:-1]),
            "item 5: the base64 embedding decodes to 28 bytes, expected 32 (8 float32 values, "
            "as 23 of the 24 items have)",
        ),
    ],
    ids=["cut-mid-value", "cut-mid-group", "one-value-short"],
)
def test_a_truncated_base64_payload_names_the_item_and_the_bytes_expected(tmp_path, cut, message):
    runner = _with_log(served(_base64_server(cut_item=5, cut=cut)), tmp_path)
    with pytest.raises(ServerFailure, match=re.escape(message)) as e:
        runner.run("embed", list(TEXTS), req(encoding_format="base64", shuffle_seed=1))
    assert "--- server log tail ---" in str(e.value)


def test_base64_decoded_as_float32_matches_and_decoded_with_a_wrong_dtype_fails(monkeypatch):
    assert len(TEXTS) == 24
    m = _embed_measure(_base64_server(), {"encoding_format": "base64"})
    assert m.problem is None and all(x.ok for x in m.metrics), m
    monkeypatch.setitem(
        serve_decode.NUMPY_DTYPE, "float32", "f2"
    )  # seeded mutation: the bytes read as float16
    m = _embed_measure(_base64_server(), {"encoding_format": "base64"})
    assert m.problem == "shape mismatch at item 0: reference [8], runner [16]"
    assert judge(_case("embed", EMBED_TOL), "vllm-serve-v1", m).status == "fail"


class _Exited:
    pid = 0
    returncode = -signal.SIGKILL

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        return self.returncode


def test_a_connection_lost_to_a_server_that_exited_says_how_it_exited(tmp_path):
    runner = _with_log(
        served(lambda request: (_ for _ in ()).throw(httpx.RemoteProtocolError("peer closed"))),
        tmp_path,
    )
    runner.server.proc.poll = lambda: (setattr(runner.server, "proc", _Exited()), None)[
        1
    ]  # alive at the start, dead after
    with pytest.raises(
        ServerFailure,
        match=r"^server exited \(killed by SIGKILL.*\) during the case: request for "
        r"item \d+ to /v1/embeddings failed with RemoteProtocolError: peer closed",
    ):
        runner.run("embed", list(TEXTS), req())


def test_the_next_case_restarts_a_server_that_died(monkeypatch):
    runner = served(_embed_server())
    runner.server.proc, runner.server.started_with = _Exited(), ("request", {})
    monkeypatch.setattr(
        runner.server, "_launch", lambda: setattr(runner.server, "proc", AliveProcess()) or []
    )
    records = runner.run("embed", list(TEXTS), req()).evidence.records
    assert runner.server.restarts == 1 and isinstance(runner.server.proc, AliveProcess)
    # the result says it ran on a restart
    assert {meta["server_restarts"] for meta in records} == {1}


# --- dimensions (Matryoshka) ---


def test_dimensions_are_sent_to_the_server_and_apply_to_embed_cases_only():
    sent = []

    def handler(request):
        body = json.loads(request.content)
        sent.append(body.get("dimensions"))
        return httpx.Response(
            200,
            json={"tokens": [1]}
            if request.url.path == "/tokenize"
            else {"data": [{"embedding": [1.0, 0.0]}], "usage": {"prompt_tokens": 1}},
        )

    served(handler).run("embed", ["a text"], req(dimensions=2))
    assert sent == [2, None]  # the embeddings request, then /tokenize
    with pytest.raises(ValueError, match="dimensions applies to task 'embed' only, not 'score'"):
        Case.model_validate({**_case("score").model_dump(), "request": {"dimensions": 2}})


def test_a_server_never_healthy_is_stopped_after_the_start_timeout_the_env_sets(
    tmp_path, monkeypatch
):
    """PARITY_SERVE_START_TIMEOUT bounds a start (a loaded machine may need more than 420 s): the
    server is stopped when it runs out and the error names the limit and how to raise it."""
    import time

    from harness.runners import LoadRequest, serve_process

    (tmp_path / "never_healthy.py").write_text("import time\ntime.sleep(120)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(serve_process, "SERVER_MODULE", "never_healthy")
    monkeypatch.setenv("PARITY_SERVE_START_TIMEOUT", "1.5")
    runner = ServeRunner("v1")
    req = LoadRequest(model_dir=str(tmp_path), dtype="float32", device="cpu")
    t0 = time.monotonic()
    with pytest.raises(ServerTimeout, match=r"not healthy after 2 s \(PARITY_SERVE_START_TIMEOUT"):
        runner.server._start(req, {}, free_port())
    assert time.monotonic() - t0 < 30
    assert runner.server.proc is None


@pytest.mark.parametrize("raw", ["soon", "0", "-5"])
def test_a_bad_start_timeout_is_refused_naming_the_variable(monkeypatch, raw):
    from harness.runners.serve_process import start_timeout

    monkeypatch.setenv("PARITY_SERVE_START_TIMEOUT", raw)
    with pytest.raises(ServerFailure, match="PARITY_SERVE_START_TIMEOUT"):
        start_timeout()


# --- batched requests (items_per_request) ---------------------------------------------------


def _batched_embed_server(answer_order=None, index_of=None, log: list | None = None):
    """/v1/embeddings taking a list `input`: one entry per input with its `index`, usage the
    request's total. `answer_order(n)`: the order the entries are listed in; `index_of(k, n)`:
    the index written on input k's entry (a server that mixes them up). Each request answered is
    appended to `log` as the server's access log would say it."""

    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": _ids(body["prompt"])})
        assert request.url.path == "/v1/embeddings" and isinstance(body["input"], list)
        await asyncio.sleep(0.001)
        texts = body["input"]
        n = len(texts)
        entries = [
            {"index": index_of(k, n) if index_of else k, "embedding": _vector(t)}
            for k, t in enumerate(texts)
        ]
        order = answer_order(n) if answer_order else range(n)
        if log is not None:
            log.append('INFO:     127.0.0.1:1 - "POST /v1/embeddings HTTP/1.1" 200 OK\n')
        tokens = sum(len(_ids(t)) for t in texts)
        return httpx.Response(
            200, json={"data": [entries[k] for k in order], "usage": {"prompt_tokens": tokens}}
        )

    return handler


@pytest.mark.parametrize("per_request, sizes", [("all", [24]), (3, [3] * 8), (5, [5] * 4 + [4])])
def test_batched_requests_carry_their_items_and_answers_are_matched_by_index(per_request, sizes):
    reversed_order = _batched_embed_server(answer_order=lambda n: range(n - 1, -1, -1))
    options = {"items_per_request": per_request, "max_in_flight": 1}
    m = _embed_measure(reversed_order, options)  # entries listed backwards, indexes right
    assert m.problem is None and all(x.ok for x in m.metrics), m
    assert m.notes["usage"].startswith("usage.prompt_tokens equal to the reference's token count")
    runner = served(reversed_order)
    evidence = runner.run("embed", list(TEXTS), req(**options)).evidence
    assert evidence.run.batching.items_per_request == sizes
    assert [meta["batch"]["items"] for meta in evidence.records] == [
        s for s in sizes for _ in range(s)
    ]


def test_batched_requests_carry_the_requests_values_as_body_fields():
    """use_activation (a TO_VLLM value) rides on a batched request as on a single one: a batched
    body of only `model` and `input` would send it to nobody."""
    bodies: list = []
    inner = _batched_embed_server()

    async def recording(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/embeddings":
            bodies.append(json.loads(request.content))
        return await inner(request)

    runner = served(recording)
    runner.run("embed", list(TEXTS), req(items_per_request=6, use_activation=False))
    assert bodies and all(b["use_activation"] is False for b in bodies)


def test_batched_answers_with_mixed_up_indexes_fail():
    mixed = _batched_embed_server(index_of=lambda k, n: n - 1 - k)
    m = _embed_measure(mixed, {"items_per_request": 3, "max_in_flight": 1})
    verdict = judge(_case("embed", EMBED_TOL), "vllm-serve-v1", m)
    assert verdict.status == "fail" and "cosine_distance" in verdict.reason, verdict.reason


@pytest.mark.parametrize(
    "index_of, message",
    [
        (lambda k, n: 0, "answer entry 1 has index 0; expected each of 0..2 once"),
        (lambda k, n: k + 1, "answer entry 2 has index 3; expected each of 0..2 once"),
        (lambda k, n: "0", "answer entry 0 has index '0'; expected each of 0..2 once"),
    ],
)
def test_a_repeated_or_out_of_range_index_is_the_servers_error(index_of, message):
    runner = served(_batched_embed_server(index_of=index_of))
    with pytest.raises(
        ServerFailure, match=re.escape(f"/v1/embeddings request 0 (items [0, 1, 2]): {message}")
    ):
        runner.run("embed", list(TEXTS), req(items_per_request=3, max_in_flight=1))


def test_a_batched_usage_count_off_by_one_fails_naming_the_request():
    handler = _batched_embed_server()

    async def async_off(request):
        response = await handler(request)
        if request.url.path != "/v1/embeddings":
            return response
        body = json.loads(response.content)
        body["usage"]["prompt_tokens"] += 1
        return httpx.Response(200, json=body)

    m = _embed_measure(async_off, {"items_per_request": 12, "max_in_flight": 1})
    n = sum(len(_ids(t)) for t in TEXTS[:12])
    assert m.problem.startswith(
        f"usage.prompt_tokens of request 0 (items {list(range(12))}) is {n + 1}, but the "
        f"reference ran {n} tokens"
    ), m.problem


def test_items_per_request_applies_to_embed_and_classify_only(write_matrix):
    head = "families: {f: {}}\ncases:\n  - {id: c, family: f, task: %s, model: {source: synthetic, arch: BertModel}, inputs: short-texts, runners: [hf, vllm-serve-v1],\n"
    tol = "     tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}}, %s}\n"
    for task in ("embed", "classify"):
        load_matrix(write_matrix(head % task + tol % "request: {serve: {items_per_request: all}}"))
    with pytest.raises(MatrixError, match="serve.items_per_request applies to tasks 'embed'"):
        load_matrix(
            write_matrix(head % "token_embed" + tol % "request: {serve: {items_per_request: 2}}")
        )
    with pytest.raises(MatrixError, match="check 'batched_all' applies to tasks 'embed'"):
        load_matrix(write_matrix(head % "token_embed" + tol % "checks: [batched_all]"))
    with pytest.raises(MatrixError, match="items_per_request must be at least 1"):
        load_matrix(write_matrix(head % "embed" + tol % "request: {serve: {items_per_request: 0}}"))


def _batched_requests(tmp_path, options: dict, logged: int | None = None, finished=None):
    """info.requests of a batched run against the double, its server log beside it (`logged`:
    how many of its answers the log shows; None: all)."""
    from harness.runners.worker import _requests

    log: list = []
    runner = served(_batched_embed_server(log=log))
    runner.server.log_path = tmp_path / "server.log"
    runner.server.log_path.write_text("INFO started\n")

    original = runner.server.logged_posts

    def logged_posts(path, mark, expected):
        with open(runner.server.log_path, "a") as f:
            f.writelines(log[: len(log) if logged is None else logged])
        return original(path, mark, expected)

    runner.server.logged_posts = logged_posts
    evidence = runner.run("embed", list(TEXTS), req(**options)).evidence
    requests = _requests(evidence, str(tmp_path / "out"))
    items = len(TEXTS) if finished is None else finished
    requests["server_metrics"] = {"engine_steps": 2, "requests_finished": items}
    return requests


@pytest.mark.parametrize(
    "check, options, logged, finished, error",
    [
        ("batched_all", None, None, None, None),
        ("batched_chunks", None, None, None, None),
        ("batched_in_flight", None, None, None, None),
        (
            "batched_all",
            {"items_per_request": 3, "max_in_flight": 1},
            None,
            None,
            "did not take effect: 8 requests of [3, 3, 3, 3, 3, 3, 3, 3] items (one request of "
            "all needed)",
        ),
        (
            "batched_chunks",
            {"items_per_request": 3, "max_in_flight": 16},
            None,
            None,
            "did not take effect: 8 requests were in flight at once (one at a time needed)",
        ),
        (
            "batched_in_flight",
            {"items_per_request": 3, "max_in_flight": 1},
            None,
            None,
            "did not take effect: at most 1 requests were in flight at once (2+ needed)",
        ),
        (
            "batched_chunks",
            None,
            5,
            None,
            "is not proven: the harness sent 8 requests to /v1/embeddings, the server's access "
            "log shows 5 answered",
        ),
        (
            "batched_all",
            None,
            None,
            1,
            "is not proven: the server finished 1 engine requests for the 24 items of 1 HTTP "
            "requests (one per item expected)",
        ),
    ],
)
def test_a_batching_check_proves_its_batching_from_the_harness_and_the_servers_log(
    tmp_path, monkeypatch, check, options, logged, finished, error
):
    from harness.runners import serve_process

    monkeypatch.setattr(serve_process, "LOG_WAIT", 0.0)
    base = _case("embed", EMBED_TOL).model_copy(update={"checks": [check]})
    (derived,) = [c for c in expand_checks([base]) if c.variant_of]
    sent = options or derived.request.serve.model_dump()
    requests = _batched_requests(tmp_path, sent, logged, finished)
    reason = check_not_in_effect(derived, {"requests": requests})
    assert reason == (None if error is None else f"invariance check {check} " + error)


def test_a_batching_check_without_a_server_log_is_not_proven(tmp_path):
    runner = served(_batched_embed_server())
    run = runner.run("embed", list(TEXTS), req(items_per_request="all", max_in_flight=1))
    assert run.evidence.run.batching.server_log_requests is None
    base = _case("embed", EMBED_TOL).model_copy(update={"checks": ["batched_all"]})
    (derived,) = [c for c in expand_checks([base]) if c.variant_of]
    requests = {
        **run.evidence.run.wire(),
        "server_metrics": {"requests_finished": 24, "engine_steps": 1},
    }
    assert check_not_in_effect(derived, {"requests": requests}) == (
        "invariance check batched_all is not proven: the server's access log could not be read "
        "(no server log)"
    )


def test_uvicorn_access_lines_are_counted_per_endpoint_and_status():
    from harness.runners.serve_process import count_posts

    text = (
        'INFO:     127.0.0.1:56174 - "POST /v1/embeddings HTTP/1.1" 200 OK\n'
        'INFO:     127.0.0.1:56174 - "POST /tokenize HTTP/1.1" 200 OK\n'
        'INFO:     127.0.0.1:56182 - "POST /v1/embeddings HTTP/1.1" 400 Bad Request\n'
        'INFO:     127.0.0.1:56182 - "POST /v1/embeddings HTTP/1.1" 200 OK\n'
        'INFO:     127.0.0.1:56182 - "POST /classify HTTP/1.1" 200 OK\n'
    )
    assert count_posts(text, "/v1/embeddings") == 2
    assert count_posts(text, "/classify") == 1


PAIRS = [tuple(p) for p in input_set("query-document-pairs").items]


def _score_shapes_server(index_of=None):
    """/score taking text_1 a text (1:N: paired with each text_2) or a list (N:N: pair k of the
    k-th texts); entries listed backwards, each with its index (or `index_of(k, n)`)."""

    async def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/score"
        body = json.loads(request.content)
        docs = body["text_2"] if isinstance(body["text_2"], list) else [body["text_2"]]
        queries = (
            body["text_1"] if isinstance(body["text_1"], list) else [body["text_1"]] * len(docs)
        )
        assert len(queries) == len(docs)
        n = len(docs)
        data = [
            {"index": index_of(k, n) if index_of else k, "score": _score(q, d)}
            for k, (q, d) in enumerate(zip(queries, docs))
        ]
        return httpx.Response(200, json={"data": data[::-1], "usage": {"prompt_tokens": None}})

    return handler


@pytest.mark.parametrize(
    "per_request, shape, sizes",
    [("query", "1:N", [4] * 6), ("all", "N:N", [24]), (5, "N:N", [5] * 4 + [4])],
)
def test_score_shapes_are_sent_as_asked_and_matched_by_index(per_request, shape, sizes):
    sent: list = []
    inner = _score_shapes_server()

    async def handler(request):
        sent.append(json.loads(request.content))
        return await inner(request)

    runner = served(handler)
    result = runner.run("score", [list(p) for p in PAIRS], req(items_per_request=per_request))
    got = result.outputs
    assert [float(g[0]) for g in got] == pytest.approx([_score(q, d) for q, d in PAIRS])
    assert result.evidence.run.batching.items_per_request == sizes
    assert all(isinstance(b["text_1"], str) == (shape == "1:N") for b in sent)


@pytest.mark.parametrize("per_request", ["query", "all"])
def test_score_shapes_with_mixed_up_indexes_fail(per_request):
    runner = served(_score_shapes_server(index_of=lambda k, n: n - 1 - k))
    got = runner.run("score", [list(p) for p in PAIRS], req(items_per_request=per_request)).outputs
    assert [float(g[0]) for g in got] != pytest.approx([_score(q, d) for q, d in PAIRS])


def test_score_shapes_fit_score_cases_only(write_matrix):
    head = "families: {f: {}}\ncases:\n  - {id: c, family: f, task: %s, model: {source: synthetic, arch: BertModel}, inputs: %s, runners: [hf, vllm-serve-v1],\n"
    tol = "     tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}}, %s}\n"
    pairs = head % ("score", "query-document-pairs")
    load_matrix(write_matrix(pairs + tol % "checks: [score_one_to_many, score_many_to_many]"))
    with pytest.raises(MatrixError, match="check 'score_one_to_many': items_per_request 'query'"):
        load_matrix(
            write_matrix(head % ("embed", "short-texts") + tol % "checks: [score_one_to_many]")
        )
    with pytest.raises(
        MatrixError, match="applies to /v1/embeddings, /classify and /score, not serve.api 'rerank'"
    ):
        load_matrix(
            write_matrix(pairs + tol % "request: {serve: {api: rerank, items_per_request: all}}")
        )


@pytest.mark.parametrize(
    "sizes, error",
    [
        ([4] * 6, None),
        (
            [1] * 24,
            "did not take effect: requests of [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1] pairs (one per query, some with several documents, needed)",
        ),
    ],
)
def test_score_one_to_many_proves_one_request_per_query(sizes, error):
    base = _case("score").model_copy(
        update={"checks": ["score_one_to_many"], "inputs": "query-document-pairs"}
    )
    (derived,) = [c for c in expand_checks([base]) if c.variant_of]
    requests = {
        "batching": {
            "endpoint": "/score",
            "items_per_request": sizes,
            "server_log_requests": len(sizes),
        },
        "server_metrics": {"requests_finished": 24, "engine_steps": 3},
        "peak_in_flight": 6,
    }
    reason = check_not_in_effect(derived, {"requests": requests})
    assert reason == (None if error is None else "invariance check score_one_to_many " + error)


def _pooling_server(seen: list):
    """A /pooling double that records each request body and answers its item's vector; /tokenize
    answers three ids."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body))
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [1, 2, 3], "count": 3})
        assert request.url.path == "/pooling"
        text = body["messages"][-1]["content"] if "messages" in body else body["input"]
        vec = [float(len(text)), 1.0]
        usage = {"prompt_tokens": 3}
        return httpx.Response(200, json={"data": [{"index": 0, "data": vec}], "usage": usage})

    return handler


@pytest.mark.parametrize("task", ["embed", "classify"])
def test_api_pooling_sends_each_item_to_pooling_with_the_cases_task(task):
    seen: list = []
    chat = {
        "system": "S",
        "add_generation_prompt": True,
        "continue_final_message": False,
        "chat_template_kwargs": {"enable_thinking": False},
        "add_special_tokens": True,
    }
    out = (
        served(_pooling_server(seen))
        .run(task, ["ab", "abc"], req(api="pooling", chat=chat))
        .outputs
    )
    assert [o.tolist() for o in out] == [[2.0, 1.0], [3.0, 1.0]]
    pooled = [b for p, b in seen if p == "/pooling"]
    assert len(pooled) == 2 and all(b["task"] == task for b in pooled)
    body = pooled[0]
    assert body["messages"][0] == {"role": "system", "content": "S"}
    assert body["add_generation_prompt"] is True and body["add_special_tokens"] is True
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    # /tokenize is asked with the same conversation and options
    tok = [b for p, b in seen if p == "/tokenize"]
    assert len(tok) == 2 and tok[0]["add_special_tokens"] is True
    assert tok[0]["messages"] == body["messages"]
    # without chat: the text as `input`
    seen.clear()
    out = served(_pooling_server(seen)).run(task, ["abcd"], req(api="pooling")).outputs
    assert out[0].tolist() == [4.0, 1.0]
    assert [b for p, b in seen if p == "/pooling"][0]["input"] == "abcd"


def test_chat_requests_leave_add_special_tokens_to_the_servers_default():
    seen: list = []
    served(_pooling_server(seen)).run("embed", ["ab"], req(api="pooling", chat={}))
    assert all("add_special_tokens" not in b for _, b in seen)


def test_api_pooling_needs_embed_or_classify(write_matrix):
    head = "families: {f: {}}\ncases:\n  - {id: c, family: f, task: %s, model: {source: synthetic, arch: BertModel}, inputs: %s, runners: [hf],\n"
    tol = "     tolerances: {float32: {max_abs: 1.0e-5}}, request: {serve: %s}}\n"
    load_matrix(write_matrix(head % ("classify", "short-texts") + tol % "{api: pooling}"))
    with pytest.raises(MatrixError, match="serve.api 'pooling' applies to tasks 'embed' and"):
        load_matrix(write_matrix(head % ("token_classify", "short-texts") + tol % "{api: pooling}"))
    with pytest.raises(MatrixError, match="serve.api 'pooling' sends float answers"):
        load_matrix(
            write_matrix(
                head % ("embed", "short-texts") + tol % "{api: pooling, encoding_format: base64}"
            )
        )
    with pytest.raises(MatrixError, match="not serve.api 'pooling'"):
        load_matrix(
            write_matrix(
                head % ("embed", "short-texts") + tol % "{api: pooling, items_per_request: all}"
            )
        )


# --- a score template's requests: image sides as content parts, its variables in the body ---


def _recording_score_server(bodies: list):
    """/score and /rerank answering 0.5 for every pair, keeping each request's body."""

    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append((request.url.path, body))
        if request.url.path == "/rerank":
            docs = body["documents"]
            results = [{"index": k, "relevance_score": 0.5} for k in range(len(docs))]
            return httpx.Response(200, json={"results": results, "usage": {"prompt_tokens": 1}})
        n = len(body["text_2"]) if isinstance(body["text_2"], list) else 1
        data = [{"index": k, "score": 0.5} for k in range(n)]
        return httpx.Response(200, json={"data": data, "usage": {"prompt_tokens": n}})

    return handler


def _image_part(side) -> bool:
    return isinstance(side, dict) and side["content"][0]["type"] == "image_url"


@pytest.mark.parametrize(
    "options",
    [{"api": "rerank"}, {"items_per_request": "query"}, {}],
    ids=["rerank", "score-1:N", "score-one-pair"],
)
def test_image_sides_go_to_score_and_rerank_as_content_parts_with_the_template_variables(options):
    """An image query or document is sent as content parts (an image_url data URL, then its
    caption), never as the harness's own {"image": ...} item; an image query groups its 1:N
    request as a text one does; score_template_kwargs travel as chat_template_kwargs."""
    pairs = [list(p) for p in input_set("image-query-pairs").items[:4]]  # one image query
    bodies: list = []
    request = req(
        score_template="qwen3-vl-reranker",
        score_template_kwargs={"instruction": "Find it."},
        **options,
    )
    served(_recording_score_server(bodies)).run("score", pairs, request)
    assert bodies
    for _, body in bodies:
        assert body["chat_template_kwargs"] == {"instruction": "Find it."}
        queries = [body["query"]] if "query" in body else body["text_1"]
        docs = body.get("documents", body.get("text_2"))
        for side in (queries if isinstance(queries, list) else [queries]) + (
            docs if isinstance(docs, list) else [docs]
        ):
            assert isinstance(side, str) or _image_part(side), side
            assert not (isinstance(side, dict) and "image" in side)
        assert _image_part(queries if isinstance(queries, dict) else queries[0])
    data_url = bodies[0][1].get("query") or bodies[0][1]["text_1"]
    data_url = data_url if isinstance(data_url, dict) else data_url[0]
    assert data_url["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
