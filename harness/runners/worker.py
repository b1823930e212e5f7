"""A runner's worker process: `python -m harness.runners.worker RUNNER --reply-fd N`.

Reads one JSON request per line on stdin, answers one JSON line per request on the reply fd
(stdout and stderr belong to the libraries and go to the worker's log). One worker serves many
models one after another; a crash here loses only the request in flight.

Requests: {"op": "load", "request": LoadRequest}, {"op": "run", "task", "items", "request"
(harness.matrix.request.Request, as JSON), "out"}, {"op": "unload"}, {"op": "shutdown"}.
Answers: {"ok": true, ...} or {"ok": false, "error": "...", "traceback": "..."}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

from harness.matrix.evidence import RequestsEvidence, RunEvidence
from harness.matrix.request import Request
from harness.runners import LoadRequest, SkipCase, create
from harness.runners.engine_trace import summarize
from harness.runners.outputs import save_items
from harness.runners.reap import watch_parent


def _serve(runner_name: str, reply) -> None:
    runner = None
    loaded = False
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            msg = json.loads(line)
            op = msg.get("op")
            t0 = time.perf_counter()
            try:
                if op == "shutdown":
                    if runner is not None and loaded:
                        runner.unload()
                        loaded = False
                    reply({"ok": True})
                    return
                if runner is None:
                    t_imp = time.perf_counter()
                    runner = create(runner_name)
                    import_s = time.perf_counter() - t_imp
                else:
                    import_s = 0.0
                if op == "load":
                    if loaded:
                        runner.unload()
                        loaded = False
                    info = runner.load(LoadRequest(**msg["request"]))
                    loaded = True
                    reply(
                        {
                            "ok": True,
                            "info": info,
                            "seconds": time.perf_counter() - t0,
                            "import_seconds": import_s,
                            **memory_mb(),
                        }
                    )
                elif op == "run":
                    if not loaded:
                        raise RuntimeError("run requested before a model was loaded")
                    reply(_run(runner, runner_name, msg, t0))
                elif op == "mteb":
                    if not loaded:
                        raise RuntimeError("mteb requested before a model was loaded")
                    reply({"ok": True, **_mteb(runner, msg), "seconds": time.perf_counter() - t0})
                elif op == "unload":
                    if loaded:
                        runner.unload()
                        loaded = False
                    reply({"ok": True, **memory_mb()})
                else:
                    raise ValueError(f"unknown op {op!r}")
            except Exception as e:  # noqa: BLE001 - report, keep serving
                reply(
                    {
                        "ok": False,
                        "error": f"{type(e).__name__}: {e}".strip()[:4000],
                        # a limit ran out (ServerTimeout): slowness, not necessarily a bug
                        "timed_out": bool(getattr(e, "timed_out", False)),
                        "skip": isinstance(e, SkipCase),  # not runnable here; nothing failed
                        "traceback": traceback.format_exc()[-6000:],
                    }
                )

    finally:
        # however the loop ends (the parent gone: stdin at EOF, or a reply into its closed pipe),
        # a loaded model is unloaded: a `vllm serve` this worker started stops with it, never
        # outliving the harness run that wanted it (seen: a run killed by its user left two
        # servers behind, parented to init)
        if runner is not None and loaded:
            runner.unload()


def _run(runner, runner_name: str, msg: dict, t0: float) -> dict:
    """A `run` request: the items through the runner as the case's Request says, the outputs
    saved, and the answer (with the requests' evidence)."""
    request = Request(**msg.get("request", {}))
    result = runner.run(msg["task"], msg["items"], request)
    outs = result.outputs
    run_s = time.perf_counter() - t0
    save_items(msg["out"], outs, {"runner": runner_name, "task": msg["task"]})
    requests = _requests(result.evidence, msg["out"])
    return {"ok": True, "seconds": run_s, "n": len(outs), "requests": requests}


def _requests(evidence: RunEvidence, out: str) -> dict | None:
    """A summary of what the engine reported per request (prompt lengths, prefix-cache hits) as
    the JSON object of a RequestsEvidence; the records themselves (token ids, ...) go beside the
    outputs (`<out>.requests.json`)."""
    meta = evidence.records
    if not meta:
        return None
    with open(out + ".requests.json", "w") as f:
        json.dump(meta, f)
    lengths = [len(m["prompt_token_ids"]) for m in meta if m.get("prompt_token_ids") is not None]
    cached = [m["num_cached_tokens"] for m in meta if m.get("num_cached_tokens") is not None]
    in_flight = [m["in_flight"] for m in meta if m.get("in_flight") is not None]
    summary = RequestsEvidence(
        count=len(meta),
        max_prompt_tokens=max(lengths, default=None),
        min_prompt_tokens=min(lengths, default=None),
        cached_tokens=sum(cached) if cached else None,
        requests_with_cache_hits=sum(1 for c in cached if c > 0) if cached else None,
        peak_in_flight=max(in_flight, default=None),
        server_restarts=max(
            (m["server_restarts"] for m in meta if "server_restarts" in m), default=None
        ),
        **summarize(meta),
        **evidence.run.wire(),
    )
    return summary.wire()


def memory_mb() -> dict[str, float | None]:
    """This process's resident memory now and at its peak, in MiB (the parent recycles a worker
    that grew too large, and reports the peak)."""
    import resource

    rss = None
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return {"rss_mb": rss, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _mteb(runner, msg: dict) -> dict:
    """Run mteb with this worker's loaded model; requests are shuffled with a seeded generator and
    restored (as vLLM's own MTEB encoder does), so scheduling bugs surface."""
    from pathlib import Path

    from harness.runners.mteb import evaluate
    from harness.runners.options import run_with_options

    request = Request(**msg.get("request", {}))
    shuffle = Request(shuffle_seed=msg.get("shuffle_seed"))

    def run(task: str, items: list):
        return run_with_options(
            lambda b: runner.run(task, b, request).outputs, list(items), shuffle
        )

    scores = evaluate(
        run, msg["task"], msg["tasks"], msg["model_name"], msg["revision"], Path(msg["out_dir"])
    )
    out = Path(msg["out"])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(scores, indent=2, sort_keys=True))
    tmp.replace(out)
    return {"scores": scores}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.runners.worker")
    ap.add_argument("runner")
    ap.add_argument("--reply-fd", type=int, required=True)
    args = ap.parse_args(argv)
    watch_parent()  # a harness killed outright (SIGKILL) must not leave this worker running
    out = os.fdopen(args.reply_fd, "w", buffering=1)

    def reply(obj: dict) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    reply({"ok": True, "ready": True, "pid": os.getpid()})
    _serve(args.runner, reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
