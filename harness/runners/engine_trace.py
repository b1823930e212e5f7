"""What vLLM's scheduler really did with a run's requests: the order they reached it and, per
engine step, which requests it scheduled and how many tokens of each. The proof of effect of the
invariance checks that change order, batching or chunking
(harness.judge.verdict.check_not_in_effect).

Read from the scheduler itself (its `add_request` and `schedule` calls), so it exists only when
the engine core runs in this process (the CPU default, VLLM_ENABLE_V1_MULTIPROCESSING=0); with
the engine core in another process the trace says why it is absent, and a check that needs it is
an error, never a pass."""

from __future__ import annotations

from typing import Any


class EngineTrace:
    def __init__(self, scheduler: Any | None, absent: str | None = None):
        self.scheduler = scheduler
        self.absent = absent  # why there is no trace
        self.arrivals: list[str] = []  # the engine's request ids, in the order it received them
        self.steps: list[dict[str, int]] = []  # per schedule() call: request id -> tokens scheduled
        # request id -> what the engine was handed (engine_input: text | token_ids | embeds)
        self.inputs: dict[str, dict[str, Any]] = {}
        if scheduler is not None:
            self._wrap(scheduler)

    def wrap_engine(self, engine: Any) -> None:
        """Record what the LLM entry point hands the engine per request (`LLMEngine.add_request`:
        a rendered text, bare token ids, or prompt embeddings with their digest): the proof that
        an item went as token ids or embeddings, not as text."""
        add = engine.add_request

        def traced_add(request_id, prompt, *a, **kw):
            self.inputs[str(request_id)] = engine_input(prompt)
            return add(request_id, prompt, *a, **kw)

        engine.add_request = traced_add

    def _wrap(self, scheduler: Any) -> None:
        add, schedule = scheduler.add_request, scheduler.schedule

        def traced_add(request, *a, **kw):
            self.arrivals.append(str(request.request_id))
            return add(request, *a, **kw)

        def traced_schedule(*a, **kw):
            out = schedule(*a, **kw)
            tokens = {str(k): int(v) for k, v in out.num_scheduled_tokens.items()}
            if tokens:  # an idle step schedules nothing
                self.steps.append(tokens)
            return out

        # instance attributes: the engine core calls self.scheduler.add_request / .schedule
        scheduler.add_request, scheduler.schedule = traced_add, traced_schedule

    def reset(self) -> None:
        self.arrivals, self.steps, self.inputs = [], [], {}

    def per_request(self, request_ids: list[str | None]) -> list[dict[str, Any]]:
        """For each request (the ids vLLM's outputs carry, in input order): its position in the
        engine's arrival order among these requests, and each step it was scheduled in as
        [step, tokens scheduled, requests in that step]. Empty dicts when there is no trace."""
        inputs = {rid.rsplit("-", 1)[0]: v for rid, v in self.inputs.items()}
        inputs.update(self.inputs)
        handed = [inputs.get(str(r), {}) if r is not None else {} for r in request_ids]
        if self.scheduler is None:
            return handed
        wanted = {str(r) for r in request_ids if r is not None}
        # the engine appends a random suffix to the caller's id ("17" -> "17-1a2b3c4d")
        own = {rid: (rid if rid in wanted else rid.rsplit("-", 1)[0]) for rid in self.arrivals}
        order = [own[rid] for rid in self.arrivals if own[rid] in wanted]
        rank = {rid: i for i, rid in enumerate(order)}
        scheduled: dict[str, list[list[int]]] = {}
        for step, tokens in enumerate(self.steps):
            for rid, n in tokens.items():
                ext = own.get(rid, rid)
                if ext in wanted:
                    scheduled.setdefault(ext, []).append([step, n, len(tokens)])
        return [
            {"engine_arrival": rank.get(str(r)), "scheduled": scheduled.get(str(r), []), **h}
            if r is not None
            else {}
            for r, h in zip(request_ids, handed)
        ]

    def as_info(self) -> dict[str, Any]:
        return {"traced": self.scheduler is not None, "absent": self.absent}


def engine_input(prompt: Any) -> dict[str, Any]:
    """What one request was handed to the engine as (vLLM's EngineInput after rendering): a
    text keeps its text beside the ids, token ids come bare, embeddings carry E."""
    if not isinstance(prompt, dict):
        return {"engine_input": f"unknown ({type(prompt).__name__})"}
    if prompt.get("type") == "embeds" and prompt.get("prompt_embeds") is not None:
        from harness.runners.prompt_forms import digest

        e = prompt["prompt_embeds"]
        return {
            "engine_input": "embeds",
            "engine_embeds_shape": [int(x) for x in e.shape],
            "engine_embeds_sha256": digest(e),
        }
    if prompt.get("type") == "token":
        return {"engine_input": "text" if prompt.get("prompt") else "token_ids"}
    return {"engine_input": f"unknown (type {prompt.get('type')!r})"}


def attach(llm) -> EngineTrace:
    """A trace of this `vllm.LLM`'s scheduler, or an empty one saying why it cannot be read."""
    try:
        scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    except AttributeError as e:
        trace = EngineTrace(
            None,
            f"the engine core runs in another process ({e}): its scheduler "
            f"cannot be traced (VLLM_ENABLE_V1_MULTIPROCESSING=0 keeps it "
            f"here)",
        )
    else:
        trace = EngineTrace(scheduler)
    if hasattr(getattr(llm, "llm_engine", None), "add_request"):
        trace.wrap_engine(llm.llm_engine)
    return trace


def summarize(meta: list[dict]) -> dict[str, Any]:
    """The run-level proof of effect from per-request traces (input order): arrival_order (input
    indices in the order the engine received them), peak_batch (most requests scheduled in one
    step), engine_steps, split_prompts (requests scheduled over more than one step) and
    tokens_scheduled (every prompt token the engine scheduled). Nothing unless every request was
    traced."""
    if not meta or not all(m.get("scheduled") for m in meta):
        return {}
    arrival = [m.get("engine_arrival") for m in meta]
    order = None if None in arrival else sorted(range(len(meta)), key=lambda i: arrival[i])
    entries = [e for m in meta for e in m["scheduled"]]
    return {
        "arrival_order": order,
        "peak_batch": max(e[2] for e in entries),
        "engine_steps": len({e[0] for e in entries}),
        "split_prompts": sum(1 for m in meta if len(m["scheduled"]) > 1),
        "tokens_scheduled": sum(e[1] for e in entries),
    }
