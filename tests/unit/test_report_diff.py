"""`parity report diff`: new failures fail, drift inside the bounds warns, nothing moved says so."""

import json
import os
import subprocess
import sys

from harness.report.diff import diff, to_markdown
from harness.report.model import MetricOut, Report, Result, write_json
from tests.conftest import ROOT


def _rep(**cases):
    results = [
        Result(
            case_id=cid,
            family="f",
            task="embed",
            runner="vllm-v2",
            runner_label="l",
            status=status,
            metrics=[MetricOut(name="max_abs", value=value, bound=1e-5, ok=value <= 1e-5)],
        )
        for cid, (status, value) in cases.items()
    ]
    return Report(
        harness_version="0",
        matrix="m.yaml",
        matrix_sha256="0",
        device="cpu",
        started="t",
        results=results,
    )


def test_new_failure_fails_and_drift_inside_the_bound_warns():
    old = _rep(a=("pass", 1e-8), b=("pass", 1e-8), c=("fail", 1.0), d=("pass", 2e-7))
    new = _rep(
        a=("fail", 1e-3), b=("pass", 5e-6), c=("pass", 1e-8), d=("pass", 3e-7), e=("error", 0.0)
    )
    d = diff(old, new)
    assert {c.case_id for c in d.of("new-failure")} == {"a", "e"} and d.exit_code == 1
    assert [c.case_id for c in d.of("fixed")] == ["c"]
    (drift,) = d.of("drift")  # b grew 500x but stays inside 1e-5; d grew 1.5x: not drift
    assert drift.case_id == "b" and "grew 500x, still inside, 0.5 of its bound" in drift.detail
    md = to_markdown(d, old, new)
    assert "### New failures (2)" in md and "### Drift inside the bounds (warnings) (1)" in md


def test_shard_reports_merged_before_diffing_are_diffed_as_one_run():
    """CI diffs the merge of its shard reports against the base branch's merged report: a new
    failure in one shard and drift in the other both show, and every case is compared once."""
    from harness.report.model import merge

    old = _rep(a=("pass", 1e-8), b=("pass", 1e-8), c=("pass", 1e-8))
    one, two = _rep(a=("pass", 5e-6)), _rep(b=("fail", 1e-3), c=("pass", 1e-8))
    one.shard, two.shard = "1/2", "2/2"
    d = diff(old, merge([two, one]))
    assert [c.case_id for c in d.of("new-failure")] == ["b"] and d.exit_code == 1
    assert [c.case_id for c in d.of("drift")] == ["a"]
    assert not d.of("removed") and not d.of("added")


def test_nothing_moved_exits_0():
    r = _rep(a=("pass", 1e-8))
    d = diff(r, r)
    assert d.exit_code == 0 and not d.changes and "Nothing moved." in to_markdown(d, r, r)


def test_cli_exit_code(tmp_path):
    write_json(_rep(a=("pass", 1e-8)), tmp_path / "old.json")
    write_json(_rep(a=("fail", 1.0)), tmp_path / "new.json")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "report",
            "diff",
            str(tmp_path / "old.json"),
            str(tmp_path / "new.json"),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (
        proc.returncode == 1
        and "New failures (1)" in proc.stdout
        and (tmp_path / "diff.md").is_file()
    )
    json.loads((tmp_path / "old.json").read_text())


# ---- --outputs: the two runs' stored outputs compared directly ----------------------------------


def _run_dir(root, outputs: dict, status="pass"):
    """A run folder as `parity run --out runs/latest` leaves it: report.json beside outputs/, each
    output recorded by the path the run saw (relative, naming runs/latest like every such run)."""
    from harness.report.model import ReferenceResult
    from harness.runners.outputs import save_items

    results, refs = [], []
    for (case, runner), items in outputs.items():
        rec = f"runs/latest/outputs/{case}/{runner}.safetensors"
        save_items(root / "outputs" / case / f"{runner}.safetensors", items)
        if runner == "hf":
            refs.append(ReferenceResult(case_id=case, status="ok", output=rec))
        else:
            results.append(
                Result(
                    case_id=case,
                    family="f",
                    task="embed",
                    runner=runner,
                    runner_label="l",
                    status=status,
                    output=rec,
                    metrics=[MetricOut(name="max_abs", value=1e-8, bound=1e-5, ok=True)],
                )
            )
    report = Report(
        harness_version="0",
        matrix="m.yaml",
        matrix_sha256="0",
        device="cpu",
        started="t",
        results=results,
        references=refs,
    )
    write_json(report, root / "report.json")
    return report


def _two_runs(tmp_path):
    import numpy as np

    rng = np.random.default_rng(7)
    base = {
        (c, r): [rng.normal(size=(5, 8)).astype(np.float32) for _ in range(3)]
        for c in ("same", "mutated", "gone")
        for r in ("hf", "vllm-v2")
    }
    changed = {k: [a.copy() for a in v] for k, v in base.items()}
    bump = rng.normal(scale=1e-3, size=(5, 8)).astype(np.float32)  # the seeded mutation
    changed[("mutated", "vllm-v2")][1] += bump
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old, new = _run_dir(tmp_path / "old", base), _run_dir(tmp_path / "new", changed)
    (tmp_path / "new" / "outputs" / "gone" / "vllm-v2.safetensors").unlink()
    expected = float(
        np.max(
            np.abs(
                changed[("mutated", "vllm-v2")][1].astype(np.float64)
                - base[("mutated", "vllm-v2")][1].astype(np.float64)
            )
        )
    )
    return old, new, expected


def test_outputs_are_compared_per_case_and_runner_and_a_missing_file_is_said(tmp_path, monkeypatch):
    from harness.report.diff import compare_outputs

    old, new, expected = _two_runs(tmp_path)
    monkeypatch.chdir(
        tmp_path
    )  # runs/latest/... does not exist here: outputs are found beside each report
    by_key = {
        (x.case_id, x.runner): x
        for x in compare_outputs(old, new, tmp_path / "old", tmp_path / "new")
    }
    assert by_key[("mutated", "vllm-v2")].max_abs == expected and expected > 0
    for key in [("same", "hf"), ("same", "vllm-v2"), ("mutated", "hf"), ("gone", "hf")]:
        assert by_key[key].max_abs == 0 and not by_key[key].problem
    gone = by_key[("gone", "vllm-v2")]
    assert (
        gone.max_abs is None
        and "NEW output file missing" in gone.problem
        and "gone/vllm-v2" in gone.problem
    )


def test_identical_runs_differ_by_zero(tmp_path):
    from harness.report.diff import compare_outputs

    old, _, _ = _two_runs(tmp_path)
    deltas = compare_outputs(old, old, tmp_path / "old", tmp_path / "old")
    assert deltas and all(x.problem.startswith("OLD and NEW name the same file") for x in deltas)
    import shutil

    shutil.copytree(tmp_path / "old", tmp_path / "copy")
    deltas = compare_outputs(old, old, tmp_path / "old", tmp_path / "copy")
    assert len(deltas) == 6 and all(x.max_abs == 0 and not x.problem for x in deltas)


def test_mteb_score_files_compare_by_their_numbers(tmp_path):
    from harness.report.diff import output_difference

    a, b = tmp_path / "a.mteb.json", tmp_path / "b.mteb.json"
    a.write_text(json.dumps({"STS": {"main_score": 0.5, "main_metric": "spearman"}}))
    b.write_text(json.dumps({"STS": {"main_score": 0.5 + 2e-4, "main_metric": "spearman"}}))
    value, problem = output_difference(a, b)
    assert abs(value - 2e-4) < 1e-12 and problem == ""


def test_cli_outputs_keep_the_exit_code_and_write_html(tmp_path):
    from html.parser import HTMLParser

    _, _, expected = _two_runs(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "report",
            "diff",
            str(tmp_path / "old" / "report.json"),
            str(tmp_path / "new" / "report.json"),
            "--outputs",
            "--out",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, (
        proc.stderr
    )  # no verdict moved: a changed or missing output does not fail it
    assert f"{expected:.3g}" in proc.stdout and "NEW output file missing" in proc.stdout
    assert "gone [vllm-v2] not compared" in proc.stderr
    ids = set()

    class Ids(HTMLParser):
        def handle_starttag(self, tag, attrs):
            ids.add(dict(attrs).get("id"))

    Ids().feed((tmp_path / "d" / "diff.html").read_text())
    assert "outputs" in ids and (tmp_path / "d" / "diff.md").read_text() == proc.stdout


def test_html_diff_lists_each_kind_of_change_escaped():
    from harness.report.diff import to_html

    old = _rep(a=("pass", 1e-8))
    new = _rep(a=("fail", 1.0))
    new.results[0].reason = "<b>bad</b>"
    page = to_html(diff(old, new), old, new)
    assert 'id="new-failure"' in page and "&lt;b&gt;bad&lt;/b&gt;" in page and "<b>bad" not in page
