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

from harness.matrix.runner_names import RUNNER_NAMES, runner_info


@dataclass(frozen=True)
class Evidence:
    """What a runner reported about a derived case's run (its outcome's `info`): the engine's
    effective settings, per request the prompt lengths, prefix-cache hits and what the scheduler
    did (harness.runners.engine_trace) and, for a server, its own metrics."""

    check: str
    effective: dict
    requests: dict
    engine_trace: dict

    @classmethod
    def of(cls, check: str, info: dict) -> Evidence:
        return cls(
            check,
            info.get("effective") or {},
            info.get("requests") or {},
            info.get("engine_trace") or {},
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

    def options_for(self, seed: int) -> dict[str, Any]:
        return {k: (seed if v == "{seed}" else v) for k, v in self.run_options.items()}


# engine settings need the offline engine with V1/V2 asked for explicitly; request patterns of
# the server need a server runner
ENGINE_RUNNERS = tuple(
    n for n in RUNNER_NAMES if runner_info(n).is_offline_vllm and runner_info(n).variant != "auto"
)
SERVE_RUNNERS = tuple(n for n in RUNNER_NAMES if runner_info(n).is_server)


def _shuffled(ev: Evidence) -> str | None:
    order = ev.requests.get("arrival_order")
    if order is None:
        return ev.untraced
    if order == sorted(order):
        return (
            f"{ev.head}: vLLM's scheduler received the {len(order)} requests in input order "
            f"(the permutation is the identity), as in the base run"
        )
    return None


def _one_by_one(ev: Evidence) -> str | None:
    peak, count = ev.requests.get("peak_batch"), ev.requests.get("count")
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
    chunk, longest = eff.get("max_num_batched_tokens"), req.get("max_prompt_tokens")
    if eff.get("enable_chunked_prefill") is not True:
        setting = eff.get("enable_chunked_prefill")
        return f"{ev.head}: the engine ran with enable_chunked_prefill={setting}"
    if req.get("split_prompts") is None:
        return ev.untraced
    if not req["split_prompts"]:
        return (
            f"{ev.head}: vLLM's scheduler split no prompt across engine steps (longest prompt "
            f"{longest} tokens, {chunk}-token steps); use longer inputs or a smaller "
            f"max_num_batched_tokens"
        )
    return None


def _unchunked(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    budget, tokens = eff.get("max_num_batched_tokens"), req.get("tokens_scheduled")
    if eff.get("enable_chunked_prefill") is not False:
        setting = eff.get("enable_chunked_prefill")
        return f"{ev.head}: the engine ran with enable_chunked_prefill={setting}"
    if req.get("split_prompts") is None:
        return ev.untraced
    if req["split_prompts"]:
        split = req["split_prompts"]
        return f"{ev.head}: vLLM's scheduler split {split} prompt(s) across engine steps"
    if budget is None or tokens <= budget:
        return (
            f"{ev.head}: all {tokens} prompt tokens fit one {budget}-token step, so no "
            f"prompt had to wait for a later step instead of being split (as in the base "
            f"run); use more inputs or a smaller max_num_batched_tokens"
        )
    return None


def _prefix_cached(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    if eff.get("enable_prefix_caching") is not True:
        setting = eff.get("enable_prefix_caching")
        return f"{ev.head}: the engine ran with enable_prefix_caching={setting}"
    if not req.get("cached_tokens"):
        lengths = f"{req.get('min_prompt_tokens')}-{req.get('max_prompt_tokens')}"
        return (
            f"{ev.head}: the second pass read {req.get('cached_tokens')} tokens from the "
            f"prefix cache (prompts of {lengths} tokens, KV block {eff.get('block_size')}): "
            f"a prompt shorter than a block cannot hit the cache"
        )
    return None


def _no_prefix_cache(ev: Evidence) -> str | None:
    eff, req = ev.effective, ev.requests
    if eff.get("enable_prefix_caching") is not False or req.get("cached_tokens"):
        return (
            f"{ev.head}: enable_prefix_caching={eff.get('enable_prefix_caching')}, "
            f"{req.get('cached_tokens')} tokens read from the cache"
        )
    return None


def _concurrent(ev: Evidence) -> str | None:
    peak = ev.requests.get("peak_in_flight")
    if peak is None or peak < 2:
        return f"{ev.head}: at most {peak} requests were in flight at once (more than one needed)"
    return _server_batching_unproven(ev)


def _server_batching_unproven(ev: Evidence) -> str | None:
    """Requests in flight at once are the client's doing; that the server ran them together is
    read from its /metrics: more requests finished than engine steps ran during the case means
    some step held two or more (each finished request is counted in exactly one step)."""
    server = ev.requests.get("server_metrics") or {}
    if server.get("error"):
        return f"{ev.unproven}: the server's /metrics could not be read ({server['error']})"
    steps, done = server.get("engine_steps"), server.get("requests_finished")
    if steps is None or done is None:
        return f"{ev.unproven}: the server's /metrics has no engine-step or finished-request counts"
    if done <= steps:
        return (
            f"{ev.unproven}: the server finished {done} requests in {steps} engine steps, so no "
            f"step is known to have held more than one (the server may not have batched them)"
        )
    return None


def _sequential(ev: Evidence) -> str | None:
    peak = ev.requests.get("peak_in_flight")
    if peak is None or peak != 1:
        return f"{ev.head}: at most {peak} requests were in flight at once (exactly one needed)"
    server = ev.requests.get("server_metrics") or {}
    if (server.get("requests_finished") or 0) > (server.get("engine_steps") or 0) > 0:
        done, steps = server["requests_finished"], server["engine_steps"]
        return (
            f"{ev.head}: one request was in flight at a time, yet the server finished "
            f"{done} requests in {steps} engine steps"
        )
    return None


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
                        "serve": case.serve.model_copy(update=check.serve),
                        "run_options": {**case.run_options, **check.options_for(seed)},
                        "variant_of": case.id,
                        "check": name,
                        "checks": [],
                        "divergence": case.divergence,
                    }
                )
            )
    return out
