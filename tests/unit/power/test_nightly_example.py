"""The nightly CI example runs `nox -s power` with arguments `parity power` accepts."""

import ast
import shlex

import yaml

from harness.power.cli import build_parser
from tests.conftest import ROOT


def test_nightly_example_calls_the_power_session_with_valid_arguments():
    doc = yaml.safe_load((ROOT / "ci" / "power-nightly.yml").read_text())
    runs = [s["run"] for job in doc["jobs"].values() for s in job["steps"] if "run" in s]
    lines = [ln for r in runs for ln in r.replace("\\\n", " ").splitlines()]
    cmds = [shlex.split(ln) for ln in lines if ln.startswith("nox -s power")]
    # the default matrix, and the four others each with the mutations written for it
    assert len(cmds) == 5
    sessions = {
        f.name
        for f in ast.parse((ROOT / "noxfile.py").read_text()).body
        if isinstance(f, ast.FunctionDef)
    }
    for cmd in cmds:
        assert cmd[2] in sessions
        args = build_parser().parse_args(cmd[cmd.index("--") + 1 :])
        assert (ROOT / args.matrix).is_file()
    assert "schedule" in doc[True] or "schedule" in doc.get("on", {})  # yaml reads `on` as True
