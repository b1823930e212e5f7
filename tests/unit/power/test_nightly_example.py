"""The nightly CI example runs `nox -s power` and `nox -s versions` sharded, with arguments they
accept, and merges every sharded output it produces."""

import ast
import re
import shlex
from pathlib import Path

import yaml

from harness.engine import versions
from harness.power.cli import build_parser
from tests.conftest import ROOT


def _lines(doc):
    runs = [s["run"] for job in doc["jobs"].values() for s in job["steps"] if "run" in s]
    return [ln.strip() for r in runs for ln in r.replace("\\\n", " ").splitlines()]


def _after_dashes(cmd):
    return [a.replace("${{ matrix.shard }}", "1/3") for a in cmd[cmd.index("--") + 1 :]]


def test_nightly_example_calls_the_power_session_with_valid_arguments():
    doc = yaml.safe_load((ROOT / "ci" / "power-nightly.yml").read_text())
    lines = _lines(doc)
    cmds = [shlex.split(ln) for ln in lines if ln.startswith("nox -s power")]
    # the default matrix, and the four others each with the mutations written for it
    assert len(cmds) == 5
    sessions = {
        f.name
        for f in ast.parse((ROOT / "noxfile.py").read_text()).body
        if isinstance(f, ast.FunctionDef)
    }
    outs = []
    for cmd in cmds:
        assert cmd[2] in sessions
        args = build_parser().parse_args(_after_dashes(cmd))
        assert (ROOT / args.matrix).is_file()
        assert args.shard == "1/3"  # every catalogue run is one agent's share...
        outs.append(args.out.split("/")[-1])
    # ...and each output is merged from the parts of every agent
    merged = " ".join(ln for ln in lines if "harness.power --merge" in ln)
    loop = re.search(r"for name in (.*); do", "\n".join(lines))
    assert loop and sorted(loop.group(1).split()) == sorted(outs)
    assert "--merge parts/*/$name" in merged
    assert "schedule" in doc[True] or "schedule" in doc.get("on", {})  # yaml reads `on` as True


def test_nightly_example_shards_the_release_table_and_merges_it():
    doc = yaml.safe_load((ROOT / "ci" / "power-nightly.yml").read_text())
    lines = _lines(doc)
    (cmd,) = [shlex.split(ln) for ln in lines if ln.startswith("nox -s versions")]
    args = versions.parser().parse_args(_after_dashes(cmd))
    assert args.matrix == ["all"] and args.shard == "1/3"
    shards = doc["jobs"]["releases"]["strategy"]["matrix"]["shard"]
    assert shards == [f"{k}/{len(shards)}" for k in range(1, len(shards) + 1)]
    (merge,) = [
        shlex.split(ln.split("||")[0]) for ln in lines if "harness.engine.versions --merge" in ln
    ]
    assert versions.parser().parse_args(merge[3:]).merge == [Path("parts/*")]
    assert "releases" in doc["jobs"]["release-table"]["needs"]
