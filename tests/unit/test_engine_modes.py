"""The proofs of effect of the engine-mode checks (deep_chunked_prefill, tiled, async_scheduling,
no_async_scheduling, compiled): what vLLM's scheduler and engine core did, traced through the
offline runner on a fake engine, summarised by the worker and judged by harness.judge.verdict."""

from collections import deque
from types import SimpleNamespace

from harness.judge.verdict import Measurement, Metric, outcome_verdict
from harness.matrix.checks import DEEP_CHUNKS, expand_checks
from harness.run.execute import RunOutcome
from harness.runners.engine_trace import EngineTrace, attach, summarize
from harness.runners.vllm import VllmRunner
from harness.runners.worker import _requests
from tests.requests import req
from tests.unit.test_compare import make_case
from tests.unit.test_engine_trace import FakeLLM, FakeScheduler, _reason

# 2 short prompts (5 and 7 tokens) and 2 at the context limit (66 tokens with specials)
MIXED = ["word " * 3, "word " * 64, "word " * 5, "word " * 64]
DEEP = {"enable_chunked_prefill": True, "max_num_batched_tokens": 16, "max_model_len": 66}


class TilingScheduler(FakeScheduler):
    """FakeScheduler that schedules at most `max_seqs` requests per step (max_num_seqs)."""

    def __init__(self, budget: int, max_seqs: int):
        super().__init__(budget, chunked=True)
        self.max_seqs = max_seqs

    def schedule(self):
        held, self.waiting = self.waiting[self.max_seqs :], self.waiting[: self.max_seqs]
        out = super().schedule()
        self.waiting += held
        return out


def _run(texts, scheduler, tmp) -> dict:
    runner = VllmRunner("v1")
    runner.llm = FakeLLM(scheduler)
    runner.trace = attach(runner.llm)
    result = runner.run("embed", texts, req())
    out = result.outputs
    assert [float(o[0]) for o in out] == [float(len(t)) for t in texts]  # input order kept
    return _requests(result.evidence, str(tmp / "out"))


def test_deep_chunking_counts_the_long_prompts_steps_and_steps_shared_with_short_ones(tmp_path):
    req = _run(MIXED, FakeScheduler(16, chunked=True), tmp_path)
    # 66 tokens in 16-token steps: 5 steps; the first short prompt shares the first long one's
    # first step, the second shares the last step of the first long prompt
    assert req["max_prompt_tokens"] == 66 and req["longest_prompt_steps"] == 5
    assert req["shared_long_short_steps"] == 2
    assert _reason("deep_chunked_prefill", req, DEEP) is None


def test_deep_chunking_that_did_not_go_deep_is_an_error(tmp_path):
    # seeded: 32-token steps hold a 66-token prompt in 3 steps
    shallow = _run(MIXED, FakeScheduler(32, chunked=True), tmp_path)
    reason = _reason("deep_chunked_prefill", shallow, {**DEEP, "max_num_batched_tokens": 32})
    assert f"over 3 engine step(s) of 32 tokens, fewer than {DEEP_CHUNKS}" in reason, reason
    # seeded: the long prompts are not at max_model_len
    reason = _reason("deep_chunked_prefill", shallow, {**DEEP, "max_model_len": 128})
    assert "the longest prompt has 66 tokens, not max_model_len=128" in reason, reason
    # seeded: the long and short prompts never share a step (all short ones first, in one step)
    apart = _run(MIXED[0::2] + MIXED[1::2], FakeScheduler(12, chunked=True), tmp_path)
    reason = _reason("deep_chunked_prefill", apart, {**DEEP, "max_num_batched_tokens": 12})
    assert "no engine step scheduled a 66-token prompt beside a short prompt" in reason, reason
    # chunking off: the check says so first
    off = _reason("deep_chunked_prefill", apart, {**DEEP, "enable_chunked_prefill": False})
    assert "enable_chunked_prefill=False" in off


def test_tiling_needs_steps_within_max_num_seqs_and_requests_that_waited(tmp_path):
    texts = ["word " * n for n in (3, 9, 5, 14, 7, 2)]
    tiled = _run(texts, TilingScheduler(4096, max_seqs=2), tmp_path)
    assert tiled["peak_batch"] == 2 and tiled["engine_steps"] == 3 and tiled["waited"] == 4
    assert _reason("tiled", tiled, {"max_num_seqs": 2}) is None
    # seeded: the engine ignored max_num_seqs and ran the batch in one step
    whole = _run(texts, FakeScheduler(4096, chunked=True), tmp_path)
    reason = _reason("tiled", whole, {"max_num_seqs": 2})
    assert "an engine step scheduled 6 requests (max_num_seqs=2)" in reason, reason
    # the batch must be larger than max_num_seqs
    reason = _reason("tiled", whole, {"max_num_seqs": 8})
    assert "6 requests with max_num_seqs=8" in reason, reason
    # seeded: within max_num_seqs, yet nobody waited (a tiling path that never tiled)
    no_wait = {**tiled, "waited": 0}
    assert "none waited" in _reason("tiled", no_wait, {"max_num_seqs": 2})


def test_summarize_counts_waiting_from_the_runs_first_step():
    meta = [
        {"prompt_token_ids": [1] * 3, "scheduled": [[4, 3, 2]], "engine_arrival": 0},
        {"prompt_token_ids": [1] * 9, "scheduled": [[4, 4, 2], [5, 5, 1]], "engine_arrival": 1},
        {"prompt_token_ids": [1] * 2, "scheduled": [[6, 2, 1]], "engine_arrival": 2},
    ]
    got = summarize(meta)
    assert got["waited"] == 1 and got["longest_prompt_steps"] == 2
    assert got["shared_long_short_steps"] == 1  # step 4: the 9-token prompt beside a whole one


def _core(queue_size: int | None):
    """An engine core as attach() finds it: a scheduler, a batch queue when async scheduling is
    on (vLLM: EngineCore.batch_queue, stepped by step_with_batch_queue), and step_fn."""
    core = SimpleNamespace(scheduler=FakeScheduler(16, True), batch_queue_size=queue_size or 1)
    core.batch_queue = deque(maxlen=queue_size) if queue_size else None

    def step():
        if core.batch_queue is not None:
            if len(core.batch_queue) == queue_size:
                core.batch_queue.pop()  # the oldest batch's output is taken
            core.batch_queue.appendleft("batch")  # scheduled ahead while one runs
        return {}, True

    core.step_fn = step
    return SimpleNamespace(
        llm_engine=SimpleNamespace(engine_core=SimpleNamespace(engine_core=core))
    )


def test_async_scheduling_is_proven_by_steps_through_the_batch_queue():
    llm = _core(2)
    trace = attach(llm)
    for _ in range(3):
        llm.llm_engine.engine_core.engine_core.step_fn()
    info = trace.run_info()
    assert info == {"batch_queue_size": 2, "queued_steps": 3, "peak_batch_queue": 2}
    assert _reason("async_scheduling", info, {"async_scheduling": True}) is None
    assert _reason("no_async_scheduling", info, {"async_scheduling": False}) is not None
    trace.reset()
    assert trace.run_info()["queued_steps"] == 0
    # seeded: the setting reads as on, but the core stepped one batch at a time
    sync = _core(None)
    trace = attach(sync)
    sync.llm_engine.engine_core.engine_core.step_fn()
    info = trace.run_info()
    assert info == {"batch_queue_size": None, "queued_steps": 0, "peak_batch_queue": 0}
    reason = _reason("async_scheduling", info, {"async_scheduling": True})
    assert "0 steps through a batch queue of size None" in reason, reason
    assert _reason("no_async_scheduling", info, {"async_scheduling": False}) is None
    assert EngineTrace(None, "why").run_info() == {}


def _verdict(check: str, info: dict):
    (derived,) = [c for c in expand_checks([make_case(checks=[check])]) if c.variant_of]
    ref = RunOutcome("c", "hf", "ok", output="y")
    got = RunOutcome("c", "vllm-v1", "ok", output="x", info={"actual_runner": "v1", **info})
    same = lambda: Measurement(metrics=[Metric("max_abs", 0.0, 1e-5)])  # noqa: E731
    return outcome_verdict(derived, "vllm-v1", ref, got, same)


def test_async_scheduling_on_cpu_is_a_skip_that_names_vllms_own_override():
    off = {"effective": {"async_scheduling": False}, "requests": {"batch_queue_size": None}}
    v = _verdict("async_scheduling", {**off, "device": "cpu"})
    assert v.status == "skip" and "vllm/platforms/cpu.py" in v.reason, v.reason
    # the same evidence on a GPU is an error: the mode silently did not happen
    v = _verdict("async_scheduling", {**off, "device": "cuda"})
    assert v.status == "error" and "async_scheduling=False" in v.reason, v.reason


def test_compiled_needs_enforce_eager_off_and_a_compilation_mode():
    compiled = {"enforce_eager": False, "compilation_mode": "DYNAMO_TRACE_ONCE"}
    assert _verdict("compiled", {"effective": compiled}).status == "pass"
    v = _verdict("compiled", {"effective": {"enforce_eager": True, "compilation_mode": "NONE"}})
    assert v.status == "error" and "compilation mode NONE" in v.reason, v.reason
    v = _verdict("compiled", {"effective": {"enforce_eager": False, "compilation_mode": "NONE"}})
    assert v.status == "error"


def test_two_device_checks_need_the_split_and_pipeline_parallel_needs_chunking_too():
    tp = {"effective": {"tensor_parallel_size": 2}}
    assert _verdict("tensor_parallel_2", tp).status == "pass"
    v = _verdict("tensor_parallel_2", {"effective": {"tensor_parallel_size": 1}})
    assert v.status == "error" and "tensor_parallel_size=1" in v.reason, v.reason
    pp = {"pipeline_parallel_size": 2, "enable_chunked_prefill": True}
    split = {"effective": pp, "requests": {"split_prompts": 3}}
    assert _verdict("pipeline_parallel_2", split).status == "pass"
    whole = {"effective": pp, "requests": {"split_prompts": 0, "max_prompt_tokens": 9}}
    v = _verdict("pipeline_parallel_2", whole)
    assert v.status == "error" and "split no prompt across engine steps" in v.reason, v.reason
