"""A server runner talking to a test double of `vllm serve` (an httpx.MockTransport handler) as if
its server were up: the runner's own request and answer handling, with no process started."""

from __future__ import annotations

import httpx

from harness.runners.serve import ServeRunner


class AliveProcess:
    """A server process that never exits (what the runner polls before each request)."""

    pid = 0

    def poll(self):
        return None


def served(handler, model: str = "m") -> ServeRunner:
    """A V1 server runner whose requests `handler` answers, its model named `model`."""
    runner = ServeRunner("v1")
    runner.server.url, runner.server.proc = "http://server.test", AliveProcess()
    runner.model = model
    runner.transport = httpx.MockTransport(handler)
    return runner
