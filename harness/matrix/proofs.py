"""The proofs of effect of the invariance checks (harness.matrix.checks): each reads what a runner
reported about a derived case's run (`Evidence`) and says why its check did not take effect, or
None when it did. A proof names what it found and what was needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from harness.matrix.evidence import RequestsEvidence, ServerMetrics


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


def shuffled(ev: Evidence) -> str | None:
    order = ev.requests.arrival_order
    if order is None:
        return ev.untraced
    if order == sorted(order):
        return (
            f"{ev.head}: vLLM's scheduler received the {len(order)} requests in input order "
            f"(the permutation is the identity), as in the base run"
        )
    return None


def one_by_one(ev: Evidence) -> str | None:
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


def chunked(ev: Evidence) -> str | None:
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


def unchunked(ev: Evidence) -> str | None:
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


def deep_chunked(ev: Evidence) -> str | None:
    """At least DEEP_CHUNKS steps for a prompt at max_model_len, which shared a step with a
    short prompt scheduled whole (long and short prompts chunked together in one batch)."""
    eff, req = ev.effective, ev.requests
    wrong = chunked(ev)
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


def tiled(ev: Evidence) -> str | None:
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


def async_unavailable(ev: Evidence) -> str | None:
    if ev.device == "cpu" and ev.effective.get("async_scheduling") is False:
        return (
            "vLLM's CPU platform turns async scheduling off for every model "
            "(vllm/platforms/cpu.py, CpuPlatform.check_and_update_config: "
            "scheduler_config.async_scheduling = False, 'async scheduling is not required on "
            "CPU'); asked for async_scheduling=True, the engine ran with False and no batch "
            "queue. It runs on a GPU (ci/gpu-check)"
        )
    return None


def async_scheduled(ev: Evidence) -> str | None:
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


def sync_scheduled(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    if eff.get("async_scheduling") is not False or req.batch_queue_size:
        return (
            f"{ev.head}: async_scheduling={eff.get('async_scheduling')}, batch queue of size "
            f"{req.batch_queue_size}"
        )
    return None


def compiled(ev: Evidence) -> str | None:
    eff = ev.effective
    mode = eff.get("compilation_mode")
    if eff.get("enforce_eager") is not False or mode in (None, "NONE"):
        return (
            f"{ev.head}: the engine ran with enforce_eager={eff.get('enforce_eager')}, "
            f"compilation mode {mode}"
        )
    return None


def parallel(setting: str, chunks: bool) -> Proof:
    """The model split over 2 devices (`setting` = 2 in the effective config); with `chunks`,
    prompts also split across engine steps (vllm#56666: pipeline parallel with chunked
    requests)."""

    def proof(ev: Evidence) -> str | None:
        size = ev.effective.get(setting)
        if size != 2:
            return f"{ev.head}: the engine ran with {setting}={size}"
        return chunked(ev) if chunks else None

    return proof


def prefix_cached(ev: Evidence) -> str | None:
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


def no_prefix_cache(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    if eff.get("enable_prefix_caching") is not False or req.cached_tokens:
        return (
            f"{ev.head}: enable_prefix_caching={eff.get('enable_prefix_caching')}, "
            f"{req.cached_tokens} tokens read from the cache"
        )
    return None


def concurrent(ev: Evidence) -> str | None:
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


def sequential(ev: Evidence) -> str | None:
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


def batched(kind: str) -> Proof:
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
