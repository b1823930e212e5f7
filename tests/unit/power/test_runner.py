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


def _r(status, reason=""):
    return {"status": status, "reason": reason, "metrics": []}


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


def test_a_row_red_in_the_baseline_catches_nothing():
    o = Outcome(MUT)
    judge(o, {("c", "r"): _r("error")}, {("c", "r"): _r("error")}, APPLIED)
    assert o.status == "missed" and not o.caught


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
    assert "1 caught, 1 missed" in md and "a · r (fail): boom" in md and "## Missed" in md
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
