"""Invariance checks: variants of a case that real engines break and that must not change the
answer. Each check named in a case's `checks:` becomes a derived case `<id>@<check>` that runs
on the compared vLLM runners and is held to the same reference (HF's outputs of the base case)
and the same tolerances. vLLM has a separate test for each of these."""

from __future__ import annotations

from typing import get_args

from harness.matrix.schema import Case, CheckName

CHECKS: tuple[str, ...] = get_args(CheckName)

# check -> (engine kwargs, run options); {seed} is filled with the run's shuffle seed
_VARIANTS: dict[str, tuple[dict, dict]] = {
    # request order permuted with a seeded generator, restored after (scheduling bugs); proof:
    # the scheduler received them in an order that is not the input order
    "shuffle": ({}, {"shuffle_seed": "{seed}"}),
    # one request at a time versus the batch (padding/masking/batch-invariance bugs); proof:
    # every engine step scheduled one request
    "one_by_one": ({}, {"one_by_one": True}),
    # both under a small per-step token budget, where the base run holds every prompt in one
    # 4096-token step: chunked, prompts are split into 16-token pieces (proof: a prompt scheduled
    # over several steps); unchunked, prompts that do not fit wait whole for a later step (proof:
    # more tokens than one step holds, none split). vLLM wants max_num_batched_tokens >=
    # max_model_len without chunking, hence 64-token prompts at most there.
    "chunked_prefill": (
        {"enable_chunked_prefill": True, "max_num_batched_tokens": 16, "max_num_seqs": 16},
        {},
    ),
    "no_chunked_prefill": (
        {
            "enable_chunked_prefill": False,
            "max_model_len": 64,
            "max_num_batched_tokens": 64,
            "max_num_seqs": 16,
        },
        {},
    ),
    # the same requests twice: the second pass reads the prefix cache the first one filled. Only
    # whole KV blocks are cached and CPU blocks hold 128 tokens: 32-token blocks (the CPU minimum) let short prompts hit
    "prefix_cache": (
        {"enable_prefix_caching": True, "block_size": 32},
        {"warm_prefix_cache": True},
    ),
    "no_prefix_cache": ({"enable_prefix_caching": False}, {}),
}

# checks of the server runners: request options (ServeOptions) rather than engine settings
_SERVE_VARIANTS: dict[str, dict] = {
    # many requests in flight at once versus one at a time; each is held to the reference. The
    # runner records the peak number in flight, and for `concurrent` the server's own counts
    # prove that it ran some of them in one engine step (verdict.check_not_in_effect)
    "concurrent": {"max_in_flight": 16},
    "sequential": {"max_in_flight": 1},
}
SERVE_CHECKS: tuple[str, ...] = tuple(_SERVE_VARIANTS)
# the runners each kind of check runs on (a derived case keeps the base case's runners among these)
_ENGINE_RUNNERS = ("vllm-v1", "vllm-v2")
_SERVE_RUNNERS = ("vllm-serve-v1", "vllm-serve-v2", "vllm-serve-auto")


def runners_of(check: str) -> tuple[str, ...]:
    """The runners a check can run on: engine settings need the offline engine (V1/V2 asked for
    explicitly), request patterns of the server need a server runner."""
    return _SERVE_RUNNERS if check in SERVE_CHECKS else _ENGINE_RUNNERS


def misfit_checks(case: Case) -> list[str]:
    """Why each of a case's checks would run on none of its runners (a matrix error: a derived
    case without runners would be dropped silently)."""
    return [
        f"check {check!r} runs on {', '.join(runners_of(check))}, none of which the case runs "
        f"(runners: {', '.join(case.runners)}): add one of them or remove the check"
        for check in case.checks
        if not set(runners_of(check)) & set(case.runners)
    ]


def expand_checks(cases: list[Case], seed: int = 0) -> list[Case]:
    """The cases plus one derived case per (case, check); derived ids sort right after their base."""
    out: list[Case] = []
    for case in cases:
        out.append(case)
        for check in case.checks:
            engine, options = _VARIANTS.get(check, ({}, {}))
            options = {k: (seed if v == "{seed}" else v) for k, v in options.items()}
            serve = case.serve.model_copy(update=_SERVE_VARIANTS.get(check, {}))
            out.append(
                case.model_copy(
                    update={
                        "id": f"{case.id}@{check}",
                        "runners": [r for r in case.runners if r in runners_of(check)],
                        "engine": {**case.engine, **engine},
                        "serve": serve,
                        "run_options": {**case.run_options, **options},
                        "variant_of": case.id,
                        "checks": [],
                        "divergence": case.divergence,
                    }
                )
            )
    return out
