"""Run the catalogue: a clean baseline once, then one `parity run` per mutation on its rows.

Talks to the harness only through its CLI (`python -m harness.cli select|run`) and the
report.json files a run writes, so it keeps working when the harness's modules move.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.matrix.runner_names import runner_info
from harness.power.catalogue import Mutation
from harness.power.hook import ENV_LOG, ENV_NAME, version_applies

SITE = Path(__file__).resolve().parent / "site"
GREEN = ("pass", "xfail")  # a row the gate lets through
RED = ("fail", "error", "xpass")  # a row that fails the gate


@dataclass
class Outcome:
    """What one mutation did: applied where, which rows it turned red."""

    mutation: Mutation
    # caught | missed | baseline not green | not applicable | not applied | needs gpu | no rows
    status: str = "pending"
    # | error (its rows could not be selected) | inconclusive (red only by timeouts)
    reason: str = ""
    rows: list[tuple[str, str]] = field(default_factory=list)  # selected (case, runner)
    caught: list[dict] = field(default_factory=list)  # {case, runner, status, message}
    inconclusive: list[dict] = field(default_factory=list)  # red only by a timeout
    applied_in: list[dict] = field(default_factory=list)  # evidence events
    seconds: float = 0.0
    run_dir: str = ""
    left_out: str = ""  # rows it could touch that this run left out, and why (lean_rows)

    @property
    def processes(self) -> int:
        return len({e["pid"] for e in self.applied_in})


# code that runs inside the engine (model, pooler, scheduler, model runner, compilation): an
# offline row and a `vllm serve` row of the same case run the same lines of it
ENGINE_SIDE = ("vllm/model_executor/", "vllm/v1/", "vllm/compilation/", "vllm/attention/")


def engine_side(m: Mutation) -> bool:
    return bool(m.files) and all(f.startswith(ENGINE_SIDE) for f in m.files)


def lean_rows(m: Mutation, rows: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], str]:
    """The rows a mutation runs by default, and what was left out. A mutation of engine-side
    code (ENGINE_SIDE) runs its offline rows only when it has any: its server rows would run the
    same engine code again behind a `vllm serve` start (~40-60 s each on 2 cores). Mutations of
    the server, the renderer or the tokenizer (the API process) keep every row, and
    `--server-rows all` keeps them for all (the nightly measure)."""
    if not engine_side(m):
        return rows, ""
    offline = [(c, r) for c, r in rows if not runner_info(r).is_server]
    if not any(not runner_info(r).is_reference for _, r in offline):
        return rows, ""
    left = sorted({r for _, r in rows if runner_info(r).is_server})
    if not left:
        return rows, ""
    return (
        offline,
        f"server rows ({', '.join(left)}) left out: engine-side code, offline rows run it",
    )


def _selection_args(
    m: Mutation | None, files: list[str], rows: list[tuple[str, str]] | None = None
) -> list[str]:
    """`parity run` selection of a mutation: its files, narrowed by CASES and RUNNERS, and, where
    its rows were narrowed further (lean_rows), by the runners of the rows it keeps."""
    args = ["--changed-files", *files]
    if m is not None and m.cases:
        args += ["-k", *m.cases]
    runners = sorted({r for _, r in rows}) if rows else (list(m.runners) if m else [])
    if runners:
        args += ["-r", *runners]
    return args


def other_matrix(m: Mutation, matrix: str | Path) -> str | None:
    """Why a mutation whose cases live in another matrix (its MATRIX) is not run against this one
    (the checks that catch it are too slow for the default matrix), else None."""
    if m.matrix is None:
        return None
    here = Path(matrix).resolve()
    if here == Path(m.matrix).resolve() or here.parts[-2:] == Path(m.matrix).parts[-2:]:
        return None
    return f"its cases are in {m.matrix}: parity power -m {m.matrix} --only {m.name}"


def baseline_args(todo: list[Outcome]) -> list[str]:
    """One run covering every row any mutation will run: the union of their files, their
    cases (a derived `<id>@<check>` row comes with its case) and their runners."""
    files = sorted({f for o in todo for f in o.mutation.files})
    cases = sorted({case.split("@")[0] for o in todo for case, _ in o.rows})
    runners = sorted({runner for o in todo for _, runner in o.rows})
    return ["--changed-files", *files, "-k", *cases, "-r", *runners]


def reference_args(todo: list[Outcome]) -> list[str]:
    """The cases whose HF reference the catalogue needs (a derived `<id>@<check>` row is held to
    its base case's reference)."""
    return ["-k", *sorted({case.split("@")[0] for o in todo for case, _ in o.rows})]


def record_reference(
    matrix: str, todo: list[Outcome], out: Path, python: str = sys.executable
) -> list[str]:
    """Run HF once over every case the catalogue touches and keep its outputs as goldens in
    out/reference: the clean baseline and every mutated run then read them (`--against golden`)
    instead of starting HF again, so the HF side of each comparison is the same bytes throughout.
    A vLLM mutation cannot reach HF's process, so one recording serves them all. Returns the
    selection arguments that make a run read it."""
    ref = out / "reference"
    cmd = [python, "-m", "harness.cli", "golden", "update", "-m", matrix]
    cmd += [*reference_args(todo), "--golden-dir", str(ref / "golden"), "--out", str(ref)]
    ref.mkdir(parents=True, exist_ok=True)
    with open(ref / "run.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    recorded = read_results(ref / "report.json")
    # nothing recorded is right only when the run said there was nothing to record: every case
    # selected is an expected refusal (no HF reference exists for one); else HF failed to start
    if not (ref / "golden").is_dir() and (recorded or not (ref / "report.json").is_file()):
        raise RuntimeError(f"the HF reference recorded nothing: see {ref / 'run.log'}")
    (ref / "golden").mkdir(parents=True, exist_ok=True)
    return ["--against", "golden", "--golden-dir", str(ref / "golden")]


@dataclass
class Selected:
    """What `parity select` gave a mutation: its rows, the vLLM version under test, and the
    selected cases that version is outside the `vllm_releases` of (case id -> why)."""

    rows: list[tuple[str, str]] = field(default_factory=list)
    vllm_version: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    def runnable(self) -> list[tuple[str, str]]:
        return [(c, r) for c, r in self.rows if c not in self.skipped]


def select_rows(m: Mutation, matrix: str, python: str = sys.executable) -> Selected:
    """The (case, runner) rows `parity select` gives for FILES (narrowed by CASES / RUNNERS)."""
    cmd = [
        python,
        "-m",
        "harness.cli",
        "select",
        "-m",
        matrix,
        "--json",
        *_selection_args(m, list(m.files)),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode == 4:
        return Selected()
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}"
        )
    sel = json.loads(done.stdout)
    return Selected(
        rows=[(r["case"], r["runner"]) for r in sel["rows"]],
        vllm_version=sel.get("vllm_version"),
        skipped={r["case"]: r["skip"] for r in sel["rows"] if r.get("skip")},
    )


def parity_run(
    matrix: str,
    selection: list[str],
    out: Path,
    jobs: int,
    env: dict | None = None,
    python: str = sys.executable,
) -> int:
    """`parity run` of the selected rows into `out`; its output goes to out/run.log."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        python,
        "-m",
        "harness.cli",
        "run",
        "-m",
        matrix,
        "--out",
        str(out),
        "-j",
        str(jobs),
        *selection,
    ]
    with open(out / "run.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode


def mutated_env(name: str, log_dir: Path, base: dict | None = None) -> dict:
    """The environment of a mutated run: the site hook first on PYTHONPATH, the mutation named."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE), env.get("PYTHONPATH")) if p)
    env[ENV_NAME], env[ENV_LOG] = name, str(log_dir)
    return env


def read_results(report: Path) -> dict[tuple[str, str], dict]:
    """(case, runner) -> result of a report.json (missing file: no results)."""
    if not report.is_file():
        return {}
    return {(r["case_id"], r["runner"]): r for r in json.loads(report.read_text())["results"]}


def read_evidence(log_dir: Path) -> list[dict]:
    events = []
    for f in sorted(log_dir.glob("*.jsonl")) if log_dir.is_dir() else []:
        events += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return events


def first_message(result: dict) -> str:
    text = (result.get("reason") or "").strip()
    if not text:
        bad = [m for m in result.get("metrics", []) if not m.get("ok", True)]
        text = "; ".join(
            f"{m['name']} {m['value']:.3g} > {m['bound']:.3g}"
            for m in bad
            if m.get("value") is not None
        )
    return text.splitlines()[0][:300] if text else result.get("status", "")


def judge(outcome: Outcome, baseline: dict, mutated: dict, events: list[dict]) -> None:
    """caught = a row green in the baseline is red now; a mutation applied nowhere never is."""
    outcome.applied_in = [e for e in events if e.get("status") == "applied"]
    refused = [e for e in events if e.get("status") == "not_applicable"]
    if not outcome.applied_in:
        if refused:
            outcome.status, outcome.reason = "not applicable", refused[0].get("reason", "")
        else:
            outcome.status = "not applied"
            outcome.reason = f"no process imported {outcome.mutation.module}: the hook never fired"
        return
    for key in sorted(mutated):
        before, now = baseline.get(key), mutated[key]
        if before and before["status"] in GREEN and now["status"] in RED:
            row = {
                "case": key[0],
                "runner": key[1],
                "status": now["status"],
                "message": first_message(now),
            }
            # an error that says only that something was slow (a server start, a worker past its
            # limit: the report's `timed_out`): a loaded machine makes them without any mutation,
            # so such a row proves nothing either way
            timed_out = now["status"] == "error" and bool(now.get("timed_out"))
            (outcome.inconclusive if timed_out else outcome.caught).append(row)
    if outcome.caught:
        outcome.status = "caught"
        return
    if outcome.inconclusive:
        outcome.status = "inconclusive"
        outcome.reason = (
            f"{len(outcome.inconclusive)} row(s) went red only by timing out (a slow machine "
            f"looks the same): rerun on a quieter machine, or raise PARITY_SERVE_START_TIMEOUT"
        )
        return
    ran = [k for k in mutated if baseline.get(k, {}).get("status") in GREEN]
    if not ran:  # nothing could go red: no verdict on the gate, a baseline to fix first
        was = sorted({baseline[k]["status"] for k in mutated if k in baseline}) or ["no result"]
        outcome.status = "baseline not green"
        outcome.reason = (
            f"none of the {len(mutated)} row(s) it ran was pass or xfail without the mutation "
            f"(baseline: {', '.join(was)}): fix the clean run first, then judge the mutation"
        )
        return
    outcome.status = "missed"
    outcome.reason = f"{len(ran)} green row(s) ran with the mutation applied; none went red"


def _rows_of(o: Outcome, matrix: str, device: str, python: str, server_rows: str) -> bool:
    """The rows a mutation runs on (o.rows, lean or all), decided before any run; False with its
    status and reason when it runs none (needs a GPU, another matrix's or release's, no row)."""
    if o.mutation.needs == "gpu" and device != "cuda":
        o.status, o.reason = "needs gpu", "NEEDS = 'gpu': run by ci/gpu-check"
        return False
    elsewhere = other_matrix(o.mutation, matrix)
    if elsewhere:
        o.status, o.reason = "not applicable", elsewhere
        return False
    try:
        selected = select_rows(o.mutation, matrix, python)
    except RuntimeError as e:  # one mutation's selection failing loses only that mutation
        o.status, o.reason = "error", str(e)
        return False
    # decided before the reference is recorded: a mutation of another release, or whose
    # cases all skip on this vLLM (their vllm_releases), has nothing to record or run
    version = selected.vllm_version
    if version and not version_applies(o.mutation.targets, version):
        o.status = "not applicable"
        o.reason = f"vLLM {version} outside TARGETS {o.mutation.targets!r}"
        return False
    o.rows = selected.runnable()
    if selected.rows and not o.rows:
        case, why = sorted(selected.skipped.items())[0]
        o.status = "not applicable"
        o.reason = f"every case it selects is skipped on this vLLM ({case}: {why})"
        return False
    if not o.rows:
        narrowed = "".join(
            f" {k} {' '.join(v)}"
            for k, v in (("-k", o.mutation.cases), ("-r", o.mutation.runners))
            if v
        )
        o.status = "no rows"
        files = ", ".join(o.mutation.files)
        o.reason = f"`parity select` gives no row of {matrix} for {files}{narrowed}"
        return False
    if server_rows == "lean":
        o.rows, o.left_out = lean_rows(o.mutation, o.rows)
    return True


def run_power(
    mutations: list[Mutation],
    matrix: str,
    out: Path,
    jobs: int = 2,
    device: str = "cpu",
    python: str = sys.executable,
    say=lambda s: print(s, file=sys.stderr, flush=True),
    reference: str = "recorded",
    server_rows: str = "lean",
    outcomes: list[Outcome] | None = None,
) -> list[Outcome]:
    """`reference`: "recorded" runs HF once and holds every run to that recording (the
    default: no HF process per mutation); "live" runs HF again in every run. `server_rows`:
    "lean" (default) leaves out the server rows of engine-side mutations (lean_rows); "all"
    runs every selected row. `outcomes`: one per mutation, filled as each is judged (a caller
    that passes them keeps every result obtained when a signal stops the run)."""
    if reference not in ("recorded", "live"):
        raise ValueError(f"reference must be 'recorded' or 'live', got {reference!r}")
    if server_rows not in ("lean", "all"):
        raise ValueError(f"server_rows must be 'lean' or 'all', got {server_rows!r}")
    start = time.monotonic()
    outcomes = [Outcome(m) for m in mutations] if outcomes is None else outcomes
    todo = []
    for o in outcomes:
        if _rows_of(o, matrix, device, python, server_rows):
            todo.append(o)
    if not todo:
        return outcomes
    against: list[str] = []
    if reference == "recorded":
        t = time.monotonic()
        against = record_reference(matrix, todo, out, python)
        say(f"power: HF reference recorded in {time.monotonic() - t:.0f} s ({out / 'reference'})")
    say(f"power: clean baseline over the {len({r for o in todo for r in o.rows})} row(s) selected")
    t = time.monotonic()
    parity_run(matrix, baseline_args(todo) + against, out / "baseline", jobs, python=python)
    baseline = read_results(out / "baseline" / "report.json")
    if not baseline:
        raise RuntimeError(
            f"the clean baseline wrote no report: see {out / 'baseline' / 'run.log'}"
        )
    say(f"power: baseline {len(baseline)} rows in {time.monotonic() - t:.0f} s")
    report = json.loads((out / "baseline" / "report.json").read_text())
    under_test = report.get("vllm_under_test") or []
    under_test = under_test if isinstance(under_test, list) else [under_test]
    version = next((v.get("version") for v in under_test if v.get("version")), None)
    for o in todo:
        m = o.mutation
        if version and not version_applies(m.targets, version):
            o.status, o.reason = "not applicable", f"vLLM {version} outside TARGETS {m.targets!r}"
            continue
        run_dir, log_dir = out / "mutations" / m.name, out / "mutations" / m.name / "evidence"
        t = time.monotonic()
        parity_run(
            matrix,
            _selection_args(m, list(m.files), o.rows if o.left_out else None) + against,
            run_dir,
            jobs,
            env=mutated_env(m.name, log_dir),
            python=python,
        )
        o.seconds, o.run_dir = time.monotonic() - t, str(run_dir)
        judge(o, baseline, read_results(run_dir / "report.json"), read_evidence(log_dir))
        say(
            f"power: {m.name}: {o.status} ({len(o.caught)} row(s) red, applied in "
            f"{o.processes} process(es), {o.seconds:.0f} s)"
        )
    say(f"power: {len(mutations)} mutation(s) in {time.monotonic() - start:.0f} s")
    return outcomes
