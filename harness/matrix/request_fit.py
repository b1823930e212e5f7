"""Where a case's request options, server options and expected refusal fit its task, prompt
form and runners, checked when the matrix loads (raised as ValueError: the loader names the
case's file and line)."""

from __future__ import annotations

from typing import Any

from harness.matrix.runner_names import REFERENCE_RUNNER

# the tasks whose post-processing vLLM 0.32 lets a user turn on or off (`use_activation`)
ACTIVATION_TASKS = ("embed", "classify", "token_embed", "token_classify", "reward")


def check_serve_api(case: Any) -> None:
    """The server options (`request.serve`, the checks' batching) where the task takes them."""
    if case.request.serve.api == "rerank" and case.task != "score":
        raise ValueError(f"serve.api 'rerank' needs task 'score', not {case.task!r}")
    if case.request.serve.api == "pooling" and case.task not in ("embed", "classify"):
        raise ValueError(
            f"serve.api 'pooling' applies to tasks 'embed' and 'classify' (the other pooling "
            f"tasks go to /pooling already), not {case.task!r}"
        )
    if case.request.serve.api == "pooling" and (
        case.request.serve.encoding_format != "float" or case.request.prompt_name is not None
    ):
        raise ValueError(
            "serve.api 'pooling' sends float answers without prompt_name (/v2/embed's)"
        )
    if case.request.serve.top_n is not None and case.request.serve.api != "rerank":
        raise ValueError("serve.top_n applies to serve.api 'rerank' only")
    fmt = case.request.serve.encoding_format
    if fmt != "float" and case.task != "embed":
        raise ValueError(
            f"serve.encoding_format {fmt!r} applies to task 'embed' only (/v1/embeddings), "
            f"not {case.task!r}"
        )
    if case.request.dimensions is not None and case.task != "embed":
        raise ValueError(f"dimensions applies to task 'embed' only, not {case.task!r}")
    from harness.matrix.checks import CHECKS

    asked = [(f"check {c!r}", CHECKS[c].serve.get("items_per_request", 1)) for c in case.checks]
    asked.append(("serve.items_per_request", case.request.serve.items_per_request))
    for what, per in asked:
        if per == 1:
            continue
        if case.task not in ("embed", "classify", "score"):
            raise ValueError(
                f"{what} applies to tasks 'embed', 'classify' (a list `input` on "
                f"/v1/embeddings and /classify) and 'score' (/score), not {case.task!r}"
            )
        if per == "query" and case.task != "score":
            raise ValueError(
                f"{what}: items_per_request 'query' (each query with its documents, 1:N) "
                f"applies to task 'score' only, not {case.task!r}"
            )
        if case.request.serve.api != "default":
            raise ValueError(
                f"{what} applies to /v1/embeddings, /classify and /score, not serve.api "
                f"{case.request.serve.api!r}"
            )


def check_request(case: Any) -> None:
    """The request options (and an expected refusal) where the task and form take them."""
    caps = list(case.request.text_caps())
    if caps:
        if case.task != "score":
            raise ValueError(f"{', '.join(caps)} applies to task 'score' only, not {case.task!r}")
    if case.request.truncation_side is not None and case.request.truncate is None:
        raise ValueError("truncation_side needs truncate (the number of tokens to keep)")
    if case.expect is not None:
        if REFERENCE_RUNNER in case.runners:
            raise ValueError(
                f"expect.refused: the reference of a refusal case is the refusal rule, not "
                f"{REFERENCE_RUNNER}; list only vLLM runners, e.g. runners: [vllm-v1, vllm-v2]"
            )
        if case.checks:
            raise ValueError("expect.refused: a refusal case takes no checks")
        div = case.divergence
        if div is not None and not (div.accepted or div.error_match is not None):
            raise ValueError(
                "expect.refused: a refusal case's divergence is `accepted: true` (the runner "
                "answers what it must refuse) or `error_match` (it refuses with another "
                "error); it has no outputs to bound"
            )
    elif case.divergence is not None and case.divergence.accepted:
        raise ValueError("divergence.accepted records a refusal not made: it needs expect.refused")
    if case.request.prompt_name is not None and (
        case.task != "embed" or case.prompt_form != "text"
    ):
        raise ValueError(
            f"prompt_name applies to task 'embed' sent as text only, not task {case.task!r} "
            f"with prompt_form {case.prompt_form!r}"
        )
    if case.request.instruction is not None and (
        case.task != "embed"
        or case.prompt_form != "text"
        or case.request.prompt_name is not None
        or case.request.chat is not None
    ):
        raise ValueError(
            f"instruction applies to task 'embed' sent as text, without prompt_name or "
            f"chat, not task {case.task!r} with prompt_form {case.prompt_form!r}"
        )
    reference_activation = case.hf.get("use_activation")
    if (
        case.request.use_activation is not None or reference_activation is not None
    ) and case.task not in ACTIVATION_TASKS:
        raise ValueError(
            f"use_activation applies to tasks {', '.join(ACTIVATION_TASKS)}, not {case.task!r}"
        )
    if case.request.use_activation is not None and reference_activation is not None:
        raise ValueError(
            "use_activation is sent per request and the reference follows it: drop "
            "hf.use_activation (that one is for an engine-wide pooler_config setting)"
        )
    if case.request.score_template is not None and case.task != "score":
        raise ValueError(
            f"score_template applies to task 'score' (LLM.score's chat_template; a server's "
            f"--chat-template), not {case.task!r}"
        )
    if case.request.score_template_kwargs is not None and case.request.score_template is None:
        raise ValueError(
            "score_template_kwargs are the variables of a score template: name the template "
            "(request score_template)"
        )
    if case.request.chat is not None and (
        case.task not in ("embed", "classify")
        or case.prompt_form != "text"
        or case.request.prompt_name is not None
    ):
        raise ValueError(
            "chat applies to tasks embed and classify sent as text, without prompt_name"
        )
