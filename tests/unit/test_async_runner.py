"""The AsyncLLM runners (vllm-async-v1|v2, harness/runners/vllm_async.py) and several tasks in
flight on one model (`request.also_in_flight`): what they send, how answers are matched, the
bound on a run, and what a matrix may ask of them."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest

from harness.matrix.request import Request
from harness.matrix.runner_names import runner_info
from harness.matrix.schema import MatrixError
from harness.run.matrices import load_matrix


class _Out:
    """A final PoolingRequestOutput: the item's number in its data, so a mix-up shows."""

    def __init__(self, rid: str, value: float, n_ids: int):
        self.request_id, self.finished, self.num_cached_tokens = rid, True, 0
        self.prompt_token_ids = list(range(n_ids))
        self.outputs = type("O", (), {"data": np.full(3, value, np.float32)})()


class FakeAsyncLLM:
    """AsyncLLM.encode's shape: an async generator per request; answers finish in reverse order
    of arrival (the last request sent finishes first), and `hang` never finishes them."""

    def __init__(self, hang: bool = False):
        self.sent: list[tuple[str, str, object, dict | None]] = []
        self.hang = hang
        self.cancelled = 0

    def encode(self, prompt, params, request_id, lora_request=None, tokenization_kwargs=None):
        self.sent.append((request_id, prompt, params, tokenization_kwargs))
        n = len(self.sent)

        async def gen():
            try:
                await asyncio.sleep(3600 if self.hang else 0.01 * (20 - n))
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            yield _Out(request_id, float(str(prompt).split()[-1]), len(str(prompt).split()))

        return gen()


def _runner(engine):
    from harness.runners.engine_trace import EngineTrace
    from harness.runners.vllm_async import AsyncVllmRunner

    runner = AsyncVllmRunner("v1")
    runner.llm, runner.loop = engine, asyncio.new_event_loop()
    runner.trace = EngineTrace(None, "test")
    return runner


ITEMS = [f"text number {i}" for i in range(6)]


def test_every_item_is_in_flight_at_once_and_answers_are_matched_by_request_id():
    engine = FakeAsyncLLM()
    outs = _runner(engine).run("embed", ITEMS, Request(truncate=24)).outputs
    assert [float(o[0]) for o in outs] == [float(i) for i in range(6)]  # finished in reverse
    assert len({rid for rid, *_ in engine.sent}) == 6
    params, tok = engine.sent[0][2], engine.sent[0][3]
    # the offline runner's builders: PoolingParams with the task, tokenization kwargs
    assert params.task == "embed" and params.use_activation is None
    assert tok == {"truncate_prompt_tokens": 24}


def test_use_activation_and_the_pooling_task_of_a_reward_case():
    engine = FakeAsyncLLM()
    _runner(engine).run("reward", ITEMS[:2], Request(use_activation=True))
    assert {(p.task, p.use_activation) for _, _, p, _ in engine.sent} == {("token_classify", True)}


def test_also_in_flight_sends_each_item_for_the_other_task_and_compares_only_its_own():
    engine = FakeAsyncLLM()
    runner = _runner(engine)
    result = runner.run("classify", ITEMS, Request(also_in_flight=["token_classify"]))
    outs = result.outputs
    tasks = [p.task for _, _, p, _ in engine.sent]
    assert tasks == ["classify", "token_classify"] * 6  # interleaved: the steps hold both
    assert [float(o[0]) for o in outs] == [float(i) for i in range(6)]
    assert len(result.evidence.records) == 6


def test_a_hang_is_a_timed_out_error_naming_the_open_requests(monkeypatch):
    import harness.runners.vllm_async as mod

    monkeypatch.setattr(mod, "RUN_TIMEOUT", 0.2)
    engine = FakeAsyncLLM(hang=True)
    with pytest.raises(mod.AsyncRunTimeout, match=r"3 of 3 requests unfinished") as e:
        _runner(engine).run("embed", ITEMS[:3], Request())
    assert e.value.timed_out and engine.cancelled == 3  # aborted, not left in the engine


def test_a_failed_request_fails_the_run_with_its_own_error():
    class Failing(FakeAsyncLLM):
        def encode(self, prompt, params, request_id, **kw):
            if request_id.endswith("-1"):  # the second request: the engine died under it

                async def dead():
                    raise RuntimeError("EngineCore encountered an issue")
                    yield  # an async generator, as AsyncLLM.encode is

                return dead()
            return super().encode(prompt, params, request_id, **kw)

    with pytest.raises(RuntimeError, match="EngineCore encountered an issue"):
        _runner(Failing()).run("embed", ITEMS[:3], Request())


def test_a_score_case_is_refused_by_the_runner_naming_the_tasks_it_sends():
    with pytest.raises(ValueError, match="no score API"):
        _runner(FakeAsyncLLM())._call("score", [("q", "d")], {}, {})


def test_the_async_runner_names_a_kind_of_its_own_with_its_engine_env():
    from harness.runners.platform import Platform

    info = runner_info("vllm-async-v2")
    assert info.is_async and info.is_vllm and not info.is_offline_vllm and not info.is_server
    env = Platform("cpu").worker_env("vllm-async-v2")
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "1" and env["TRITON_INTERPRET"] == "1"
    # the model runner is read from AsyncLLM's engine-core process through collective_rpc
    assert env["VLLM_ALLOW_INSECURE_SERIALIZATION"] == "1"
    assert Platform("cpu").worker_env("vllm-v1")["VLLM_ALLOW_INSECURE_SERIALIZATION"] is None


def test_also_in_flight_reaches_the_server_as_requests_of_the_other_task_in_flight_together():
    from tests.fake_server import served

    sent = []

    def handler(request):
        body = json.loads(request.content)
        sent.append((request.url.path, body.get("task")))
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [1]})
        value = float(body["input"].split()[-1])
        if request.url.path == "/classify":
            return httpx.Response(200, json={"data": [{"probs": [value]}], "usage": {}})
        return httpx.Response(200, json={"data": [{"data": [[-1.0]]}], "usage": {}})

    runner = served(handler)
    outs = runner.run("classify", ITEMS[:3], Request(also_in_flight=["token_classify"])).outputs
    assert [float(o[0]) for o in outs] == [0.0, 1.0, 2.0]  # the case's own answers only
    posts = [s for s in sent if s[0] != "/tokenize"]
    assert sorted(posts) == sorted([("/classify", None)] * 3 + [("/pooling", "token_classify")] * 3)


CASE = (
    "families: {f: {}}\ncases:\n  - {id: c, family: f, task: %s, model: {source: synthetic, "
    "arch: BertModel}, inputs: short-texts, runners: %s,\n"
    "     tolerances: {float32: {max_abs: 1.0e-5}}%s}\n"
)


@pytest.mark.parametrize(
    "task, runners, request_, message",
    [
        ("score", "[hf, vllm-async-v1]", "", "task 'score' on vllm-async-v1: vLLM's AsyncLLM has"),
        (
            "classify",
            "[hf, vllm-v1, vllm-async-v1]",
            ", request: {also_in_flight: [token_classify]}",
            "also_in_flight on vllm-v1: vLLM's offline LLM serves one pooling task",
        ),
        (
            "classify",
            "[hf, vllm-async-v1]",
            ", request: {also_in_flight: [classify]}",
            r"other tasks than the case's own \('classify'\)",
        ),
    ],
)
def test_what_the_matrix_refuses_for_async_runners_and_tasks_in_flight(
    write_matrix, task, runners, request_, message
):
    with pytest.raises(MatrixError, match=message):
        load_matrix(write_matrix(CASE % (task, runners, request_)))


def test_also_in_flight_is_vllms_only_the_reference_key_never_holds_it():
    from harness.matrix.request import RequestOptions

    assert "also_in_flight" not in RequestOptions(also_in_flight=["classify"]).reference_key()


def test_a_load_that_fails_after_the_engine_started_stops_the_engine(monkeypatch):
    import harness.runners.vllm_async as mod
    from harness.runners import LoadRequest

    class Engine:
        stopped = False

        def shutdown(self):
            Engine.stopped = True

    def no_info(*a, **k):
        raise TimeoutError("collective_rpc did not answer")

    monkeypatch.setattr(mod, "engine_kwargs", lambda req: (None, {}))
    monkeypatch.setattr(mod, "explained_start", lambda model_dir, start: Engine())
    monkeypatch.setattr(mod, "load_info", no_info)
    runner = mod.AsyncVllmRunner("v2")
    with pytest.raises(TimeoutError):
        runner.load(LoadRequest(model_dir="/nonexistent", dtype="float32", device="cpu"))
    # the worker never unloads a failed load: the runner stopped the engine core itself
    assert Engine.stopped and runner.llm is None and runner.loop is None
