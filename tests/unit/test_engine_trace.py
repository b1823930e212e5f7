"""The proof of effect of shuffle, one_by_one, chunked_prefill and no_chunked_prefill: what vLLM's
scheduler did, traced through the offline runner on a fake engine (a FIFO scheduler with a token
budget, chunking or not), summarised by the worker and judged by harness.judge.verdict."""

import itertools
from types import SimpleNamespace

import pytest

import harness.runners.options
from harness.judge.verdict import Measurement, Metric, check_not_in_effect, outcome_verdict
from harness.matrix.checks import expand_checks
from harness.matrix.request import Request
from harness.run.execute import RunOutcome
from harness.runners.engine_trace import EngineTrace, attach, summarize
from harness.runners.vllm import VllmRunner
from harness.runners.worker import _requests
from tests.requests import req
from tests.unit.test_compare import make_case

TEXTS = [" ".join(["word"] * n) for n in (3, 9, 5, 14, 7, 2, 11, 6)]  # 5..16 tokens with specials


class FakeScheduler:
    """First come, first served under a per-step token budget, like vLLM's: with chunking a prompt
    that does not fit takes what is left of the budget; without, it waits whole for a later step."""

    def __init__(self, budget: int, chunked: bool, split_anyway: bool = False):
        self.budget, self.chunked, self.split_anyway = budget, chunked, split_anyway
        self.waiting: list[list] = []

    def add_request(self, request):
        self.waiting.append([request.request_id, request.num_tokens])

    def schedule(self):
        left, out = self.budget, {}
        for waiting in list(self.waiting):
            fits = waiting[1] <= left
            splits = self.chunked or self.split_anyway
            take = min(waiting[1], left) if splits else (waiting[1] if fits else 0)
            if take == 0:
                break
            out[waiting[0]] = take
            left -= take
            waiting[1] -= take
            if waiting[1] == 0:
                self.waiting.remove(waiting)
        return SimpleNamespace(num_scheduled_tokens=out)


class FakeLLM:
    """vllm.LLM's embed as the runner calls it: requests added in order, then stepped to the end;
    outputs carry the caller's request id (the engine's own has a random suffix)."""

    def __init__(self, scheduler: FakeScheduler):
        core = SimpleNamespace(engine_core=SimpleNamespace(scheduler=scheduler))
        self.llm_engine = SimpleNamespace(engine_core=core)
        self.counter = itertools.count()

    def embed(self, prompts, **_):
        sched = self.llm_engine.engine_core.engine_core.scheduler
        ids = []
        for p in prompts:
            ids.append(str(next(self.counter)))
            n = len(p.split()) + 2
            sched.add_request(SimpleNamespace(request_id=f"{ids[-1]}-1a2b3c4d", num_tokens=n))
        while sched.waiting:
            sched.schedule()
        return [
            SimpleNamespace(
                request_id=rid,
                prompt_token_ids=[101] * (len(p.split()) + 2),
                num_cached_tokens=0,
                outputs=SimpleNamespace(embedding=[float(len(p))]),
            )
            for rid, p in zip(ids, prompts)
        ]


def _run(
    options: dict, budget: int = 4096, chunked: bool = True, split_anyway: bool = False, tmp=None
) -> dict:
    runner = VllmRunner("v1")
    runner.llm = FakeLLM(FakeScheduler(budget, chunked, split_anyway))
    runner.trace = attach(runner.llm)
    result = runner.run("embed", TEXTS, req(**options))
    out = result.outputs
    assert [float(o[0]) for o in out] == [float(len(t)) for t in TEXTS]  # answers in input order
    return _requests(result.evidence, str(tmp / "out"))


def _reason(
    check: str, requests: dict, effective: dict | None = None, trace: dict | None = None
) -> str | None:
    (derived,) = [c for c in expand_checks([make_case(checks=[check])]) if c.variant_of]
    info = {"effective": effective or {}, "requests": requests, "engine_trace": trace}
    return check_not_in_effect(derived, info)


def test_the_trace_records_arrival_order_and_steps_per_request(tmp_path):
    base = _run({}, tmp=tmp_path)
    assert base["arrival_order"] == list(range(8))
    assert base["peak_batch"] == 8 and base["engine_steps"] == 1
    shuffled = _run({"shuffle_seed": 0}, tmp=tmp_path)["arrival_order"]
    assert sorted(shuffled) == list(range(8)) and shuffled != list(range(8))
    alone = _run({"one_by_one": True}, tmp=tmp_path)
    assert alone["peak_batch"] == 1 and alone["engine_steps"] == 8
    chunked = _run({}, budget=16, tmp=tmp_path)
    assert chunked["split_prompts"] > 0
    assert chunked["tokens_scheduled"] == sum(len(t.split()) + 2 for t in TEXTS)


def test_shuffle_and_one_by_one_in_effect_pass_and_their_base_run_would_not(tmp_path):
    assert _reason("shuffle", _run({"shuffle_seed": 0}, tmp=tmp_path)) is None
    assert _reason("one_by_one", _run({"one_by_one": True}, tmp=tmp_path)) is None
    base = _run({}, tmp=tmp_path)
    assert "received the 8 requests in input order" in _reason("shuffle", base)
    assert "an engine step scheduled 8 requests together" in _reason("one_by_one", base)


@pytest.mark.parametrize(
    "dropped, check", [("shuffle_seed", "shuffle"), ("one_by_one", "one_by_one")]
)
def test_a_request_pattern_that_never_reaches_the_engine_is_an_error(
    monkeypatch, tmp_path, dropped, check
):
    """Seeded mutation: the runner loses the option on its way to the engine."""
    real = harness.runners.options.run_with_options

    def lossy(call, items, request):
        return real(call, items, request.model_copy(update={dropped: Request().__dict__[dropped]}))

    monkeypatch.setattr(harness.runners.options, "run_with_options", lossy)
    (derived,) = [c for c in expand_checks([make_case(checks=[check])], seed=3) if c.variant_of]
    requests = _run(derived.run_options, tmp=tmp_path)
    ref = RunOutcome("c", "hf", "ok", output="y")
    info = {"actual_runner": "v1", "requests": requests}
    got = RunOutcome("c", "vllm-v1", "ok", output="x", info=info)
    same = lambda: Measurement(metrics=[Metric("max_abs", 0.0, 1e-5)])  # noqa: E731 - outputs agree
    v = outcome_verdict(derived, "vllm-v1", ref, got, same)
    assert v.status == "error", v.reason
    assert f"invariance check {check} did not take effect" in v.reason


CHUNKED = {"enable_chunked_prefill": True, "max_num_batched_tokens": 16}
UNCHUNKED = {"enable_chunked_prefill": False, "max_num_batched_tokens": 16}


def test_chunked_prefill_needs_a_prompt_split_across_steps(tmp_path):
    assert _reason("chunked_prefill", _run({}, budget=16, tmp=tmp_path), CHUNKED) is None
    # seeded: the setting reads as on, but the budget holds every prompt whole (the old CPU run)
    whole = _run({}, budget=4096, tmp=tmp_path)
    assert "split no prompt across engine steps" in _reason("chunked_prefill", whole, CHUNKED)


def test_no_chunked_prefill_needs_prompts_deferred_whole_not_split(tmp_path):
    deferred = _run({}, budget=16, chunked=False, tmp=tmp_path)
    assert deferred["split_prompts"] == 0 and deferred["engine_steps"] > 1
    assert _reason("no_chunked_prefill", deferred, UNCHUNKED) is None
    # seeded: an engine that splits prompts though chunking is off
    split = _run({}, budget=16, chunked=False, split_anyway=True, tmp=tmp_path)
    reason = _reason("no_chunked_prefill", split, UNCHUNKED)
    assert "split 2 prompt(s) across engine steps" in reason
    # the base run's situation: every prompt fits one step, so chunking never mattered
    roomy = _run({}, budget=4096, chunked=False, tmp=tmp_path)
    roomy_settings = {**UNCHUNKED, "max_num_batched_tokens": 4096}
    assert "fit one 4096-token step" in _reason("no_chunked_prefill", roomy, roomy_settings)


@pytest.mark.parametrize(
    "check", ["shuffle", "one_by_one", "chunked_prefill", "no_chunked_prefill"]
)
def test_without_a_trace_of_the_scheduler_the_check_is_not_proven(tmp_path, check):
    runner = VllmRunner("v1")
    runner.llm = FakeLLM(FakeScheduler(16, True))
    # vLLM's MP client has no in-process engine core
    runner.trace = attach(SimpleNamespace(llm_engine=SimpleNamespace(engine_core=object())))
    evidence = runner.run("embed", TEXTS, req(one_by_one=True)).evidence
    requests = _requests(evidence, str(tmp_path / "out"))
    effective = CHUNKED if check == "chunked_prefill" else UNCHUNKED
    reason = _reason(check, requests, effective, runner.trace.as_info())
    assert reason.startswith(
        f"invariance check {check} is not proven: no trace of vLLM's scheduler"
    ), reason
    assert "the engine core runs in another process" in reason


def test_the_derived_engine_settings_differ_from_the_base_run():
    base = make_case(checks=["chunked_prefill", "no_chunked_prefill"])
    chunked, unchunked = [c for c in expand_checks([base]) if c.variant_of]
    assert chunked.engine["max_num_batched_tokens"] == 16
    assert chunked.engine["enable_chunked_prefill"] is True
    assert unchunked.engine["enable_chunked_prefill"] is False
    # small enough that a batch of short prompts needs several steps (the base run holds 4096)
    assert unchunked.engine["max_num_batched_tokens"] <= 64 <= unchunked.engine["max_model_len"]


def test_summarize_without_traces_says_none():
    assert summarize([{"prompt_token_ids": [1]}]) == {}
    assert summarize([{"scheduled": [[0, 5, 2]], "engine_arrival": 0}, {"scheduled": []}]) == {}
    assert EngineTrace(None, "why").per_request(["0"]) == [{}]
