"""What vLLM's scheduler really did with a run's requests: the order they reached it and, per
engine step, which requests it scheduled and how many tokens of each. The proof of effect of the
invariance checks that change order, batching or chunking
(harness.judge.check_proof.check_not_in_effect, which harness.judge.verdict asks).

Read from the scheduler itself (its `add_request` and `schedule` calls), so it exists only when
the engine core runs in this process (the CPU default, VLLM_ENABLE_V1_MULTIPROCESSING=0); with
the engine core in another process the trace says why it is absent, and a check that needs it is
an error, never a pass."""

from __future__ import annotations

from typing import Any


class EngineTrace:
    def __init__(self, scheduler: Any | None, absent: str | None = None, core: Any | None = None):
        self.scheduler = scheduler
        self.absent = absent  # why there is no trace
        self.arrivals: list[str] = []  # the engine's request ids, in the order it received them
        self.steps: list[dict[str, int]] = []  # per schedule() call: request id -> tokens scheduled
        # request id -> what the engine was handed (engine_input: text | token_ids | embeds)
        self.inputs: dict[str, dict[str, Any]] = {}
        self.core = core
        # async scheduling: the engine core steps through its batch queue (step_with_batch_queue)
        # and may hold a scheduled batch while the previous one runs
        self.queued_steps = 0  # engine-core steps taken through the batch queue
        self.peak_batch_queue = 0  # most batches in the queue at once, seen after a step
        if scheduler is not None:
            self._wrap(scheduler)
        if core is not None and callable(getattr(core, "step_fn", None)):
            self._wrap_core(core)

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

    def _wrap_core(self, core: Any) -> None:
        step_fn = core.step_fn

        def traced_step(*a, **kw):
            queue = getattr(core, "batch_queue", None)
            if queue is not None:
                self.queued_steps += 1
                self.peak_batch_queue = max(self.peak_batch_queue, len(queue))
            out = step_fn(*a, **kw)
            if queue is not None:
                self.peak_batch_queue = max(self.peak_batch_queue, len(queue))
            return out

        core.step_fn = traced_step  # InprocClient.get_output calls engine_core.step_fn()

    def reset(self) -> None:
        self.arrivals, self.steps, self.inputs = [], [], {}
        self.queued_steps = self.peak_batch_queue = 0

    def run_info(self) -> dict[str, Any]:
        """What the engine core did in the run (async scheduling's proof): its batch queue's
        size (None: no queue, steps run one batch at a time), the steps taken through it and
        the most batches it held at once. Nothing without a trace."""
        if self.core is None:
            return {}
        queue = getattr(self.core, "batch_queue", None)
        return {
            "batch_queue_size": getattr(self.core, "batch_queue_size", None)
            if queue is not None
            else None,
            "queued_steps": self.queued_steps,
            "peak_batch_queue": self.peak_batch_queue,
        }

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
        core = llm.llm_engine.engine_core.engine_core
        scheduler = core.scheduler
    except AttributeError as e:
        trace = EngineTrace(
            None,
            f"the engine core runs in another process ({e}): its scheduler "
            f"cannot be traced (VLLM_ENABLE_V1_MULTIPROCESSING=0 keeps it "
            f"here)",
        )
    else:
        trace = EngineTrace(scheduler, core=core)
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
        **_depth(meta),
    }


def _depth(meta: list[dict]) -> dict[str, Any]:
    """How deep chunking and tiling went: longest_prompt_steps (the most engine steps a prompt of
    the longest length was scheduled over), shared_long_short_steps (steps that scheduled a
    prompt of the longest length beside a prompt scheduled whole in one step) and waited
    (requests first scheduled after the run's first step: they waited for room)."""
    lengths = [len(m.get("prompt_token_ids") or ()) for m in meta]
    longest = max(lengths)
    long_steps = {e[0] for m, n in zip(meta, lengths) if n == longest for e in m["scheduled"]}
    short_steps = {
        m["scheduled"][0][0]
        for m, n in zip(meta, lengths)
        if n < longest and len(m["scheduled"]) == 1
    }
    first = min(e[0] for m in meta for e in m["scheduled"])
    return {
        "longest_prompt_steps": max(
            len(m["scheduled"]) for m, n in zip(meta, lengths) if n == longest
        ),
        "shared_long_short_steps": len(long_steps & short_steps) if longest else None,
        "waited": sum(1 for m in meta if m["scheduled"][0][0] > first),
    }
