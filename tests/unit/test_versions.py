"""`nox -s versions`: one table of release x family x runner, with the default runner chosen."""

import json

from harness.engine import versions


def _report(version, statuses, chose):
    results = [
        {
            "family": fam,
            "runner": runner,
            "status": s,
            "case_id": f"{fam}-{i}",
            "reason": "not run (the run was interrupted or the worker never reached it)"
            if version == "0.31.0"
            else "",
        }
        for i, (fam, runner, s) in enumerate(statuses)
    ]
    return {
        "results": results,
        "audit": [{"actual": a} for a in chose],
        "vllm_under_test": [{"version": version}],
    }


def test_table_has_a_row_per_family_and_runner_and_a_column_per_release(tmp_path):
    reports = {
        "0.28.0": _report(
            "0.28.0",
            [
                ("clip", "vllm-v1", "fail"),
                ("clip", "vllm-v1", "pass"),
                ("bert", "vllm-auto", "pass"),
            ],
            ["v1"],
        ),
        "0.32.0": _report(
            "0.32.0",
            [
                ("clip", "vllm-v1", "pass"),
                ("clip", "vllm-v1", "pass"),
                ("bert", "vllm-auto", "pass"),
                ("bert", "vllm-v2", "error"),
            ],
            ["v2"],
        ),
        "0.31.0": _report("0.31.0", [("clip", "vllm-v1", "error")], []),
    }
    md, doc = versions.table(reports)
    rows = md.splitlines()
    assert rows[0] == "| family | runner | 0.28.0 | 0.32.0 | 0.31.0 |"
    assert "| clip | vllm-v1 | 1F 1P | 2P | 1n |" in rows  # 0.31's row was never reached
    assert "| bert | vllm-v2 | - | 1E | - |" in rows  # a row one release never ran
    assert "| **default runner chosen** (vllm-auto) | | V1 x1 | V2 x1 | - |" in rows
    assert doc["default_runner"] == {"0.28.0": {"V1": 1}, "0.32.0": {"V2": 1}, "0.31.0": {}}
    for rel, rep in reports.items():
        (tmp_path / rel).mkdir()
        (tmp_path / rel / "report.json").write_text(json.dumps(rep))
    del reports["0.31.0"]
    # it exits on the verdicts: 0.28.0 has a failure, 0.32.0 an error
    assert (
        versions.main(["--releases", "0.28.0", "0.32.0", "--out", str(tmp_path), "--tables-only"])
        == 1
    )
    assert (tmp_path / "versions.md").read_text().count("| clip | vllm-v1 |") == 1
    assert versions.main(["--releases", "0.20.0", "--tables-only", "--out", str(tmp_path)]) == 2


def _write(tmp_path, release, statuses):
    rep = _report(release, [("bert", "vllm-v1", s) for s in statuses], [])
    (tmp_path / release).mkdir(parents=True, exist_ok=True)
    (tmp_path / release / "report.json").write_text(json.dumps(rep))


def test_versions_exits_on_the_verdicts_of_every_release(tmp_path):
    tables = ["--out", str(tmp_path), "--tables-only", "--releases", "0.30.0", "0.32.0"]
    _write(tmp_path, "0.30.0", ["pass", "xfail"])
    _write(tmp_path, "0.32.0", ["pass", "skip"])
    assert versions.main(tables) == 0
    _write(tmp_path, "0.32.0", ["skip"])
    assert versions.main(tables) == 0  # one release compared: parity holds where it ran
    _write(tmp_path, "0.30.0", ["skip"])
    assert versions.main(tables) == 4  # nothing compared anywhere
    _write(tmp_path, "0.30.0", ["error"])
    assert versions.main(tables) == 1
    assert versions.main([*tables[:3], "--releases", "0.31.0"]) == 2  # no report: not set up


def test_versions_takes_any_matrix_or_all(tmp_path):
    assert versions.main(["--matrix", "matrices/nope.yaml", "--tables-only"]) == 2
    runs = versions.matrix_runs("all", tmp_path)
    assert [m for m, _ in runs] == [f"matrices/{m}" for m in versions.ALL_MATRICES]
    assert runs[0][1] == tmp_path / "pooling"
    for _, folder in runs:
        folder.mkdir()
        rep = _report("0.32.0", [(folder.name, "vllm-v1", "pass")], ["v2"])
        (folder / "report.json").write_text(json.dumps(rep))
    merged = versions.read_reports("all", tmp_path)
    assert {r["family"] for r in merged["results"]} == {"pooling", "extended", "multimodal", "hub"}
