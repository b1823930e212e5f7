"""What a case may ask of the AsyncLLM runners (`vllm-async-*`) and of several tasks in flight
on one model (`request.also_in_flight`), checked when the matrix loads (raised as ValueError: the
loader names the case's file and line)."""

from __future__ import annotations

from typing import Any

from harness.matrix.runner_names import runner_info

# the case tasks AsyncLLM.encode serves (harness.runners.vllm_async): vLLM 0.32's AsyncLLM has no
# score API (its server pairs the texts in an IO processor of its own) and no combined task
# without an IO-processor plugin
ASYNC_TASKS = ("embed", "classify", "token_classify", "token_embed", "reward", "step_reward")


def check_in_flight(case: Any) -> None:
    """AsyncLLM runners only on the tasks they send; `also_in_flight` only where vLLM serves
    several tasks of one model at once (AsyncLLM, the server), never naming the case's own."""
    asyncs = [r for r in case.runners if runner_info(r).is_async]
    if asyncs and case.task not in ASYNC_TASKS:
        raise ValueError(
            f"task {case.task!r} on {', '.join(asyncs)}: vLLM's AsyncLLM has no API for it "
            f"(tasks: {', '.join(ASYNC_TASKS)}); a score case runs on the offline and server "
            f"runners"
        )
    also = case.request.also_in_flight
    if not also:
        return
    if case.task in also or len(set(also)) != len(also):
        raise ValueError(
            f"also_in_flight {also}: other tasks than the case's own ({case.task!r}), each once"
        )
    offline = [r for r in case.runners if runner_info(r).is_offline_vllm]
    if offline:
        raise ValueError(
            f"also_in_flight on {', '.join(offline)}: vLLM's offline LLM serves one pooling task "
            f"per engine (LLM.encode refuses another); use hf with vllm-async-* or vllm-serve-*"
        )
