"""vLLM through its HTTP server: the API users call. `vllm-serve-v1|v2|auto`.

Inside its worker process, the runner starts vLLM's OpenAI-compatible server on 127.0.0.1 and a
free port (same model-runner environment as the offline V1/V2 workers: harness.runners.platform),
waits
for /health, and sends every item of a case as its own request, many in flight at once, so the
server batches them dynamically as it does for users. Answers are matched to items by request,
never by arrival order. With `items_per_request` (embed, classify, score) a request carries
several items (a list `input`; /score's text_1 and text_2 lists, or one query with its
documents) and its answer's entries are matched to them by `index`, never by position; the run
records the requests' sizes and how many of them the server's access log answered. The server
belongs to the worker's process group: a worker that is killed
takes its server with it; `unload` stops it (SIGTERM, then SIGKILL of the whole tree). A server
that dies during a case fails that case; the next case starts a new one.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import numpy as np

from harness.engine.target import vllm_provenance, vllm_version
from harness.matrix.evidence import RequestsEvidence, RunEvidence
from harness.matrix.request import Request, tokenize_fields
from harness.runners import LoadRequest, RunResult
from harness.runners.prompt_forms import form_of, paired, token_ids
from harness.runners.serve_batched import BatchedRequests, Limited
from harness.runners.serve_decode import ServerFailure, same_length
from harness.runners.serve_endpoints import BATCHED, item_request, route
from harness.runners.serve_process import (
    SERVER_MODULE,
    ServerProcess,
    metrics_delta,
    parse_metrics,
    runner_from_log,
)

# the name a case's LoRA adapter is served under (`--lora-modules NAME=DIR`): every request
# names it as its model, as users address an adapter on vLLM's server
LORA_NAME = "case-adapter"


def _lora_flags(lora_dir: str | None) -> dict[str, Any]:
    """The server flags of a case's LoRA adapter: the offline runner's engine kwargs (the
    smallest max_lora_rank that holds its r) and the adapter registered under LORA_NAME."""
    if not lora_dir:
        return {}
    from harness.runners.vllm_engine import lora_engine_kwargs

    return {**lora_engine_kwargs(lora_dir), "lora_modules": f"{LORA_NAME}={lora_dir}"}


class ServeRunner(BatchedRequests):
    def __init__(self, variant: str | None):
        if variant not in ("v1", "v2", "auto"):
            raise ValueError(f"vllm-serve runner variant must be v1, v2 or auto, got {variant!r}")
        self.variant = variant
        self.server = ServerProcess()  # start, health, log, restart, stop: serve_process
        self.model = ""  # the checkpoint's folder
        self.name = ""  # the model the requests name: the folder, or the LoRA adapter served
        self.transport = (
            None  # an httpx transport for the requests; None: the network (tests pass a double)
        )
        self._tokenizers: dict[str, Any] = {}  # model dir -> HF tokenizer (token-id prompts)
        self._batches: list[int] = []  # items in each request of this run (items_per_request)

    # --- lifecycle ---------------------------------------------------------------------------

    def load(self, req: LoadRequest) -> dict[str, Any]:
        from harness.runners.memory import kv_budget_of
        from harness.runners.platform import Platform

        budget = kv_budget_of(req.model_dir, req.dtype, req.engine)
        engine = {
            **Platform(req.device).engine_defaults(budget.bytes),
            "seed": 0,
            **_lora_flags(req.lora_dir),
            **req.engine,
        }
        self.model = req.model_dir
        self.name = LORA_NAME if req.lora_dir else req.model_dir
        t0 = time.perf_counter()
        server = self.server
        refused = server.start(req, engine)
        assert server.log_path is not None
        actual, evidence = runner_from_log(server.log_path.read_text(errors="replace"))
        return {
            "actual_runner": actual,
            "runner_evidence": evidence,
            # vLLM's server exposes no model runner class: its log is the evidence, not the engine
            "runner_proven": False,
            "runner_choice": "VLLM_USE_V2_MODEL_RUNNER="
            + os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "(unset)"),
            "device": req.device,
            "engine_kwargs": engine,
            "kv_budget": budget.as_info(),
            "effective": {"kv_cache_memory_bytes": engine.get("kv_cache_memory_bytes")},
            "server": {
                "url": server.url,
                "pid": server.proc.pid if server.proc else None,
                "module": SERVER_MODULE,
                "start_seconds": time.perf_counter() - t0,
                "log": str(server.log_path),
                "ports_in_use": refused,
            },
            "triton_interpreted": os.environ.get("TRITON_INTERPRET") == "1",
            "versions": {"vllm": vllm_version()},
            "vllm": vllm_provenance(),  # release, or a checkout's commit and tree state
        }

    def unload(self) -> None:
        self.server.stop()

    # --- requests ----------------------------------------------------------------------------

    def run(self, task: str, items: list, request: Request) -> RunResult:
        """The outputs, and per request the server's answer (in flight, restarts) with the
        server's own metrics and the batching that ran."""
        self.server.new_case()
        since = self.server.log_size() or 0  # this case's first error is after this
        try:
            return self._run(task, items, request)
        except ServerFailure as e:  # every server fault carries the server's own log
            raise type(e)(f"{e}{self.server.excerpt(since)}") from None  # a ServerTimeout stays one

    def _run(self, task: str, items: list, request: Request) -> RunResult:
        from harness.runners.options import run_expecting_refusal, run_with_options

        if request.instruction:  # GritLM-style: the server finds it in the token ids
            items = [request.instruction + it for it in items]
        # (input index, item): messages name the item as the case numbers it, whatever the send
        # order
        numbered = [
            (i, tuple(it) if isinstance(it, list) else it)
            for i, it in enumerate(paired(list(items), request.prompt_forms))
        ]  # pairs arrive as lists; a text with a prompt form as {"prompt_form", "text"}
        per_request = request.serve.items_per_request
        if request.also_in_flight and (per_request != 1 or request.serve.api == "rerank"):
            raise ValueError(
                "also_in_flight sends every item as its own request: not with items_per_request "
                "or serve.api rerank"
            )
        self._batches = []
        mark = self.server.log_size()
        if task == "score" and request.serve.api == "rerank":

            def call(batch: list) -> list:
                return asyncio.run(self._rerank_all([it for _, it in batch], request))
        elif per_request != 1:  # several items per request, answers matched by `index`
            # (score: pairs as /score's text_1 and text_2 lists, N:N, or by query, 1:N)
            if task not in BATCHED or request.expect_refusal:
                raise ValueError(
                    f"items_per_request applies to {', '.join(BATCHED)} cases (a list `input`), "
                    f"not {task!r}" + (" refusals" if request.expect_refusal else "")
                )

            def call(batch: list) -> list:
                return asyncio.run(self._send_batched(task, batch, request))
        else:

            def call(batch: list) -> list:
                return asyncio.run(self._send_all(task, batch, request))

        # a request pattern (shuffle, one_by_one) is a send order here; every item is its own
        # request
        before = asyncio.run(self._metrics(request))
        if request.expect_refusal:  # each item alone; its HTTP error is its outcome
            answered = run_expecting_refusal(call, numbered)
        else:
            # every item is its own request here: a warm prefix cache is the offline runners'
            answered = run_with_options(
                call,
                numbered,
                Request(shuffle_seed=request.shuffle_seed, one_by_one=request.one_by_one),
            )
        after = asyncio.run(self._metrics(request))
        run: dict[str, Any] = {"server_metrics": metrics_delta(before, after)}
        if per_request != 1 and task in BATCHED:  # the batching that ran, in both sides' words
            path = BATCHED[task][0]
            run["batching"] = {
                "endpoint": path,
                "items_per_request": list(self._batches),  # as the harness sent them
                "http_requests": len(self._batches),
                **self.server.logged_posts(
                    path, mark, len(self._batches)
                ),  # as the server logged them
            }
        # a case that ran on a server restarted after an earlier one died says so (info.requests)
        records = [{**meta, "server_restarts": self.server.restarts} for _, meta in answered]
        return RunResult(
            [out for out, _ in answered], RunEvidence(records=records, run=RequestsEvidence(**run))
        )

    async def _metrics(self, request: Request) -> dict[str, float] | str:
        """The server's own counters (/metrics, Prometheus text), summed over labels; or why not."""
        try:
            async with self._client(request) as client:
                r = await client.get("/metrics")
            r.raise_for_status()
            return parse_metrics(r.text)
        except Exception as e:  # noqa: BLE001 - recorded; a check that needs the metrics errors
            return f"{type(e).__name__}: {e}"[:300]

    def _client(self, request: Request):
        import httpx

        return httpx.AsyncClient(
            base_url=self.server.url,
            timeout=float(request.serve.request_timeout),
            transport=self.transport,
        )

    async def _send_all(
        self, task: str, numbered: list, request: Request
    ) -> list[tuple[np.ndarray, dict]]:
        send = Limited(request)
        async with self._client(request) as client:

            async def one(i: int, item):
                (out, meta), at_send = await send(lambda: self._one(client, task, i, item, request))
                return out, {**meta, "in_flight": at_send}

            # also_in_flight: each item once more per other task, in flight with the case's own
            # (one model serving several tasks at once); those answers must come, none compared
            other = request.model_copy(
                update={"use_activation": None, "dimensions": None, "also_in_flight": None}
            )
            tasks = [task, *(request.also_in_flight or ())]

            def also(t: str, i: int, it):
                return send(lambda: self._one(client, t, i, it, other))

            sends = [
                one(i, it) if t == task else also(t, i, it) for i, it in numbered for t in tasks
            ]
            # gather keeps each answer with its own request: arrival order never matters
            answered = list(await asyncio.gather(*sends))[:: len(tasks)]
        fmt = request.serve.encoding_format
        if task == "embed" and fmt != "float":
            same_length(
                [out for out, _ in answered],
                [i for i, _ in numbered],
                fmt,
                request.serve.embed_dtype,
            )
        return answered

    async def _post(self, client, path: str, body: dict, what, raw: bool = False):
        """The answer's JSON; with `raw`, the response itself (binary answers)."""
        import httpx

        what = f"item {what}" if isinstance(what, int) else what
        try:
            r = await client.post(path, json=body)
        except httpx.TimeoutException:
            raise ServerFailure(
                f"request for {what} to {path} timed out after {client.timeout.read} s"
            ) from None
        except httpx.TransportError as e:
            raise ServerFailure(
                self.server.connection_lost(f"request for {what} to {path}", e)
            ) from None
        if r.status_code >= 400:
            raise ServerFailure(f"HTTP {r.status_code} from {path} for {what}: {r.text[:500]}")
        return r if raw else r.json()

    async def _one(
        self, client, task: str, i: int, item, request: Request
    ) -> tuple[np.ndarray, dict]:
        """One item as its own request, through the endpoint table (serve_endpoints)."""
        form, item = form_of(item)
        sent: dict[str, Any] = {}
        if form == "token_ids":  # the HF tokenizer's ids, sent as `input: [[ids]]`
            ids_sent = token_ids(self._tokenizer(), item)
            sent = {"request_input": "token_ids", "prompt_token_ids": ids_sent}
            item = [ids_sent]
        elif form != "text":
            raise ValueError(f"the vllm-serve runner sends text and token ids, not {form!r}")
        it = item_request(task, i, item, self.model, request, name=self.name)
        endpoint = route(it, form)
        ans = await self._post(client, endpoint.path, endpoint.body(it), i, raw=endpoint.raw)
        out, usage = endpoint.decode(ans, it)
        # the ids vLLM ran, from its /tokenize of the same conversation or text; none when
        # truncated (/tokenize would not cut them) or for pairs and images (no one text)
        text = endpoint.text(it)
        asked = {**it.conv} if it.conv is not None else {"prompt": text, **tokenize_fields(request)}
        ids = None
        if not request.truncate and (it.conv is not None or isinstance(text, str)):
            tok = await self._post(
                client, "/tokenize", {"model": self.name or self.model, **asked}, i
            )
            ids = [int(t) for t in tok["tokens"]]
        if usage is None and not endpoint.raw:  # what the server says it ran, one prompt here
            usage = (ans.get("usage") or {}).get("prompt_tokens")
        return out.astype(np.float32), {
            "prompt_token_ids": ids,
            "num_cached_tokens": None,
            "usage_prompt_tokens": usage,
            **sent,  # token ids: those sent (usage.prompt_tokens says how many the server ran)
        }

    def _tokenizer(self):
        """The checkpoint's HF tokenizer (the reference's): the ids of token-id prompts."""
        if self.model not in self._tokenizers:  # one worker serves many models in turn
            from transformers import AutoTokenizer

            req = self.server.started_with[0] if self.server.started_with else None
            self._tokenizers = {
                self.model: AutoTokenizer.from_pretrained(
                    self.model,
                    local_files_only=True,
                    trust_remote_code=bool(req and req.trust_remote_code),
                )
            }
        return self._tokenizers[self.model]
