"""What the server runners send for one item, as a table: the route of a (task, request) -- its
`serve.api`, chat, prompt_name and encoding_format -- names an Endpoint (path, body builder,
decoder). harness.runners.serve posts the body and reads the answer through it; the batched
(`items_per_request`) and /rerank requests are its own."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from harness.matrix.request import Request, served_fields
from harness.runners.prompt_forms import st_prompt
from harness.runners.serve_decode import ServerFailure, decode_base64, decode_bytes
from harness.runners.vllm_io import score_input

# tasks whose endpoint takes a list `input` and answers `data[]` with an `index` per input:
# (endpoint, the output's field in each entry)
BATCHED = {
    "embed": ("/v1/embeddings", "embedding"),
    "classify": ("/classify", "probs"),
    "score": ("/score", "score"),  # text_1 and text_2 lists (N:N), or one text_1 (1:N)
}
# the pooling tasks every request of which goes to /pooling (reward models: token_classify)
TOKEN_TASKS = {"token_classify": "token_classify", "token_embed": "token_embed"}
TOKEN_TASKS |= {"reward": "token_classify", "step_reward": "token_classify"}
# BGE-M3's default pooling task (dense vector, then sparse weights): sent to /pooling with no
# `task`, as users send it, so the server resolves its own default (vLLM 0.32 refuses it
# without an IO-processor plugin, in words a refusal case names)
COMBINED = "embed&token_classify"


@dataclass(frozen=True)
class Item:
    """One item's request, before its endpoint: the fields every body shares."""

    task: str
    i: int  # the item's index in the case (named in errors)
    item: Any  # a text, [[token ids]] or a (query, document) pair
    model: str
    request: Request
    # model and the request's values as body fields (harness.matrix.request.served_fields)
    base: dict[str, Any] = field(default_factory=dict)
    conv: dict[str, Any] | None = None  # chat: messages and the template's options


def item_request(
    task: str, i: int, item: Any, model: str, request: Request, name: str | None = None
) -> Item:
    """The shared fields of one item's request (a field not set: the server's default); `name`
    is the model the request names when it is not the checkpoint's folder (a LoRA adapter's
    name)."""
    base = {"model": name or model, **served_fields(request)}
    return Item(task, i, item, model, request, base, _conversation(item, request))


def _conversation(item: Any, request: Request) -> dict[str, Any] | None:
    """vLLM's chat pooling request fields (`messages`, rendered by the server's template)."""
    if request.chat is None:
        return None
    from harness.matrix.chat import conversation, template_options

    chat = request.chat.model_dump()
    kwargs = chat.get("chat_template_kwargs") or {}
    return {
        "messages": conversation(item, chat),
        **template_options(chat),
        **({"chat_template_kwargs": kwargs} if kwargs else {}),
        # absent unless asked: the request's default (false for chat requests)
        **({"add_special_tokens": True} if chat.get("add_special_tokens") else {}),
    }


@dataclass(frozen=True)
class Endpoint:
    """One row of the table: where the item goes, what is sent, how the answer is read.
    `decode` gives the output and the prompt tokens the server says it ran (None: the answer's
    usage.prompt_tokens); `text`, the text the server ran (for /tokenize; None: no one text)."""

    path: str
    body: Callable[[Item], dict]
    decode: Callable[[Any, Item], tuple[np.ndarray, int | None]]
    raw: bool = False  # the response itself, not its JSON (binary answers)
    text: Callable[[Item], Any] = lambda it: it.item


def _data(key: str, wrap: bool = False):
    def decode(ans: dict, it: Item) -> tuple[np.ndarray, int | None]:
        value = ans["data"][0][key]
        return np.asarray([value] if wrap else value, dtype=np.float32), None

    return decode


def _v2_embed(ans: dict, it: Item) -> tuple[np.ndarray, int | None]:
    usage = ((ans.get("meta") or {}).get("billed_units") or {}).get("input_tokens")
    return np.asarray(ans["embeddings"]["float"][0], dtype=np.float32), usage


def _encoding(it: Item) -> tuple[str, str, str]:
    """(encoding_format, embed_dtype, endianness): binary answers are asked for with their dtype
    and byte order named (vLLM's default order is the server's native one)."""
    serve = it.request.serve
    return serve.encoding_format, serve.embed_dtype, serve.endianness


def _embeddings_body(it: Item) -> dict:
    fmt, dtype, order = _encoding(it)
    named = {"embed_dtype": dtype, "endianness": order} if fmt != "float" else {}
    return {**it.base, "input": it.item, "encoding_format": fmt, **named}


def _bytes(r, it: Item) -> tuple[np.ndarray, int | None]:
    """Raw values in the body, their metadata (and usage) in a header."""
    fmt, dtype, order = _encoding(it)
    meta = r.headers.get("metadata")
    if fmt == "bytes" and meta is None:
        raise ServerFailure(f"item {it.i}: the bytes answer has no metadata header")
    out = decode_bytes(r.content, meta, it.i, dtype, order)
    return out, ((json.loads(meta) if meta else {}).get("usage") or {}).get("prompt_tokens")


def _embedding(ans: dict, it: Item) -> tuple[np.ndarray, int | None]:
    fmt, dtype, order = _encoding(it)
    vec = ans["data"][0]["embedding"]
    if fmt == "base64":
        return decode_base64(vec, it.i, dtype, order), None
    return np.asarray(vec, dtype=np.float32), None


def _prompted(it: Item) -> str:
    """The text the server ran for a prompt_name: its prompt (read from the same file) + item."""
    return st_prompt(it.model, str(it.request.prompt_name)) + it.item


ENDPOINTS: dict[str, Endpoint] = {
    "chat-pooling": Endpoint(
        "/pooling", lambda it: {**it.base, **it.conv, "task": it.task}, _data("data")
    ),
    "chat-embed": Endpoint(
        "/v1/embeddings",
        lambda it: {**it.base, **it.conv, "encoding_format": "float"},
        _data("embedding"),
    ),
    "chat-classify": Endpoint("/classify", lambda it: {**it.base, **it.conv}, _data("probs")),
    "pooling": Endpoint(
        "/pooling",
        lambda it: {**it.base, "input": it.item, "task": it.task},
        _data("data"),
    ),
    # vLLM's Cohere-style /v2/embed: `input_type` names a prompt of the model's
    # config_sentence_transformers.json, which the server prepends itself
    "embed-prompt": Endpoint(
        "/v2/embed",
        lambda it: {
            "model": it.base["model"],
            "texts": [it.item],
            "input_type": str(it.request.prompt_name),
            "embedding_types": ["float"],
            **({"output_dimension": d} if (d := it.request.dimensions) else {}),
        },
        _v2_embed,
        text=_prompted,
    ),
    "embed-bytes": Endpoint("/v1/embeddings", _embeddings_body, _bytes, raw=True),
    "embed": Endpoint("/v1/embeddings", _embeddings_body, _embedding),
    "classify": Endpoint("/classify", lambda it: {**it.base, "input": it.item}, _data("probs")),
    "score": Endpoint(
        "/score",
        # an image side as content parts, as LLM.score is given it
        lambda it: {
            **it.base,
            "text_1": score_input(it.item[0]),
            "text_2": score_input(it.item[1]),
        },
        _data("score", wrap=True),
    ),
    "token": Endpoint(
        "/pooling",
        lambda it: {**it.base, "input": it.item, "task": TOKEN_TASKS[it.task]},
        _data("data"),
    ),
    "default-task": Endpoint("/pooling", lambda it: {**it.base, "input": it.item}, _data("data")),
}


def route(it: Item, form: str) -> Endpoint:
    """The endpoint of one item's request, refusing what the server cannot be sent."""
    task, request = it.task, it.request
    api, fmt = request.serve.api, request.serve.encoding_format
    if it.conv is not None:
        if task not in ("embed", "classify") or form != "text":
            raise ValueError("chat is sent to /v1/embeddings, /classify or /pooling, as text items")
        return ENDPOINTS["chat-pooling" if api == "pooling" else f"chat-{task}"]
    if task in ("embed", "classify") and api == "pooling":
        return ENDPOINTS["pooling"]
    if task == "embed" and request.prompt_name:
        others = sorted(set(it.base) - {"model", "dimensions"})  # /v2/embed takes none of them
        if others or form != "text" or fmt != "float":
            raise ValueError(
                "prompt_name is sent through /v2/embed: text, float, no "
                + (", ".join(others) or "other request field")
            )
        return ENDPOINTS["embed-prompt"]
    if task == "embed":
        return ENDPOINTS["embed-bytes" if fmt in ("bytes", "bytes_only") else "embed"]
    if task in ("classify", "score"):
        return ENDPOINTS[task]
    if task in TOKEN_TASKS:
        return ENDPOINTS["token"]
    if task == COMBINED and form == "text":
        return ENDPOINTS["default-task"]
    raise ValueError(f"the vllm-serve runner does not implement task {task!r}")
