"""Judging a mutation: caught only by rows green in the baseline and red with it applied."""

import os
from pathlib import Path

from harness.power import report
from harness.power.catalogue import Mutation
from harness.power.runner import SITE, Outcome, judge, mutated_env

MUT = Mutation(
    name="m",
    path=Path("m.py"),
    doc="Breaks m.",
    targets=">=0.32",
    bug_class="head",
    replays=None,
    module="vllm.x",
    files=("vllm/x.py",),
)
APPLIED = [
    {"pid": 1, "status": "applied", "module": "vllm.x"},
    {"pid": 2, "status": "applied", "module": "vllm.x"},
]


def _r(status, reason="", timed_out=False):
    return {"status": status, "reason": reason, "metrics": [], "timed_out": timed_out}


def test_caught_by_a_row_green_before_and_red_now():
    o = Outcome(MUT)
    base = {
        ("a", "vllm-v1"): _r("pass"),
        ("b", "vllm-v1"): _r("xfail"),
        ("c", "vllm-v1"): _r("fail"),
    }
    now = {
        ("a", "vllm-v1"): _r("fail", "max_abs 0.3 > 1e-5\nmore"),
        ("b", "vllm-v1"): _r("xfail"),
        ("c", "vllm-v1"): _r("fail"),
    }
    judge(o, base, now, APPLIED)
    assert o.status == "caught" and o.processes == 2
    assert o.caught == [
        {"case": "a", "runner": "vllm-v1", "status": "fail", "message": "max_abs 0.3 > 1e-5"}
    ]


def test_a_mutation_whose_rows_were_red_without_it_is_not_called_missed():
    """Missed says the gate ran green rows and none went red; with a baseline that errored on
    every row nothing could go red, and the report must say so (it fails the run either way)."""
    base = {("a", "vllm-v1"): _r("error", "engine failed"), ("b", "vllm-v1"): _r("fail")}
    now = {("a", "vllm-v1"): _r("error", "engine failed"), ("b", "vllm-v1"): _r("fail")}
    o = Outcome(MUT)
    judge(o, base, now, APPLIED)
    assert o.status == "baseline not green" and o.status in report.FAILING
    assert "none of the 2 row(s)" in o.reason and "error, fail" in o.reason
    o = Outcome(MUT)  # one green row that stayed green: a miss
    judge(o, {**base, ("c", "vllm-v1"): _r("pass")}, {**now, ("c", "vllm-v1"): _r("pass")}, APPLIED)
    assert o.status == "missed" and o.reason.startswith("1 green row(s)")


def test_a_row_red_only_by_a_timeout_is_inconclusive_never_caught():
    """A server that did not start in time, or a worker past its limit, turns a row red on a
    loaded machine with no mutation at all: such rows are kept apart and, alone, fail the
    mutation as inconclusive (seen: a float16 encoding mutation "caught" by four start timeouts)."""
    slow = "vllm serve was not healthy after 420 s (PARITY_SERVE_START_TIMEOUT raises the limit)"
    base = {("a", "vllm-serve-v1"): _r("pass"), ("b", "vllm-v1"): _r("pass")}
    o = Outcome(MUT)
    judge(
        o,
        base,
        {("a", "vllm-serve-v1"): _r("error", slow, True), ("b", "vllm-v1"): _r("pass")},
        APPLIED,
    )
    assert o.status == "inconclusive" and not o.caught and len(o.inconclusive) == 1
    assert "timing out" in o.reason and o.status in report.FAILING
    hung = "vllm-v1 worker timed out after 600 s during case; log tail ..."
    o = Outcome(MUT)
    judge(
        o,
        base,
        {("a", "vllm-serve-v1"): _r("error", hung, True), ("b", "vllm-v1"): _r("fail")},
        APPLIED,
    )
    assert o.status == "caught" and [c["case"] for c in o.caught] == ["b"]
    assert [c["case"] for c in o.inconclusive] == ["a"]
    # an error that is not a timeout (the engine refused to load) is a catch
    o = Outcome(MUT)
    judge(o, base, {("a", "vllm-serve-v1"): _r("error", "engine failed to load")}, APPLIED)
    assert o.status == "caught"
    # the report's timed_out decides, not words: an engine error whose text (a log line) reads
    # like a start timeout is a catch
    o = Outcome(MUT)
    judge(o, base, {("a", "vllm-serve-v1"): _r("error", slow, timed_out=False)}, APPLIED)
    assert o.status == "caught" and not o.inconclusive


def test_a_row_red_in_the_baseline_catches_nothing():
    o = Outcome(MUT)
    judge(o, {("c", "r"): _r("error")}, {("c", "r"): _r("error")}, APPLIED)
    assert o.status == "baseline not green" and not o.caught


def test_xfail_that_changes_or_passes_is_caught():
    o = Outcome(MUT)
    judge(
        o,
        {("d", "r"): _r("xfail"), ("e", "r"): _r("xfail")},
        {("d", "r"): _r("fail", "the recorded divergence changed"), ("e", "r"): _r("xpass")},
        APPLIED,
    )
    assert o.status == "caught" and len(o.caught) == 2


def test_never_applied_is_never_caught_even_if_rows_go_red():
    o = Outcome(MUT)
    judge(o, {("a", "r"): _r("pass")}, {("a", "r"): _r("fail")}, [])
    assert o.status == "not applied" and not o.caught
    o = Outcome(MUT)
    judge(
        o,
        {("a", "r"): _r("pass")},
        {("a", "r"): _r("fail")},
        [{"pid": 1, "status": "not_applicable", "reason": "AttributeError: gone"}],
    )
    assert o.status == "not applicable" and "gone" in o.reason and not o.caught


def test_report_and_exit_code():
    caught, missed, gpu = Outcome(MUT), Outcome(MUT), Outcome(MUT)
    judge(caught, {("a", "r"): _r("pass")}, {("a", "r"): _r("fail", "boom")}, APPLIED)
    judge(missed, {("a", "r"): _r("pass")}, {("a", "r"): _r("pass")}, APPLIED)
    gpu.status = "needs gpu"
    meta = {"matrix": "m.yaml", "wall_seconds": 3.0}
    md = report.to_markdown([caught, missed, gpu], meta)
    assert "1 caught, 1 not caught" in md and "a · r (fail): boom" in md
    assert "## Not caught" in md and "`m` (missed): 1 green row(s)" in md
    assert "<table>" in report.to_html([caught, missed, gpu], meta)
    assert report.exit_code([caught, gpu]) == 0
    assert report.exit_code([caught, missed]) == 1


def test_mutated_env_puts_the_site_hook_first():
    env = mutated_env("m", Path("/tmp/log"), {"PYTHONPATH": "/a"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(SITE), "/a"]
    assert env["PARITY_MUTATION"] == "m" and env["PARITY_MUTATION_LOG"] == "/tmp/log"


def test_baseline_covers_exactly_the_union_of_the_selected_rows():
    from harness.power.runner import baseline_args

    a, b = Outcome(MUT), Outcome(MUT)
    a.rows = [("x", "vllm-v1"), ("x@shuffle", "vllm-v1")]
    b.rows = [("y", "vllm-serve-v2")]
    assert baseline_args([a, b]) == [
        "--changed-files",
        "vllm/x.py",
        "-k",
        "x",
        "y",
        "-r",
        "vllm-serve-v2",
        "vllm-v1",
    ]


def test_a_mutation_of_another_matrix_is_not_applicable_here_and_runs_nothing(tmp_path):
    """The extended matrix's mutations (MATRIX) are neither missed nor run against pooling.yaml:
    the checks that catch them are not there."""
    from dataclasses import replace

    from harness.power.catalogue import load
    from harness.power.runner import other_matrix, run_power

    ext = replace(MUT, matrix="matrices/extended.yaml")
    assert other_matrix(MUT, "matrices/pooling.yaml") is None
    assert other_matrix(ext, "matrices/extended.yaml") is None
    assert other_matrix(ext, str(Path("matrices/extended.yaml").resolve())) is None
    why = other_matrix(ext, "matrices/pooling.yaml")
    assert (
        why
        == "its cases are in matrices/extended.yaml: parity power -m matrices/extended.yaml --only m"
    )
    (o,) = run_power([ext], "matrices/pooling.yaml", tmp_path, python="/nonexistent")
    assert o.status == "not applicable" and o.reason == why
    assert o.status not in report.FAILING
    declared = {m.name: m.matrix for m in load()}
    assert declared["deep_chunk_last_pool_one_step_stale"] == "matrices/extended.yaml"


FAKE_CLI = """#!/usr/bin/env python3
import json, sys
from pathlib import Path
argv = sys.argv[3:]  # after `-m harness.cli`
with open(ARGV_LOG, "a") as f:
    f.write(json.dumps(argv) + "\\n")
def opt(name):
    return argv[argv.index(name) + 1]
if argv[0] == "select":
    import os
    default = {"rows": [{"case": "x", "runner": "vllm-v1"}, {"case": "x", "runner": "hf"}]}
    print(os.environ.get("FAKE_SELECT") or json.dumps(default))
elif argv[0] == "golden":
    import os
    mode = os.environ.get("FAKE_GOLDEN", "records")
    if mode == "records":
        (Path(opt("--golden-dir")) / "x").mkdir(parents=True)
    rows = [] if mode == "refusals-only" else [{"case_id": "x", "runner": "hf", "status": "pass"}]
    if mode != "crashes":
        (Path(opt("--out")) / "report.json").write_text(json.dumps({"results": rows}))
elif argv[0] == "run":
    out = Path(opt("--out"))
    red = "mutations" in out.parts
    rows = [{"case_id": "x", "runner": "vllm-v1", "status": "fail" if red else "pass",
             "reason": "off", "metrics": []}]
    (out / "report.json").write_text(json.dumps({"results": rows}))
    if red:
        ev = Path(__import__("os").environ["PARITY_MUTATION_LOG"])
        ev.mkdir(parents=True, exist_ok=True)
        (ev / "1.jsonl").write_text(json.dumps({"pid": 1, "status": "applied"}) + "\\n")
"""


def _fake_python(tmp_path):
    log = tmp_path / "argv.jsonl"
    exe = tmp_path / "python"
    exe.write_text(FAKE_CLI.replace("ARGV_LOG", repr(str(log))))
    exe.chmod(0o755)
    return str(exe), log


def test_recorded_reference_runs_hf_once_and_every_run_reads_it(tmp_path):
    """HF runs once (`golden update` of the selected cases into out/reference); the baseline and
    every mutated run compare against that recording instead of starting HF again."""
    import json

    from harness.power.runner import run_power

    python, log = _fake_python(tmp_path)
    out = tmp_path / "power"
    (o,) = run_power([MUT], "matrices/pooling.yaml", out, python=python, say=lambda s: None)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[0] for c in calls] == ["select", "golden", "run", "run"]
    golden = calls[1]
    assert golden[:2] == ["golden", "update"] and golden[golden.index("-k") + 1 :][:1] == ["x"]
    recorded = golden[golden.index("--golden-dir") + 1]
    assert recorded == str(out / "reference" / "golden")
    for run in calls[2:]:
        assert run[run.index("--against") + 1] == "golden"
        assert run[run.index("--golden-dir") + 1] == recorded
    assert o.status == "caught" and o.caught[0]["runner"] == "vllm-v1"


def test_a_selection_of_refusal_cases_only_records_no_reference_and_still_runs(
    tmp_path, monkeypatch
):
    """A mutation whose rows are all expected refusals (no HF reference exists for one): the
    recording selects nothing and says so (an empty report), and the runs go on; a recording
    that ran cases but wrote nothing, or wrote no report at all, is still an error."""
    import pytest

    from harness.power.runner import record_reference, run_power

    python, _ = _fake_python(tmp_path)
    monkeypatch.setenv("FAKE_GOLDEN", "refusals-only")
    (o,) = run_power([MUT], "matrices/pooling.yaml", tmp_path / "a", python=python, say=print)
    assert o.status == "caught"
    for mode in ("crashes", "records-nothing"):
        monkeypatch.setenv("FAKE_GOLDEN", mode)
        with pytest.raises(RuntimeError, match="the HF reference recorded nothing"):
            record_reference("matrices/pooling.yaml", [o], tmp_path / mode, python=python)


def test_live_reference_runs_hf_beside_every_mutation(tmp_path):
    import json

    from harness.power.runner import run_power

    python, log = _fake_python(tmp_path)
    run_power(
        [MUT],
        "matrices/pooling.yaml",
        tmp_path / "p",
        python=python,
        say=lambda s: None,
        reference="live",
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[0] for c in calls] == ["select", "run", "run"]
    assert all("--against" not in c for c in calls)


def _rows():
    return [
        ("c", "hf"),
        ("c", "vllm-v1"),
        ("c", "vllm-v2"),
        ("serve-c", "hf"),
        ("serve-c", "vllm-serve-v1"),
        ("serve-c", "vllm-serve-v2"),
    ]


def test_lean_rows_leave_out_server_rows_of_engine_side_code_only():
    from dataclasses import replace

    from harness.power.runner import lean_rows

    pooler = replace(MUT, files=("vllm/model_executor/layers/pooler/activations.py",))
    rows, why = lean_rows(pooler, _rows())
    assert rows == [("c", "hf"), ("c", "vllm-v1"), ("c", "vllm-v2"), ("serve-c", "hf")]
    assert "vllm-serve-v1, vllm-serve-v2" in why
    # the API process's code (server, renderer) keeps its server rows
    for files in (("vllm/entrypoints/pooling/utils.py",), ("vllm/renderers/params.py",)):
        assert lean_rows(replace(MUT, files=files), _rows()) == (_rows(), "")
    # engine code with no offline vLLM row keeps the server rows: they are all it has
    only_serve = [r for r in _rows() if r[0] == "serve-c"]
    assert lean_rows(pooler, only_serve) == (only_serve, "")


def test_lean_mutation_run_names_the_runners_it_keeps():
    from dataclasses import replace

    from harness.power.runner import _selection_args, lean_rows

    pooler = replace(MUT, files=("vllm/v1/worker/x.py",), cases=("*c*",))
    rows, _ = lean_rows(pooler, _rows())
    assert _selection_args(pooler, list(pooler.files), rows) == [
        "--changed-files",
        "vllm/v1/worker/x.py",
        "-k",
        "*c*",
        "-r",
        "hf",
        "vllm-v1",
        "vllm-v2",
    ]


def test_a_selection_that_fails_errors_that_mutation_only(tmp_path):
    """`parity select` failing for one mutation (a broken matrix file, a crash) makes that
    mutation an error that fails the report; the others still run."""
    from dataclasses import replace

    from harness.power.runner import run_power

    python, log = _fake_python(tmp_path)
    broken = replace(MUT, name="broken", files=("vllm/broken.py",))
    fake = (
        Path(python)
        .read_text()
        .replace(
            'if argv[0] == "select":',
            'if argv[0] == "select" and "vllm/broken.py" in argv:\n    sys.exit("boom")\n'
            'elif argv[0] == "select":',
        )
    )
    Path(python).write_text(fake)
    a, b = run_power(
        [broken, MUT], "matrices/pooling.yaml", tmp_path / "p", python=python, say=lambda s: None
    )
    assert a.status == "error" and "boom" in a.reason
    assert b.status == "caught"
    assert report.exit_code([a, b]) == 1


def test_declared_picks_the_mutations_written_for_a_matrix():
    from dataclasses import replace

    from harness.power.cli import declared_for, main

    ext = replace(MUT, name="e", matrix="matrices/extended.yaml")
    anywhere = replace(MUT, name="a")
    assert declared_for([ext, anywhere], "matrices/extended.yaml") == [ext]
    assert declared_for([ext, anywhere], "matrices/pooling.yaml") == []
    assert main(["--declared", "-m", "matrices/pooling.yaml", "--list"]) == 2
    assert main(["--declared", "-m", "matrices/extended.yaml", "--list"]) == 0


def test_a_mutation_of_other_releases_is_not_applicable_before_anything_runs(tmp_path, monkeypatch):
    """The version `parity select` reports is checked against TARGETS before the reference is
    recorded: a mutation of vLLM 0.28 (its module gone later) records and runs nothing on 0.32."""
    import json
    from dataclasses import replace

    from harness.power.runner import run_power

    python, log = _fake_python(tmp_path)
    rows = [{"case": "x", "runner": "vllm-v1"}, {"case": "x", "runner": "hf"}]
    monkeypatch.setenv("FAKE_SELECT", json.dumps({"vllm_version": "0.32.0", "rows": rows}))
    old = replace(MUT, targets=">=0.28,<0.29")
    (o,) = run_power([old], "matrices/pooling.yaml", tmp_path / "p", python=python, say=print)
    assert o.status == "not applicable" and o.reason == "vLLM 0.32.0 outside TARGETS '>=0.28,<0.29'"
    assert [json.loads(line)[0] for line in log.read_text().splitlines()] == ["select"]
    assert o.status not in report.FAILING


def test_a_mutation_whose_cases_all_skip_on_this_release_records_no_reference(
    tmp_path, monkeypatch
):
    """Rows `parity select` marks as skipped (their case's vllm_releases exclude this vLLM) are
    left out before the reference is recorded; when none is left, the mutation is not applicable
    (recording a reference of cases that cannot run would record nothing, an error)."""
    import json

    from harness.power.runner import run_power

    python, log = _fake_python(tmp_path)
    why = "vLLM 0.32.0 is outside vllm_releases '<0.29': gone"
    rows = [{"case": "x", "runner": r, "skip": why} for r in ("hf", "vllm-v1")]
    monkeypatch.setenv("FAKE_SELECT", json.dumps({"vllm_version": "0.32.0", "rows": rows}))
    (o,) = run_power([MUT], "matrices/pooling.yaml", tmp_path / "p", python=python, say=print)
    assert o.status == "not applicable" and not o.rows
    assert o.reason == f"every case it selects is skipped on this vLLM (x: {why})"
    assert [json.loads(line)[0] for line in log.read_text().splitlines()] == ["select"]
    # a skipped case beside a runnable one: only the runnable one is recorded and run
    log.unlink()
    rows.append({"case": "y", "runner": "vllm-v1"})
    monkeypatch.setenv("FAKE_SELECT", json.dumps({"vllm_version": "0.32.0", "rows": rows}))
    (o,) = run_power([MUT], "matrices/pooling.yaml", tmp_path / "q", python=python, say=print)
    assert o.rows == [("y", "vllm-v1")]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    golden = calls[1]
    assert golden[golden.index("-k") + 1 : golden.index("--golden-dir")] == ["y"]
