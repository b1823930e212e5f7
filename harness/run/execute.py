"""Run a plan: one worker process per runner, models loaded one after another, each case's
outputs written to the run folder. A crash, hang or error fails only what it touched."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

from harness.matrix.inputs import input_set
from harness.matrix.prompt_forms import item_forms
from harness.matrix.request import request_of
from harness.matrix.runner_names import REFERENCE_RUNNER, runner_info
from harness.matrix.schema import Case
from harness.run import interrupt
from harness.run.plan import Load, ModelProblem, Plan
from harness.runners import LoadRequest
from harness.runners import pool as worker_pool
from harness.runners.memory import resource_hint
from harness.runners.pool import Worker, WorkerFailure, WorkerTimeout
from harness.settings import Settings, current


@dataclass
class Timeouts:
    start: float = 300.0  # worker process start (imports)
    load: float = 600.0  # one model load
    case: float = 600.0  # one case's forward pass


DEFAULT_RSS_LIMIT_MB = Settings.worker_rss_limit_mb
RSS_LIMIT_ENV = "PARITY_WORKER_RSS_LIMIT_MB"


def rss_limit_mb() -> float:
    """A worker whose resident memory after a model is freed exceeds this is restarted before its
    next load. A fixed number, not a share of the host: the verdict must not depend on the host."""
    return current().worker_rss_limit_mb


@dataclass
class RunOutcome:
    case_id: str
    runner: str
    status: str  # ok | skip | error
    reason: str = ""  # for people: may end with the worker's log tail
    error: str = (
        ""  # the error's own message, never a log tail: what skip_if_error / error_match see
    )
    output: str | None = None
    info: dict = field(default_factory=dict)
    load_seconds: float | None = None
    run_seconds: float | None = None
    timed_out: bool = False  # the error is a limit running out (WorkerTimeout, ServerTimeout)


class LoadProblem(NamedTuple):
    """Why a model did not load: for people, the error's own message, and whether a time limit
    ran out (a slow machine looks the same as a hang)."""

    reason: str
    error: str
    timed_out: bool = False


Progress = Callable[[str, RunOutcome | None], None]


def output_path(run_dir: Path, case_id: str, runner: str) -> Path:
    return Path(run_dir) / "outputs" / case_id / f"{runner}.safetensors"


class Executor:
    def __init__(
        self,
        plan: Plan,
        run_dir: Path,
        timeouts: Timeouts | None = None,
        jobs: int | None = None,
        progress: Progress | None = None,
        make_request: "Callable[[Case, str, Path], tuple[dict, Path]] | None" = None,
        fresh_worker_per_load: bool = False,
    ):
        self.plan = plan
        self.run_dir = Path(run_dir)
        self.timeouts = timeouts or Timeouts()
        # lanes: one per runner queue, at most what the platform lets hold an engine at once
        self.jobs = min(jobs or len(plan.queues) or 1, plan.platform.max_lanes(os.cpu_count() or 1))
        self.progress = progress or (lambda msg, outcome: None)
        self.make_request = make_request or self._run_request
        self.fresh_worker_per_load = fresh_worker_per_load  # naive layout, for benchmarks
        self.outcomes: dict[tuple[str, str], RunOutcome] = {}
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.workers: list[Worker] = []
        self.rss_limit_mb = rss_limit_mb()

    def _record(self, outcome: RunOutcome) -> None:
        with self._lock:
            self.outcomes[(outcome.case_id, outcome.runner)] = outcome
        self.progress(f"{outcome.case_id} [{outcome.runner}] {outcome.status}", outcome)

    def run(self) -> dict[tuple[str, str], RunOutcome]:
        # cases whose model could not be had: every runner gets the same verdict, nothing starts
        for case in self.plan.cases:
            problem = self.plan.models[case.id]
            if isinstance(problem, ModelProblem):
                for runner in self.plan.runners_of(case):
                    self._record(RunOutcome(case.id, runner, problem.status, problem.reason))
        for (case_id, runner), why in self.plan.limits.items():  # what this platform cannot run
            self._record(RunOutcome(case_id, runner, "skip", why))
        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        self._pending = {runner: list(loads) for runner, loads in self.plan.queues.items() if loads}
        self._serving: dict[int, str] = {}  # slot -> the runner whose loads it is taking
        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="slot") as pool:
            futures = [pool.submit(self._run_slot, slot, threads) for slot in range(self.jobs)]
            try:
                for f in futures:
                    while not f.done():
                        time.sleep(0.2)
                    f.result()
            except KeyboardInterrupt:  # or a signal (harness.run.interrupt): stop, keep results
                self.stop.set()
                # signals only, from this thread: each lane sees its worker end and closes it
                worker_pool.stop_all()
                raise
        return self.outcomes

    def complete(self) -> bool:
        """Every outcome the plan asked for is in (a signal while workers wind down loses none)."""
        wanted = {(c.id, ld.name) for q in self.plan.queues.values() for ld in q for c in ld.cases}
        with self._lock:
            return wanted <= self.outcomes.keys()

    def _next_load(self, last: str | None, slot: int = 0) -> Load | None:
        """Keep a slot on its runner while that runner has loads (no new process). Otherwise take
        the reference first (every row is judged against it: a run stopped part-way keeps a
        verdict for each vLLM case it finished), then the runner with the most work left that no
        other slot is serving, so each runner kind starts its worker (importing torch and vLLM,
        ~5-10 s) in as few slots as possible; join a served runner only when no other has work
        left."""
        with self._lock:
            if last in self._pending and self._pending[last]:
                return self._pending[last].pop(0)
            left = {r: sum(_cost(r, load) for load in q) for r, q in self._pending.items() if q}
            if not left:
                self._serving.pop(slot, None)
                return None
            others = {r for s, r in self._serving.items() if s != slot}
            free = {r: c for r, c in left.items() if r not in others} or left
            runner = max(free, key=lambda r: (r == REFERENCE_RUNNER, free[r]))
            self._serving[slot] = runner
            return self._pending[runner].pop(0)

    def _run_slot(self, slot: int, threads: int) -> None:
        """One parallel lane: runs loads one after another, one worker process per runner kind it
        has served (kept for its next load of that kind), all stopped at the end."""
        workers: dict[str, Worker] = {}
        last: str | None = None
        try:
            while not self.stopping():
                load = self._next_load(last, slot)
                if load is None:
                    break
                if load.runner not in workers:
                    suffix = f".{slot}" if self.jobs > 1 else ""
                    workers[load.runner] = Worker(
                        load.runner,
                        self.plan.platform.worker_env(load.runner),
                        self.run_dir / "logs" / f"{load.runner}{suffix}.log",
                        threads=threads,
                    )
                    workers[load.runner].lane = slot
                    self.workers.append(workers[load.runner])
                if last is not None and last != load.runner and last in workers:
                    workers[last].stop()  # one engine-sized process per lane at a time
                    del workers[last]
                self._run_load(workers[load.runner], load)
                last = load.runner
                if self.fresh_worker_per_load:
                    workers.pop(load.runner).stop()
        finally:
            for w in workers.values():
                w.stop()

    def _load_model(self, worker: Worker, load: Load) -> tuple[dict | None, LoadProblem]:
        """(info, LoadProblem("", "")) when loaded, else (None, the problem). Starts the worker
        if needed."""
        req = LoadRequest(
            model_dir=str(load.model.path),
            dtype=load.dtype,
            device=self.plan.platform.device,
            engine=load.engine,
            hf=load.hf,
            trust_remote_code=load.trust_remote_code,
            lora_dir=str(load.model.adapter) if load.model.adapter else None,
        )
        self.progress(f"loading {load.model.description} in {load.name}", None)
        started = 0.0
        if worker.alive and worker.rss_mb is not None and worker.rss_mb > self.rss_limit_mb:
            self.progress(
                f"recycling the {load.runner} worker: {worker.rss_mb:.0f} MiB resident after its "
                f"last model, limit {self.rss_limit_mb:.0f} MiB ({RSS_LIMIT_ENV})",
                None,
            )
            worker.stop()
            worker.recycles += 1
        try:
            if not worker.alive:
                t0 = time.perf_counter()
                worker.start(self.timeouts.start)
                started = time.perf_counter() - t0
            ans = worker.request(
                {"op": "load", "request": asdict(req)}, self.timeouts.load, "model load"
            )
        except WorkerFailure as e:
            return None, LoadProblem(
                f"worker failure while loading the model: {e}",
                e.summary,
                isinstance(e, WorkerTimeout),
            )
        worker.note_memory(ans)
        if not ans.get("ok"):
            self._save_traceback(worker, ans)
            error = str(ans.get("error"))
            hint = resource_hint(error)
            return None, LoadProblem(
                f"engine/model failed to load: {error}" + (f" [{hint}]" if hint else ""),
                error,
                bool(ans.get("timed_out")),
            )
        worker.loads += 1
        # the first load in a worker includes importing torch/vLLM (worker_start is the process)
        return {
            **ans.get("info", {}),
            "import_seconds": ans.get("import_seconds", 0.0),
            "worker_start_seconds": started,
            "load_seconds": ans.get("seconds"),
            "worker_rss_mb": ans.get("rss_mb"),
            "worker_pid": worker.proc.pid if worker.proc else None,
        }, LoadProblem("", "")

    def stopping(self) -> bool:
        """The run is being stopped: what fails now was stopped, not run (no outcome)."""
        return self.stop.is_set() or worker_pool.stopping()

    def _run_load(self, worker: Worker, load: Load) -> None:
        info, problem = self._load_model(worker, load)
        for i, case in enumerate(load.cases):
            if self.stopping():
                return
            if info is None:
                self._record(
                    RunOutcome(
                        case.id,
                        load.name,
                        "error",
                        problem.reason,
                        error=problem.error,
                        timed_out=problem.timed_out,
                    )
                )
                continue
            msg, out = self.make_request(case, load.name, self.run_dir)
            try:
                ans = worker.request(msg, self.timeouts.case, f"case {case.id}")
            except WorkerFailure as e:
                if self.stopping():
                    return
                self._record(
                    RunOutcome(
                        case.id,
                        load.name,
                        "error",
                        f"worker failure: {e}",
                        error=e.summary,
                        info=info,
                        timed_out=isinstance(e, WorkerTimeout),
                    )
                )
                if i + 1 < len(load.cases):  # a fresh worker and a fresh load for the cases left
                    info, problem = self._load_model(worker, load)
                    if info is None:
                        problem = problem._replace(
                            reason=f"not run: reloading after the worker failure failed: "
                            f"{problem.reason}"
                        )
                continue
            if ans.get("ok"):
                run_info = {**info, "requests": ans["requests"]} if ans.get("requests") else info
                self._record(
                    RunOutcome(
                        case.id,
                        load.name,
                        "ok",
                        output=str(out),
                        info=run_info,
                        load_seconds=info.get("load_seconds"),
                        run_seconds=ans.get("seconds"),
                    )
                )
            elif self.stopping():  # an engine core or server stopped under the worker
                return
            else:
                self._save_traceback(worker, ans)
                skip = bool(ans.get("skip"))  # the runner cannot run it here (SkipCase)
                self._record(
                    RunOutcome(
                        case.id,
                        load.name,
                        "skip" if skip else "error",
                        str(ans.get("error")) if skip else f"runner raised {ans.get('error')}",
                        error=str(ans.get("error")),
                        info=info,
                        load_seconds=info.get("load_seconds"),
                        timed_out=bool(ans.get("timed_out")),
                    )
                )
        if info is not None:
            try:
                worker.note_memory(worker.request({"op": "unload"}, self.timeouts.load, "unload"))
            except WorkerFailure:
                pass  # the next load restarts the worker

    @staticmethod
    def _run_request(case: Case, runner: str, run_dir: Path) -> tuple[dict, Path]:
        """The `run` request of a case: its inputs through the runner, outputs to the run folder."""
        out = output_path(run_dir, case.id, runner)
        items = list(input_set(case.inputs).items)
        # what each item is sent as, the reference's too
        forms = item_forms(case.prompt_form, len(items)) if case.prompt_form != "text" else None
        request = request_of(case, runner_info(runner).is_hf, forms)
        return {
            "op": "run",
            "task": case.task,
            "items": items,
            "request": request.wire(),
            "out": str(out),
        }, out

    @staticmethod
    def _save_traceback(worker: Worker, ans: dict) -> None:
        """The worker's traceback, into that worker's own log (`<runner>.<lane>.log` when lanes
        run side by side), beside what it printed before it."""
        tb = ans.get("traceback")
        if tb:
            worker.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(worker.log_path, "a") as f:
                f.write(f"\n--- traceback reported by the worker ---\n{tb}\n")


def _cost(runner: str, load: Load) -> float:
    """Relative cost of a load, for balancing lanes: V2 on CPU runs interpreted Triton kernels."""
    # a server start (API process + engine core, each importing vLLM) costs several engine loads
    info = runner_info(runner)
    if info.is_reference:
        base = 0.5
    elif info.is_offline_vllm and info.variant == "v1":
        base = 1.0
    elif info.is_async:  # its engine core is a spawned process that imports vLLM
        base = 3.0
    else:
        base = 5.0 if info.is_server else 2.0
    return base + 0.1 * len(load.cases)


def execute(executor: Executor) -> tuple[dict[tuple[str, str], RunOutcome], str]:
    """(outcomes, partial reason). Ctrl-C or SIGTERM keeps the outcomes so far and marks the
    report partial; from then on the report is finished before a first signal stops the run."""
    try:
        return executor.run(), ""
    except KeyboardInterrupt as e:
        return dict(executor.outcomes), "" if executor.complete() else interrupt.reason(e)
    finally:
        interrupt.finishing()
