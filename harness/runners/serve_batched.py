"""The server runner's requests that carry several items (harness.runners.serve): a list `input`
of `items_per_request` items (embed, classify; /score's text_1 and text_2 lists, or one query
with its documents), each answer's entries matched to its items by `index`; and /rerank, each
query with all its documents. A mixin of ServeRunner: it uses the runner's model, client,
tokenizer and `_post`."""

from __future__ import annotations

import asyncio

import numpy as np

from harness.matrix.request import Request, served_fields, tokenize_fields
from harness.runners.prompt_forms import form_of, token_ids
from harness.runners.serve_decode import match_by_index, match_rerank
from harness.runners.serve_endpoints import BATCHED
from harness.runners.vllm_io import score_input


class BatchedRequests:
    """Requests of several items each, for ServeRunner: it provides the model, the requests'
    sizes of the run (`_batches`), `_client`, `_tokenizer` and `_post`."""

    model: str
    name: str  # the model the requests name (the folder, or a LoRA adapter's name)
    _batches: list[int]

    async def _send_batched(
        self, task: str, numbered: list, request: Request
    ) -> list[tuple[np.ndarray, dict]]:
        """The items in requests of `items_per_request` each (`all`: one request), up to
        max_in_flight of them outstanding at once; each answer's entries matched to its items by
        `index`. The size of every request sent is kept (self._batches) for the run's evidence."""
        per = request.serve.items_per_request
        if per == "query":  # score: each query with all its documents (1:N)
            from harness.matrix.inputs import query_groups

            groups = query_groups(tuple(it for _, it in numbered))
            chunks = [[numbered[j] for j in group] for group in groups]
        else:
            k = max(len(numbered), 1) if per == "all" else int(per)
            chunks = [numbered[s : s + k] for s in range(0, len(numbered), k)]
        first = len(self._batches)  # requests numbered across the calls of one run
        self._batches += [len(c) for c in chunks]
        send = Limited(request)
        async with self._client(request) as client:

            async def one(r: int, chunk: list):
                answered, at_send = await send(lambda: self._batch(client, task, r, chunk, request))
                return [(out, {**meta, "in_flight": at_send}) for out, meta in answered]

            answers = await asyncio.gather(
                *(one(first + r, chunk) for r, chunk in enumerate(chunks))
            )
        return [pair for answer in answers for pair in answer]

    async def _batch(
        self, client, task: str, r: int, chunk: list, request: Request
    ) -> list[tuple[np.ndarray, dict]]:
        """One request carrying the chunk's items as a list `input`; usage.prompt_tokens is the
        request's (all its items'), kept per item as `batch` for the usage check."""
        unsupported = [
            k for k in ("truncate", "dimensions", "prompt_name", "padding") if getattr(request, k)
        ]
        if unsupported or request.serve.encoding_format != "float":
            raise ValueError(
                "items_per_request sends float answers without "
                "truncate/dimensions/prompt_name/padding; the case sets "
                + ", ".join(unsupported or [f"encoding_format {request.serve.encoding_format}"])
            )
        path, key = BATCHED[task]
        what = f"request {r} (items {[i for i, _ in chunk]})"
        if task == "score":  # N:N (text_1 and text_2 lists, pair k = their k-th) or 1:N
            queries, docs = [q for _, (q, _) in chunk], [d for _, (_, d) in chunk]
            one = request.serve.items_per_request == "query"
            if one and len({str(q) for q in queries}) != 1:
                raise ValueError(f"{what}: a 1:N /score request needs one query")
            queries, docs = [score_input(q) for q in queries], [score_input(d) for d in docs]
            body = {"text_1": queries[0] if one else queries, "text_2": docs}
            body = {"model": self.name or self.model, **body, **served_fields(request)}
            inputs, sent = [None] * len(chunk), [{}] * len(chunk)  # pairs: no /tokenize
        else:
            inputs, sent = self._batch_inputs(chunk)
            body = {"model": self.name or self.model, "input": inputs, **served_fields(request)}
        ans = await self._post(client, path, body, what)
        return await self._batch_answers(client, task, r, chunk, ans, inputs, sent, request)

    def _batch_inputs(self, chunk: list) -> tuple[list, list[dict]]:
        """A chunk's items as a list `input` (texts, or the HF tokenizer's ids), and per item
        what was sent beside its answer."""
        inputs: list = []
        sent: list[dict] = []
        for _, item in chunk:
            form, item = form_of(item)
            if form == "token_ids":  # the HF tokenizer's ids, one list per input
                ids_sent = token_ids(self._tokenizer(), item)
                inputs.append(ids_sent)
                sent.append({"request_input": "token_ids", "prompt_token_ids": ids_sent})
            elif form == "text":
                inputs.append(item)
                sent.append({})
            else:
                raise ValueError(f"the vllm-serve runner sends text and token ids, not {form!r}")
        return inputs, sent

    async def _batch_answers(self, client, task, r, chunk, ans, inputs, sent, request):
        path, key = BATCHED[task]
        what = f"request {r} (items {[i for i, _ in chunk]})"
        entries = match_by_index(ans, len(chunk), f"{path} {what}")
        usage = (ans.get("usage") or {}).get("prompt_tokens")
        out = []
        for (i, _), entry, extra, text in zip(chunk, entries, sent, inputs):
            ids = None
            if isinstance(text, str):
                asked = {
                    "model": self.name or self.model,
                    "prompt": text,
                    **tokenize_fields(request),
                }
                tok = await self._post(client, "/tokenize", asked, i)
                ids = [int(t) for t in tok["tokens"]]
            meta = {
                "prompt_token_ids": ids,
                "num_cached_tokens": None,
                "usage_prompt_tokens": None,  # the request's, in `batch`
                "batch": {"request": r, "items": len(chunk), "prompt_tokens": usage},
                **extra,
            }
            value = entry[key]
            out.append((np.asarray(value if key != "score" else [value], dtype=np.float32), meta))
        return out

    async def _rerank_all(self, items: list, request: Request) -> list[tuple[np.ndarray, dict]]:
        """Each query with its documents as one /rerank request (all documents), plus one with
        top_n when the case sets it; answers are matched to documents by their `index`."""
        from harness.matrix.inputs import query_groups

        send = Limited(request)
        top_n = request.serve.top_n
        async with self._client(request) as client:

            async def both(body: dict, g: int) -> tuple[dict, dict | None]:
                full = await self._post(client, "/rerank", body, f"query group {g}")
                top = (
                    await self._post(
                        client, "/rerank", {**body, "top_n": top_n}, f"query group {g}"
                    )
                    if top_n
                    else None
                )
                return full, top

            async def one(g: int, group: list[int]):
                body = {
                    "model": self.name or self.model,
                    "query": score_input(items[group[0]][0]),
                    "documents": [score_input(items[j][1]) for j in group],
                    **request.text_caps(),
                    **(
                        {"chat_template_kwargs": dict(request.score_template_kwargs)}
                        if request.score_template_kwargs
                        else {}
                    ),
                }
                (full, top), at_send = await send(lambda: both(body, g))
                return [
                    (out, {**meta, "in_flight": at_send})
                    for out, meta in match_rerank(g, body["documents"], full, top, top_n)
                ]

            groups = query_groups(tuple(items))
            answers = await asyncio.gather(*(one(g, group) for g, group in enumerate(groups)))
        out: list = [None] * len(items)
        for group, answer in zip(groups, answers):
            for j, pair in zip(group, answer):
                out[j] = pair
        return out


class Limited:
    """At most `max_in_flight` requests (or request pairs) outstanding at once; each awaited one
    comes back with how many were outstanding when it was sent, itself included."""

    def __init__(self, request: Request):
        self.limit = asyncio.Semaphore(request.serve.max_in_flight)
        self.in_flight = 0

    async def __call__(self, request):
        async with self.limit:
            self.in_flight += 1
            at_send = self.in_flight
            try:
                return await request(), at_send
            finally:
                self.in_flight -= 1
