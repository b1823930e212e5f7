"""vLLM's AsyncLLM in pooling mode: `AsyncLLM.encode`, what vLLM's server and async users call.
`vllm-async-v1|v2`.

AsyncLLM turns a request into an engine request apart from the offline `LLM` (no pooling IO
processor: the caller's PoolingParams and tokenization kwargs go straight to the input processor),
and vLLM has shipped bugs where the two disagreed (vllm#31013: truncation ignored; vllm#33361:
activation defaults not applied). This runner sends a case's items as the offline runner builds
them (its prompts, PoolingParams and tokenization kwargs: harness.runners.vllm) through
`AsyncLLM.encode`, every item in flight at once (one asyncio task each), answers matched to items
by request id. The AsyncLLM lives in the worker; its engine core is a child process (vLLM runs
AsyncLLM with no in-process core), stopped by `unload` and killed with the worker's process group.
Every run is bounded (RUN_TIMEOUT): a hang is an error naming the requests still open.

`request.also_in_flight` (tasks): each item is also sent once per named task, in flight with the
case's own requests (one model serving several tasks at once, vllm#36614); those answers must come
back, and only the case's own are compared.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import numpy as np

from harness.matrix.request import Request
from harness.runners import LoadRequest, RunResult
from harness.runners.engine_trace import EngineTrace
from harness.runners.vllm import VllmRunner
from harness.runners.vllm_engine import (
    engine_kwargs,
    explained_start,
    heap_kept_frozen,
    lora_request,
)
from harness.runners.vllm_io import engine_prompt, output_meta, to_numpy
from harness.runners.vllm_load_info import load_info

RUN_TIMEOUT = 300.0  # seconds one run's requests may take together, below the case's 600 s
# the case task -> the pooling task AsyncLLM.encode is asked for (no `reward` task in vLLM)
POOLING_TASK = {  # keys: harness.matrix.in_flight.ASYNC_TASKS
    "embed": "embed",
    "classify": "classify",
    "token_classify": "token_classify",
    "token_embed": "token_embed",
    "reward": "token_classify",
    "step_reward": "token_classify",
}
_RUNS = itertools.count()


class AsyncRunTimeout(TimeoutError):
    """The run's requests did not all finish in RUN_TIMEOUT: a hang, or a very slow machine."""

    timed_out = True


class _EngineView:
    """What harness.runners.vllm_load_info.load_info asks of an engine, over an AsyncLLM: its
    config as `llm_engine.vllm_config`, and collective_rpc run to completion on the runner's
    loop."""

    def __init__(self, engine, loop: asyncio.AbstractEventLoop):
        self.llm_engine = engine
        self._loop = loop

    def collective_rpc(self, method, *args, **kwargs):
        return self._loop.run_until_complete(
            asyncio.wait_for(self.llm_engine.collective_rpc(method, *args, **kwargs), 120)
        )


class AsyncVllmRunner(VllmRunner):
    """The offline runner's request handling (run options, prompt forms, PoolingParams,
    tokenization kwargs), its engine swapped for AsyncLLM."""

    def __init__(self, variant: str | None):
        if variant not in ("v1", "v2"):
            raise ValueError(f"vllm-async runner variant must be v1 or v2, got {variant!r}")
        super().__init__(variant)
        self._also: list[str] = []  # the request's also_in_flight, during a run
        self.loop: asyncio.AbstractEventLoop | None = None

    def load(self, req: LoadRequest) -> dict[str, Any]:
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.req, self.trust = req, req.trust_remote_code
        budget, kwargs = engine_kwargs(req)
        self.lora = lora_request(req.lora_dir)
        self.loop = asyncio.new_event_loop()
        args = AsyncEngineArgs(
            model=req.model_dir,
            runner="pooling",
            dtype=req.dtype,
            trust_remote_code=req.trust_remote_code,
            **kwargs,
        )

        def start():
            with heap_kept_frozen(freeze_first=True):
                return AsyncLLM.from_engine_args(args)

        self.trace = EngineTrace(
            None, "AsyncLLM's engine core runs in its own process: its scheduler is not traced"
        )
        try:
            self.llm = explained_start(req.model_dir, start)
            return {
                **load_info(_EngineView(self.llm, self.loop), self.trace, req, kwargs, budget),
                "entrypoint": "vllm.v1.engine.async_llm.AsyncLLM.encode",
            }
        except BaseException:  # a failed load is never unloaded by the worker: stop the core here
            self.unload()
            raise

    def _call(
        self, task: str, items: list, tok: dict, params: dict, template: str | None = None
    ) -> list[tuple[np.ndarray, dict]]:
        """One run's items through AsyncLLM.encode: `tok` and `params` as the offline runner's
        (harness.matrix.request.offline_kwargs), the task named in the PoolingParams; no score
        task, so no score `template`."""
        from vllm import PoolingParams

        if task not in POOLING_TASK:
            raise ValueError(
                f"the vllm-async runner does not implement task {task!r}: vLLM 0.32's AsyncLLM "
                f"has no score API (the server pairs texts in its own IO processor); tasks: "
                f"{', '.join(POOLING_TASK)}"
            )
        if "extra_kwargs" in params:  # max_tokens_per_query/doc: read by the score io_processor
            raise ValueError("max_tokens_per_query/doc apply to score cases, not " + repr(task))
        if task in ("embed", "classify"):
            prompts, sent = self._prompts(items)
        else:
            prompts, sent = [engine_prompt(it) for it in items], [{} for _ in items]
        own = PoolingParams(task=POOLING_TASK[task], **params)
        others = [PoolingParams(task=POOLING_TASK[t]) for t in self._also]
        # (prompt, params, compared): each item, then the same prompt for each other task
        sends = [s for p in prompts for s in [(p, own, True), *((p, o, False) for o in others)]]
        outs = self._encode_all(sends, tok)
        mine = [o for o, (_, _, keep) in zip(outs, sends) if keep]
        return [(to_numpy(o.outputs.data), output_meta(o, s)) for o, s in zip(mine, sent)]

    def _encode_all(self, sends: list[tuple[Any, Any, bool]], tok: dict | None) -> list:
        """Every (prompt, PoolingParams) in flight at once through AsyncLLM.encode; the final
        outputs in the order of `sends`, each found by its own request id."""
        run = next(_RUNS)
        ids = [f"async-{run}-{i}" for i in range(len(sends))]

        async def one(rid: str, prompt, params):
            final = None
            async for out in self.llm.encode(
                prompt,
                params,
                rid,
                lora_request=self.lora,
                tokenization_kwargs=dict(tok) if tok else None,
            ):
                final = out
            if final is None or not final.finished:
                raise RuntimeError(f"request {rid}: AsyncLLM.encode ended without a final output")
            return rid, final

        async def everything():
            tasks = [asyncio.ensure_future(one(r, p, q)) for r, (p, q, _) in zip(ids, sends)]
            done, pending = await asyncio.wait(tasks, timeout=RUN_TIMEOUT)
            if pending:
                open_ids = [r for r, t in zip(ids, tasks) if t in pending]
                for t in pending:
                    t.cancel()  # AsyncLLM.encode aborts a cancelled request
                await asyncio.gather(*pending, return_exceptions=True)
                raise AsyncRunTimeout(
                    f"AsyncLLM.encode: {len(open_ids)} of {len(ids)} requests unfinished after "
                    f"{RUN_TIMEOUT:.0f} s (first: {open_ids[:4]}); they were aborted"
                )
            failed = [e for e in (t.exception() for t in tasks) if e is not None]
            if failed:  # every failure retrieved (asyncio logs those that are not); the first
                raise failed[0]
            return dict(t.result() for t in tasks)

        assert self.llm is not None and self.loop is not None, "run before load"
        by_id = self.loop.run_until_complete(everything())
        return [by_id[rid] for rid in ids]

    def run(self, task: str, items: list, request: Request) -> RunResult:
        self._also = list(request.also_in_flight or [])  # read by _call, for this run only
        try:
            return super().run(task, items, request)
        finally:
            self._also = []

    def unload(self) -> None:
        self._hf.clear()
        self.lora = None
        engine, self.llm = self.llm, None
        if engine is not None:
            try:
                with heap_kept_frozen(freeze_first=False):
                    engine.shutdown()  # stops the engine core process
            except Exception:  # noqa: BLE001 - best effort: the worker's group is killed anyway
                pass
        if self.loop is not None:
            self.loop.close()
            self.loop = None
        import gc

        gc.collect()
