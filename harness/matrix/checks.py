"""Invariance checks: variants of a case that real engines break and that must not change the
answer. Each check named in a case's `checks:` becomes a derived case `<id>@<check>` that runs
on the compared vLLM runners and is held to the same reference (HF's outputs of the base case)
and the same tolerances. vLLM has a separate test for each of these.

A check is one `InvarianceCheck` in `CHECKS`: the engine settings, run options and server request
options it asks for, the runners it applies to, and its proof of effect (why it did not take
effect, read from what the engine reported). The matrix schema takes its check names from here;
harness.judge.verdict decides that a derived case must prove its check and asks the check how.
This module imports nothing from the schema (the schema validates check names against CHECKS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from harness.matrix.evidence import RequestsEvidence, ServerMetrics
from harness.matrix.runner_names import RUNNER_NAMES, runner_info


@dataclass(frozen=True)
class Evidence:
    """What a runner reported about a derived case's run (its outcome's `info`): the engine's
    effective settings, per request the prompt lengths, prefix-cache hits and what the scheduler
    did (harness.runners.engine_trace) and, for a server, its own metrics."""

    check: str
    effective: dict
    requests: RequestsEvidence
    engine_trace: dict
    device: str | None = None

    @classmethod
    def of(cls, check: str, info: dict) -> Evidence:
        return cls(
            check,
            info.get("effective") or {},
            RequestsEvidence.read(info.get("requests"), f"{check}: info.requests"),
            info.get("engine_trace") or {},
            info.get("device"),
        )

    @property
    def head(self) -> str:
        return f"invariance check {self.check} did not take effect"

    @property
    def unproven(self) -> str:
        return f"invariance check {self.check} is not proven"

    @property
    def untraced(self) -> str:
        absent = self.engine_trace.get("absent") or "the runner recorded none"
        return f"{self.unproven}: no trace of vLLM's scheduler for this run ({absent})"


# deep chunked prefill: the fewest steps a prompt at max_model_len must be scheduled over
DEEP_CHUNKS = 4

# a proof of effect: None when the evidence shows the check took effect, else why not (an error)
Proof = Callable[[Evidence], "str | None"]


@dataclass(frozen=True)
class InvarianceCheck:
    name: str
    doc: str
    runners: tuple[str, ...]  # the runners it runs on (a derived case keeps the base's among these)
    proof: Proof
    engine: dict[str, Any] = field(default_factory=dict)  # vLLM engine kwargs
    # run options (harness.runners.options); "{seed}" is filled with the run's shuffle seed
    run_options: dict[str, Any] = field(default_factory=dict)
    serve: dict[str, Any] = field(default_factory=dict)  # request options (ServeOptions)
    # why vLLM itself cannot run the mode here (a skip, with that reason), read from the evidence
    # before the proof; None: it always can
    unavailable: Proof | None = None

    def options_for(self, seed: int) -> dict[str, Any]:
        return {k: (seed if v == "{seed}" else v) for k, v in self.run_options.items()}


# engine settings need the offline engine with V1/V2 asked for explicitly; request patterns of
# the server need a server runner
ENGINE_RUNNERS = tuple(
    n for n in RUNNER_NAMES if runner_info(n).is_offline_vllm and runner_info(n).variant != "auto"
)
SERVE_RUNNERS = tuple(n for n in RUNNER_NAMES if runner_info(n).is_server)


def _shuffled(ev: Evidence) -> str | None:
    order = ev.requests.arrival_order
    if order is None:
        return ev.untraced
    if order == sorted(order):
        return (
            f"{ev.head}: vLLM's scheduler received the {len(order)} requests in input order "
            f"(the permutation is the identity), as in the base run"
        )
    return None


def _one_by_one(ev: Evidence) -> str | None:
    peak, count = ev.requests.peak_batch, ev.requests.count
    if peak is None:
        return ev.untraced
    if not count or count < 2:
        return f"{ev.head}: the case has {count} request(s); a batch of one is the base run itself"
    if peak != 1:
        return (
            f"{ev.head}: an engine step scheduled {peak} requests together "
            f"(one in every step needed)"
        )
    return None


def _chunked(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    chunk, longest = eff.get("max_num_batched_tokens"), req.max_prompt_tokens
    if eff.get("enable_chunked_prefill") is not True:
        setting = eff.get("enable_chunked_prefill")
        return f"{ev.head}: the engine ran with enable_chunked_prefill={setting}"
    if req.split_prompts is None:
        return ev.untraced
    if not req.split_prompts:
        return (
            f"{ev.head}: vLLM's scheduler split no prompt across engine steps (longest prompt "
            f"{longest} tokens, {chunk}-token steps); use longer inputs or a smaller "
            f"max_num_batched_tokens"
        )
    return None


def _unchunked(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    budget, tokens = eff.get("max_num_batched_tokens"), req.tokens_scheduled
    if eff.get("enable_chunked_prefill") is not False:
        setting = eff.get("enable_chunked_prefill")
        return f"{ev.head}: the engine ran with enable_chunked_prefill={setting}"
    if req.split_prompts is None:
        return ev.untraced
    if req.split_prompts:
        split = req.split_prompts
        return f"{ev.head}: vLLM's scheduler split {split} prompt(s) across engine steps"
    if budget is None or tokens <= budget:
        return (
            f"{ev.head}: all {tokens} prompt tokens fit one {budget}-token step, so no "
            f"prompt had to wait for a later step instead of being split (as in the base "
            f"run); use more inputs or a smaller max_num_batched_tokens"
        )
    return None


def _deep_chunked(ev: Evidence) -> str | None:
    """At least DEEP_CHUNKS steps for a prompt at max_model_len, which shared a step with a
    short prompt scheduled whole (long and short prompts chunked together in one batch)."""
    eff, req = ev.effective, ev.requests
    wrong = _chunked(ev)
    if wrong:
        return wrong
    longest, limit = req.max_prompt_tokens, eff.get("max_model_len")
    steps, shared = req.longest_prompt_steps, req.shared_long_short_steps
    if steps is None:
        return ev.untraced
    if longest is None or limit is None or longest != limit:
        return (
            f"{ev.head}: the longest prompt has {longest} tokens, not max_model_len={limit} "
            f"(use inputs truncated to max_model_len)"
        )
    if steps < DEEP_CHUNKS:
        chunk = eff.get("max_num_batched_tokens")
        return (
            f"{ev.head}: the longest prompt ({longest} tokens) was scheduled over {steps} engine "
            f"step(s) of {chunk} tokens, fewer than {DEEP_CHUNKS}"
        )
    if not shared:
        return (
            f"{ev.head}: no engine step scheduled a {longest}-token prompt beside a short "
            f"prompt (long and short prompts were never chunked together)"
        )
    return None


def _tiled(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    seqs, peak, count = eff.get("max_num_seqs"), req.peak_batch, req.count
    if peak is None or req.waited is None:
        return ev.untraced
    if seqs is None or count is None or count <= seqs:
        return (
            f"{ev.head}: {count} requests with max_num_seqs={seqs}: the batch must hold more "
            f"requests than one step may schedule"
        )
    if peak > seqs:
        return f"{ev.head}: an engine step scheduled {peak} requests (max_num_seqs={seqs})"
    if not req.waited:
        return f"{ev.head}: every request was scheduled in the run's first step (none waited)"
    return None


def _async_unavailable(ev: Evidence) -> str | None:
    if ev.device == "cpu" and ev.effective.get("async_scheduling") is False:
        return (
            "vLLM's CPU platform turns async scheduling off for every model "
            "(vllm/platforms/cpu.py, CpuPlatform.check_and_update_config: "
            "scheduler_config.async_scheduling = False, 'async scheduling is not required on "
            "CPU'); asked for async_scheduling=True, the engine ran with False and no batch "
            "queue. It runs on a GPU (ci/gpu-check)"
        )
    return None


def _async(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    if eff.get("async_scheduling") is not True:
        return f"{ev.head}: the engine ran with async_scheduling={eff.get('async_scheduling')}"
    if req.queued_steps is None:
        return ev.untraced
    if not req.batch_queue_size or not req.queued_steps:
        return (
            f"{ev.head}: the engine core took {req.queued_steps} steps through a batch "
            f"queue of size {req.batch_queue_size} (async scheduling steps through one)"
        )
    return None


def _sync(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    if eff.get("async_scheduling") is not False or req.batch_queue_size:
        return (
            f"{ev.head}: async_scheduling={eff.get('async_scheduling')}, batch queue of size "
            f"{req.batch_queue_size}"
        )
    return None


def _compiled(ev: Evidence) -> str | None:
    eff = ev.effective
    mode = eff.get("compilation_mode")
    if eff.get("enforce_eager") is not False or mode in (None, "NONE"):
        return (
            f"{ev.head}: the engine ran with enforce_eager={eff.get('enforce_eager')}, "
            f"compilation mode {mode}"
        )
    return None


def _parallel(setting: str, chunked: bool) -> Proof:
    """The model split over 2 devices (`setting` = 2 in the effective config); with `chunked`,
    prompts also split across engine steps (vllm#56666: pipeline parallel with chunked
    requests)."""

    def proof(ev: Evidence) -> str | None:
        size = ev.effective.get(setting)
        if size != 2:
            return f"{ev.head}: the engine ran with {setting}={size}"
        return _chunked(ev) if chunked else None

    return proof


def _prefix_cached(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    if eff.get("enable_prefix_caching") is not True:
        setting = eff.get("enable_prefix_caching")
        return f"{ev.head}: the engine ran with enable_prefix_caching={setting}"
    if not req.cached_tokens:
        lengths = f"{req.min_prompt_tokens}-{req.max_prompt_tokens}"
        return (
            f"{ev.head}: the second pass read {req.cached_tokens} tokens from the "
            f"prefix cache (prompts of {lengths} tokens, KV block {eff.get('block_size')}): "
            f"a prompt shorter than a block cannot hit the cache"
        )
    return None


def _no_prefix_cache(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    if eff.get("enable_prefix_caching") is not False or req.cached_tokens:
        return (
            f"{ev.head}: enable_prefix_caching={eff.get('enable_prefix_caching')}, "
            f"{req.cached_tokens} tokens read from the cache"
        )
    return None


def _concurrent(ev: Evidence) -> str | None:
    peak = ev.requests.peak_in_flight
    if peak is None or peak < 2:
        return f"{ev.head}: at most {peak} requests were in flight at once (more than one needed)"
    return _server_batching_unproven(ev)


def _server_batching_unproven(ev: Evidence) -> str | None:
    """Requests in flight at once are the client's doing; that the server ran them together is
    read from its /metrics: more requests finished than engine steps ran during the case means
    some step held two or more (each finished request is counted in exactly one step)."""
    server = ev.requests.server_metrics or ServerMetrics()
    if server.error:
        return f"{ev.unproven}: the server's /metrics could not be read ({server.error})"
    steps, done = server.engine_steps, server.requests_finished
    if steps is None or done is None:
        return f"{ev.unproven}: the server's /metrics has no engine-step or finished-request counts"
    if done <= steps:
        return (
            f"{ev.unproven}: the server finished {done} requests in {steps} engine steps, so no "
            f"step is known to have held more than one (the server may not have batched them)"
        )
    return None


def _sequential(ev: Evidence) -> str | None:
    peak = ev.requests.peak_in_flight
    if peak is None or peak != 1:
        return f"{ev.head}: at most {peak} requests were in flight at once (exactly one needed)"
    server = ev.requests.server_metrics or ServerMetrics()
    if (server.requests_finished or 0) > (server.engine_steps or 0) > 0:
        done, steps = server.requests_finished, server.engine_steps
        return (
            f"{ev.head}: one request was in flight at a time, yet the server finished "
            f"{done} requests in {steps} engine steps"
        )
    return None


# items per request of the chunked batching checks: 24-item input sets give 8 requests
BATCH_CHUNK = 3


def _batched(kind: str) -> Proof:
    """Several items per request (a list `input`), proven on both sides: the requests the harness
    sent (how many, how many items each, how many in flight), the server's own access log (as
    many `POST <endpoint>` answered 200 as the harness sent) and its /metrics (one engine request
    finished per item, so each HTTP request carried its items to the engine). `kind`: `all` (one
    request), `chunks` (BATCH_CHUNK items each, one at a time), `in_flight` (chunks, several
    outstanding at once), `query` (/score: one request per query with its documents, 1:N)."""

    def proof(ev: Evidence) -> str | None:
        b = ev.requests.batching
        if not b:
            return f"{ev.unproven}: the runner recorded no batched requests"
        sizes, endpoint = b.items_per_request or [], b.endpoint
        sent, items = len(sizes), sum(sizes)
        logged = b.server_log_requests
        if logged is None:
            why = b.server_log_error
            return f"{ev.unproven}: the server's access log could not be read ({why})"
        if logged != sent:
            return (
                f"{ev.unproven}: the harness sent {sent} requests to {endpoint}, the server's "
                f"access log shows {logged} answered"
            )
        server = ev.requests.server_metrics or ServerMetrics()
        if server.error:
            return f"{ev.unproven}: the server's /metrics could not be read ({server.error})"
        done = server.requests_finished
        if done != items:
            return (
                f"{ev.unproven}: the server finished {done} engine requests for the {items} "
                f"items of {sent} HTTP requests (one per item expected)"
            )
        peak = ev.requests.peak_in_flight
        if kind == "query" and (sent < 2 or max(sizes) < 2):
            return (
                f"{ev.head}: requests of {sizes} pairs (one per query, some with several "
                f"documents, needed)"
            )
        if kind == "all" and (sent != 1 or items < 2):
            return f"{ev.head}: {sent} requests of {sizes} items (one request of all needed)"
        if kind in ("chunks", "in_flight"):
            if sent < 2 or max(sizes) != BATCH_CHUNK:
                return (
                    f"{ev.head}: requests of {sizes} items (several requests of at most "
                    f"{BATCH_CHUNK}, some full, needed)"
                )
            if kind == "chunks" and peak != 1:
                return f"{ev.head}: {peak} requests were in flight at once (one at a time needed)"
            if kind == "in_flight" and (peak is None or peak < 2):
                return f"{ev.head}: at most {peak} requests were in flight at once (2+ needed)"
        return None

    return proof


CHECKS: dict[str, InvarianceCheck] = {
    c.name: c
    for c in (
        InvarianceCheck(
            "shuffle",
            "request order permuted with a seeded generator, restored after (scheduling bugs); "
            "proof: the scheduler received them in an order that is not the input order",
            ENGINE_RUNNERS,
            _shuffled,
            run_options={"shuffle_seed": "{seed}"},
        ),
        InvarianceCheck(
            "one_by_one",
            "one request at a time versus the batch (padding/masking/batch-invariance bugs); "
            "proof: every engine step scheduled one request",
            ENGINE_RUNNERS,
            _one_by_one,
            run_options={"one_by_one": True},
        ),
        # both prefill checks run under a small per-step token budget, where the base run holds
        # every prompt in one 4096-token step. vLLM wants max_num_batched_tokens >= max_model_len
        # without chunking, hence 64-token prompts at most there.
        InvarianceCheck(
            "chunked_prefill",
            "prompts split into 16-token pieces; proof: a prompt scheduled over several steps",
            ENGINE_RUNNERS,
            _chunked,
            engine={
                "enable_chunked_prefill": True,
                "max_num_batched_tokens": 16,
                "max_num_seqs": 16,
            },
        ),
        InvarianceCheck(
            "no_chunked_prefill",
            "prompts that do not fit a step wait whole for a later one; proof: more tokens than "
            "one step holds, none split",
            ENGINE_RUNNERS,
            _unchunked,
            engine={
                "enable_chunked_prefill": False,
                "max_model_len": 64,
                "max_num_batched_tokens": 64,
                "max_num_seqs": 16,
            },
        ),
        # prompts at max_model_len (128) in 32-token steps: 4 chunks or more each, and a short
        # prompt fills what the last chunk leaves of a step (vllm#48214: buffers across steps)
        InvarianceCheck(
            "deep_chunked_prefill",
            f"prompts at max_model_len in >= {DEEP_CHUNKS} chunks, mixed with short ones in one "
            "batch; proof: the longest prompt took that many steps and shared one with a short "
            "prompt",
            ENGINE_RUNNERS,
            _deep_chunked,
            engine={
                "enable_chunked_prefill": True,
                "max_model_len": 128,
                "max_num_batched_tokens": 32,
                "max_num_seqs": 16,
            },
        ),
        InvarianceCheck(
            "tiled",
            "at most 2 requests per engine step: the batch is tiled and the rest wait; proof: "
            "no step scheduled more than max_num_seqs and some request waited",
            ENGINE_RUNNERS,
            _tiled,
            engine={"max_num_seqs": 2},
        ),
        # vLLM turns async scheduling off by default for pooling models and always on CPU
        InvarianceCheck(
            "async_scheduling",
            "the engine core schedules the next batch while the model runs this one; proof: "
            "async_scheduling on and steps taken through the engine core's batch queue",
            ENGINE_RUNNERS,
            _async,
            engine={"async_scheduling": True},
            unavailable=_async_unavailable,
        ),
        InvarianceCheck(
            "no_async_scheduling",
            "async scheduling off (vLLM's default for pooling models); proof: the engine ran "
            "without it and without a batch queue",
            ENGINE_RUNNERS,
            _sync,
            engine={"async_scheduling": False},
        ),
        # the harness runs eager on CPU (PARITY_ENFORCE_EAGER on GPU); vLLM's CPU platform
        # compiles with Dynamo traced once and Inductor (~2 min per engine start on 2 cores)
        InvarianceCheck(
            "compiled",
            "the model compiled (torch.compile through vLLM) versus the eager base run; proof: "
            "enforce_eager off and a compilation mode other than NONE",
            ENGINE_RUNNERS,
            _compiled,
            engine={"enforce_eager": False},
        ),
        # two devices: vLLM's CPU backend does not start these on a 2-core machine (measured),
        # so they run in matrices/gpu-modes.yaml on 2 GPUs (ci/gpu-check --multi-gpu)
        InvarianceCheck(
            "tensor_parallel_2",
            "attention heads and MLP split over 2 devices; proof: tensor_parallel_size 2",
            ENGINE_RUNNERS,
            _parallel("tensor_parallel_size", chunked=False),
            engine={"tensor_parallel_size": 2},
        ),
        InvarianceCheck(
            "pipeline_parallel_2",
            "layers split over 2 devices, prompts chunked into 16-token steps (vllm#56666); "
            "proof: pipeline_parallel_size 2 and a prompt scheduled over several steps",
            ENGINE_RUNNERS,
            _parallel("pipeline_parallel_size", chunked=True),
            engine={
                "pipeline_parallel_size": 2,
                "enable_chunked_prefill": True,
                "max_num_batched_tokens": 16,
                "max_num_seqs": 16,
            },
        ),
        # only whole KV blocks are cached and CPU blocks hold 128 tokens: 32-token blocks (the
        # CPU minimum) let short prompts hit
        InvarianceCheck(
            "prefix_cache",
            "the same requests twice: the second pass reads the prefix cache the first one "
            "filled; proof: tokens read from the cache",
            ENGINE_RUNNERS,
            _prefix_cached,
            engine={"enable_prefix_caching": True, "block_size": 32},
            run_options={"warm_prefix_cache": True},
        ),
        InvarianceCheck(
            "no_prefix_cache",
            "prefix caching off; proof: the engine ran without it and read nothing from a cache",
            ENGINE_RUNNERS,
            _no_prefix_cache,
            engine={"enable_prefix_caching": False},
        ),
        # checks of the server runners: request options (ServeOptions), not engine settings. The
        # runner records the peak number of requests in flight
        InvarianceCheck(
            "concurrent",
            "many requests in flight at once, each held to the reference; proof: the server's "
            "own counts show it ran some of them in one engine step",
            SERVE_RUNNERS,
            _concurrent,
            serve={"max_in_flight": 16},
        ),
        InvarianceCheck(
            "sequential",
            "one request in flight at a time; proof: the peak in flight was one and the server "
            "did not finish more requests than it ran engine steps",
            SERVE_RUNNERS,
            _sequential,
            serve={"max_in_flight": 1},
        ),
        # batched requests (issue #26): OpenAI-style clients send many inputs in one request; the
        # answers are matched to them by `index`, never by position
        InvarianceCheck(
            "batched_all",
            "every item in one request (a list `input`); proof: one request sent, one logged by "
            "the server's access log, one engine request finished per item",
            SERVE_RUNNERS,
            _batched("all"),
            serve={"items_per_request": "all", "max_in_flight": 1},
        ),
        InvarianceCheck(
            "batched_chunks",
            f"requests of {BATCH_CHUNK} items, one at a time; proof: as many requests sent as the "
            "server's access log answered, one in flight, one engine request per item",
            SERVE_RUNNERS,
            _batched("chunks"),
            serve={"items_per_request": BATCH_CHUNK, "max_in_flight": 1},
        ),
        InvarianceCheck(
            "batched_in_flight",
            f"requests of {BATCH_CHUNK} items, several in flight at once; proof: as "
            "batched_chunks, with two or more requests outstanding together",
            SERVE_RUNNERS,
            _batched("in_flight"),
            serve={"items_per_request": BATCH_CHUNK, "max_in_flight": 16},
        ),
        # /score's shapes (issue #26): text_1 one query and text_2 its documents (1:N, the
        # answer's index is the document's), and text_1 and text_2 lists of the pairs (N:N)
        InvarianceCheck(
            "score_one_to_many",
            "/score with each query and all its documents (text_1 a text, text_2 a list); "
            "proof: one request per query, some with several documents, as many logged by the "
            "server, one engine request per pair",
            SERVE_RUNNERS,
            _batched("query"),
            serve={"items_per_request": "query", "max_in_flight": 16},
        ),
        InvarianceCheck(
            "score_many_to_many",
            "/score with every pair in one request (text_1 and text_2 lists, pair k their k-th "
            "texts); proof: one request, logged by the server, one engine request per pair",
            SERVE_RUNNERS,
            _batched("all"),
            serve={"items_per_request": "all", "max_in_flight": 1},
        ),
    )
}


def runners_of(check: str) -> tuple[str, ...]:
    """The runners a check can run on."""
    return CHECKS[check].runners


def misfit_checks(case) -> list[str]:
    """Why each of a case's checks (harness.matrix.schema.Case) would run on none of its runners
    (a matrix error: a derived case without runners would be dropped silently)."""
    return [
        f"check {check!r} runs on {', '.join(runners_of(check))}, none of which the case runs "
        f"(runners: {', '.join(case.runners)}): add one of them or remove the check"
        for check in case.checks
        if not set(runners_of(check)) & set(case.runners)
    ]


def expand_checks(cases: list, seed: int = 0) -> list:
    """The cases (harness.matrix.schema.Case) plus one derived case per (case, check); derived
    ids sort right after their base."""
    out: list = []
    for case in cases:
        out.append(case)
        for name in case.checks:
            check = CHECKS[name]
            out.append(
                case.model_copy(
                    update={
                        "id": f"{case.id}@{name}",
                        "runners": [r for r in case.runners if r in check.runners],
                        "engine": {**case.engine, **check.engine},
                        "request": case.request.model_copy(
                            update={"serve": case.request.serve.model_copy(update=check.serve)}
                        ),
                        "run_options": {**case.run_options, **check.options_for(seed)},
                        "variant_of": case.id,
                        "check": name,
                        "checks": [],
                        "divergence": case.divergence,
                    }
                )
            )
    return out
