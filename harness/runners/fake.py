"""A runner that misbehaves on command, for proving the worker machinery copes with faults.

It goes through the same worker process and protocol as the real runners. The behaviour comes
from the load request's engine kwargs (a matrix case's `engine:`): {"behaviour": "echo" | "crash"
| "exit" | "oom" | "hang" | "hang-load" | "hang-ignoring-sigterm" | "raise" | "fail-load" |
"start-timeout" | "fail-load-timeout-words" | "nan" | "inf" | "short", "dim": 8, "say": "text",
"unload_marker": "path"}. "echo" returns a deterministic vector per input text; "say" is printed
to the worker's log before the behaviour (a log that mentions anything must not change a
verdict); "unload_marker" is a file unload() appends a line to (proof that a worker unloaded its
model). Every run prints "fake run: BEHAVIOUR" to the log first (tests wait for that line).
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from typing import Any

import numpy as np

from harness.matrix.request import Request
from harness.runners import LoadRequest, RunResult, SkipCase
from harness.runners.serve_decode import ServerTimeout


class FakeRunner:
    def __init__(self, variant: str | None):
        self.variant = variant
        self.opts: dict[str, Any] = {}

    def load(self, req: LoadRequest) -> dict[str, Any]:
        self.opts = {**req.hf, **req.engine}
        if self.opts.get("say"):
            print(self.opts["say"], file=sys.stderr, flush=True)
        if self.opts.get("behaviour") == "hang-load":  # an engine load that never ends
            time.sleep(3600)
        if self.opts.get("behaviour") == "fail-load":
            raise RuntimeError("engine refused to start (fake)")
        if self.opts.get("behaviour") == "start-timeout":  # what a server slow to start raises
            raise ServerTimeout("vllm serve was not healthy after 1 s (fake)")
        if self.opts.get("behaviour") == "fail-load-timeout-words":  # words are not the cause
            raise RuntimeError("engine refused: its log says 'was not healthy after 9 s' (fake)")
        return {"actual_runner": self.variant or "fake", "device": req.device, "versions": {}}

    def run(self, task: str, items: list, request: Request) -> RunResult:
        # a test may ask one run to misbehave (its request's `hf`), else the load's behaviour
        b = request.hf.get("behaviour", self.opts.get("behaviour", "echo"))
        print(f"fake run: {b}", file=sys.stderr, flush=True)  # tests wait for this line
        if b == "crash":
            os.abort()
        if b == "exit":
            os._exit(3)
        if b == "oom":  # what the kernel's OOM killer does
            os.kill(os.getpid(), signal.SIGKILL)
        if b == "hang":
            time.sleep(3600)
        if b == "hang-ignoring-sigterm":  # only SIGKILL ends it (a worker deaf to SIGTERM)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            print("fake run: ignoring SIGTERM", file=sys.stderr, flush=True)
            time.sleep(3600)
        if b == "raise":
            raise ValueError("fake runner raised on purpose")
        if b == "skip":  # what a recipe whose pinned package is missing raises
            raise SkipCase("fake runner cannot run this case here")
        dim = int(self.opts.get("dim", 8))
        outs = []
        for it in items:
            seed = int.from_bytes(hashlib.sha256(str(it).encode()).digest()[:8], "little")
            outs.append(np.random.default_rng(seed).normal(size=dim).astype(np.float32))
        if b == "nan":
            outs[0][0] = np.nan
        if b == "inf":
            outs[1][0] = np.inf
        if b == "short":
            outs = outs[:-1]
        return RunResult(outs)  # the test double records nothing per request

    def unload(self) -> None:
        if self.opts.get("unload_marker"):  # tests: proof that the worker unloaded its model
            with open(self.opts["unload_marker"], "a") as f:
                f.write("unloaded\n")
        self.opts = {}
