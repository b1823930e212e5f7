"""`parity power --shard K/N` and `--merge`: the shards judge each mutation once, and their merged
report is the report of one unsharded run (the test double `parity` of test_runner)."""

import functools
import json

from harness.power import cli, runner
from tests.unit.power.test_runner import _fake_python

# default-matrix mutations, one needing a GPU and one of another matrix (statuses besides caught)
ONLY = [
    "base64_wrong_dtype",
    "base64_wrong_endianness",
    "bge_m3_sparse_without_relu",
    "chunked_last_pool_stale_state",
    "async_batch_outputs_swapped",
    "deep_chunk_last_pool_one_step_stale",
]
# what differs between two runs of the same work: times and where each ran
VOLATILE = ("seconds", "run_dir", "wall_seconds", "agent_seconds", "shards")


def _stable(doc):
    if isinstance(doc, dict):
        return {k: _stable(v) for k, v in doc.items() if k not in VOLATILE}
    return [_stable(x) for x in doc] if isinstance(doc, list) else doc


def _double(tmp_path, monkeypatch):
    python, log = _fake_python(tmp_path)
    fake = functools.partial(runner.run_power, python=python, say=lambda s: None)
    monkeypatch.setattr(cli, "run_power", fake)
    return log


def _judged(log):
    """The mutations a run judged: its mutated runs' folders, in order."""
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    log.unlink(missing_ok=True)
    outs = [c[c.index("--out") + 1] for c in calls if c[0] == "run"]
    return [o.split("/mutations/")[1] for o in outs if "/mutations/" in o]


def test_shards_partition_the_catalogue_and_merge_to_the_unsharded_report(tmp_path, monkeypatch):
    log = _double(tmp_path, monkeypatch)
    base = ["--only", *ONLY, "-j", "1"]
    assert cli.main([*base, "--out", str(tmp_path / "one")]) == 0
    judged_once = _judged(log)
    assert sorted(judged_once) == sorted(ONLY[:4])  # the GPU one and the other matrix's: not run
    one = json.loads((tmp_path / "one" / "power.json").read_text())
    for n in (2, 3, 8):  # 8: more shards than mutations, some judge nothing
        parts, judged = [], []
        for k in range(1, n + 1):
            part = tmp_path / f"n{n}" / f"s{k}"
            assert cli.main([*base, "--shard", f"{k}/{n}", "--out", str(part)]) == 0
            judged += _judged(log)
            parts.append(str(part))
        assert sorted(judged) == sorted(judged_once)  # none lost, none twice
        shares = [json.loads((tmp_path / p / "power.json").read_text()) for p in parts]
        names = [m["name"] for s in shares for m in s["mutations"]]
        assert sorted(names) == sorted(ONLY) and len(names) == len(set(names))
        merged = tmp_path / f"n{n}" / "merged"
        assert cli.main(["--merge", *parts, "--out", str(merged)]) == 0
        got = json.loads((merged / "power.json").read_text())
        assert _stable(got) == _stable(one)
        assert got["shards"] == n and got["agent_seconds"] >= got["wall_seconds"]
        md = (merged / "power.md").read_text().splitlines()
        assert md[4:] == (tmp_path / "one" / "power.md").read_text().splitlines()[4:]


def test_merge_refuses_a_missing_duplicate_or_foreign_shard(tmp_path, monkeypatch, capsys):
    log = _double(tmp_path, monkeypatch)
    base = ["--only", *ONLY[:3]]
    parts = [str(tmp_path / f"s{k}") for k in (1, 2)]
    for k, part in enumerate(parts, 1):
        cli.main([*base, "--shard", f"{k}/2", "--out", part])
    cli.main(["--only", *ONLY[:2], "--shard", "2/2", "--out", str(tmp_path / "other")])
    cli.main([*base, "--out", str(tmp_path / "whole")])
    _judged(log)
    merge = ["--out", str(tmp_path / "m"), "--merge"]
    cases = {
        "missing shard(s) among the power reports: 2/2": [parts[0]],
        "duplicate shard(s)": [*parts, parts[1]],
        "foreign shard: the power reports come from different runs": [
            parts[0],
            str(tmp_path / "other"),
        ],
        "are not shards": [str(tmp_path / "whole")],
        "No such file": [str(tmp_path / "nowhere")],
    }
    for message, given in cases.items():
        assert cli.main([*merge, *given]) == 2
        assert message in capsys.readouterr().err
    assert cli.main(["--shard", "3/2", "--only", ONLY[0]]) == 2
    assert not (tmp_path / "m").exists()
