"""Invariance checks: variants of a case that real engines break and that must not change the
answer. Each check named in a case's `checks:` becomes a derived case `<id>@<check>` that runs
on the compared vLLM runners and is held to the same reference (HF's outputs of the base case)
and the same tolerances. vLLM has a separate test for each of these.

A check is one `InvarianceCheck` in `CHECKS`: the engine settings, run options and server request
options it asks for, the runners it applies to, and its proof of effect (why it did not take
effect, read from what the engine reported: harness.matrix.proofs). The matrix schema takes its
check names from here; harness.judge.verdict decides that a derived case must prove its check and
asks the check how.
This module imports nothing from the schema (the schema validates check names against CHECKS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.matrix.proofs import (
    BATCH_CHUNK,
    DEEP_CHUNKS,
    Proof,
    async_scheduled,
    async_unavailable,
    batched,
    chunked,
    compiled,
    concurrent,
    deep_chunked,
    no_prefix_cache,
    one_by_one,
    parallel,
    prefix_cached,
    sequential,
    shuffled,
    sync_scheduled,
    tiled,
    unchunked,
)
from harness.matrix.runner_names import RUNNER_NAMES, runner_info


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


CHECKS: dict[str, InvarianceCheck] = {
    c.name: c
    for c in (
        InvarianceCheck(
            "shuffle",
            "request order permuted with a seeded generator, restored after (scheduling bugs); "
            "proof: the scheduler received them in an order that is not the input order",
            ENGINE_RUNNERS,
            shuffled,
            run_options={"shuffle_seed": "{seed}"},
        ),
        InvarianceCheck(
            "one_by_one",
            "one request at a time versus the batch (padding/masking/batch-invariance bugs); "
            "proof: every engine step scheduled one request",
            ENGINE_RUNNERS,
            one_by_one,
            run_options={"one_by_one": True},
        ),
        # both prefill checks run under a small per-step token budget, where the base run holds
        # every prompt in one 4096-token step. vLLM wants max_num_batched_tokens >= max_model_len
        # without chunking, hence 64-token prompts at most there.
        InvarianceCheck(
            "chunked_prefill",
            "prompts split into 16-token pieces; proof: a prompt scheduled over several steps",
            ENGINE_RUNNERS,
            chunked,
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
            unchunked,
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
            deep_chunked,
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
            tiled,
            engine={"max_num_seqs": 2},
        ),
        # vLLM turns async scheduling off by default for pooling models and always on CPU
        InvarianceCheck(
            "async_scheduling",
            "the engine core schedules the next batch while the model runs this one; proof: "
            "async_scheduling on and steps taken through the engine core's batch queue",
            ENGINE_RUNNERS,
            async_scheduled,
            engine={"async_scheduling": True},
            unavailable=async_unavailable,
        ),
        InvarianceCheck(
            "no_async_scheduling",
            "async scheduling off (vLLM's default for pooling models); proof: the engine ran "
            "without it and without a batch queue",
            ENGINE_RUNNERS,
            sync_scheduled,
            engine={"async_scheduling": False},
        ),
        # the harness runs eager on CPU (PARITY_ENFORCE_EAGER on GPU); vLLM's CPU platform
        # compiles with Dynamo traced once and Inductor (~2 min per engine start on 2 cores)
        InvarianceCheck(
            "compiled",
            "the model compiled (torch.compile through vLLM) versus the eager base run; proof: "
            "enforce_eager off and a compilation mode other than NONE",
            ENGINE_RUNNERS,
            compiled,
            engine={"enforce_eager": False},
        ),
        # two devices: vLLM's CPU backend does not start these on a 2-core machine (measured),
        # so they run in matrices/gpu-modes.yaml on 2 GPUs (ci/gpu-check --multi-gpu)
        InvarianceCheck(
            "tensor_parallel_2",
            "attention heads and MLP split over 2 devices; proof: tensor_parallel_size 2",
            ENGINE_RUNNERS,
            parallel("tensor_parallel_size", chunks=False),
            engine={"tensor_parallel_size": 2},
        ),
        InvarianceCheck(
            "pipeline_parallel_2",
            "layers split over 2 devices, prompts chunked into 16-token steps (vllm#56666); "
            "proof: pipeline_parallel_size 2 and a prompt scheduled over several steps",
            ENGINE_RUNNERS,
            parallel("pipeline_parallel_size", chunks=True),
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
            prefix_cached,
            engine={"enable_prefix_caching": True, "block_size": 32},
            run_options={"warm_prefix_cache": True},
        ),
        InvarianceCheck(
            "no_prefix_cache",
            "prefix caching off; proof: the engine ran without it and read nothing from a cache",
            ENGINE_RUNNERS,
            no_prefix_cache,
            engine={"enable_prefix_caching": False},
        ),
        # checks of the server runners: request options (ServeOptions), not engine settings. The
        # runner records the peak number of requests in flight
        InvarianceCheck(
            "concurrent",
            "many requests in flight at once, each held to the reference; proof: the server's "
            "own counts show it ran some of them in one engine step",
            SERVE_RUNNERS,
            concurrent,
            serve={"max_in_flight": 16},
        ),
        InvarianceCheck(
            "sequential",
            "one request in flight at a time; proof: the peak in flight was one and the server "
            "did not finish more requests than it ran engine steps",
            SERVE_RUNNERS,
            sequential,
            serve={"max_in_flight": 1},
        ),
        # batched requests (issue #26): OpenAI-style clients send many inputs in one request; the
        # answers are matched to them by `index`, never by position
        InvarianceCheck(
            "batched_all",
            "every item in one request (a list `input`); proof: one request sent, one logged by "
            "the server's access log, one engine request finished per item",
            SERVE_RUNNERS,
            batched("all"),
            serve={"items_per_request": "all", "max_in_flight": 1},
        ),
        InvarianceCheck(
            "batched_chunks",
            f"requests of {BATCH_CHUNK} items, one at a time; proof: as many requests sent as the "
            "server's access log answered, one in flight, one engine request per item",
            SERVE_RUNNERS,
            batched("chunks"),
            serve={"items_per_request": BATCH_CHUNK, "max_in_flight": 1},
        ),
        InvarianceCheck(
            "batched_in_flight",
            f"requests of {BATCH_CHUNK} items, several in flight at once; proof: as "
            "batched_chunks, with two or more requests outstanding together",
            SERVE_RUNNERS,
            batched("in_flight"),
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
            batched("query"),
            serve={"items_per_request": "query", "max_in_flight": 16},
        ),
        InvarianceCheck(
            "score_many_to_many",
            "/score with every pair in one request (text_1 and text_2 lists, pair k their k-th "
            "texts); proof: one request, logged by the server, one engine request per pair",
            SERVE_RUNNERS,
            batched("all"),
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
