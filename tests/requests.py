"""Requests for tests that call a runner directly: `req(api="rerank", truncate=8)`, the server
options (harness.matrix.request.ServeOptions) named beside the others, as a flat dict."""

from __future__ import annotations

from typing import Any

from harness.matrix.request import Request, ServeOptions


def req(**flat: Any) -> Request:
    serve = {k: flat.pop(k) for k in list(flat) if k in ServeOptions.model_fields}
    return Request(**flat, serve=ServeOptions(**serve))
