"""Requests for tests that call a runner directly: `req(api="rerank", truncate=8)`, the server
options (harness.matrix.request.ServeOptions) named beside the others, as a flat dict."""

from __future__ import annotations

from typing import Any

from harness.matrix.request import Request, ServeOptions


def req(**flat: Any) -> Request:
    serve = {k: flat.pop(k) for k in list(flat) if k in ServeOptions.model_fields}
    return Request(**flat, serve=ServeOptions(**serve))


def nest(fields: dict[str, Any]) -> dict[str, Any]:
    """Case fields as a test names them, flat, with the request options moved under `request`
    (harness.matrix.request.RequestOptions), as a matrix spells them."""
    from harness.matrix.request import RequestOptions

    moved = {k: fields[k] for k in fields if k in RequestOptions.model_fields}
    out = {k: v for k, v in fields.items() if k not in moved}
    if moved:
        out["request"] = {**out.get("request", {}), **moved}
    return out
