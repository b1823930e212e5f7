"""The CI examples users copy must be valid and call only commands that exist."""

import os
import re
import shlex
import subprocess

import pytest
import yaml

from harness.cli import build_parser
from harness.power.cli import build_parser as power_parser
from tests.conftest import ROOT

CI = ROOT / "ci"


def _scripts_of_github(doc) -> list[str]:
    return [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]


def _scripts_of_buildkite(doc) -> list[str]:
    return [
        step["command"] for step in doc["steps"] if isinstance(step, dict) and "command" in step
    ]


def _commands(script: str) -> list[list[str]]:
    out = []
    for line in script.replace("$$", "$").splitlines():
        for part in re.split(r"\|\||&&|;", line):
            part = part.strip()
            if part.startswith(("parity ", "ci/parity-gate")):
                out.append(shlex.split(part.split("<")[0]))
    return out


def _parity_subcommands() -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return set(sub.choices)


@pytest.mark.parametrize(
    "name, scripts",
    [("github-actions.yml", _scripts_of_github), ("buildkite.yml", _scripts_of_buildkite)],
)
def test_pipeline_examples_parse_and_call_existing_commands(name, scripts):
    doc = yaml.safe_load((CI / name).read_text())
    cmds = [c for s in scripts(doc) for c in _commands(s)]
    assert any(c[0] == "ci/parity-gate" for c in cmds), "the example must call the gate"
    assert any(c[:3] == ["parity", "report", "merge"] for c in cmds), (
        "the example must merge shards"
    )
    assert any(c[:2] == ["parity", "select"] and "--vllm-diff" in c for c in cmds), (
        "the example must show how to gate a vLLM change"
    )
    assert any(c[:3] == ["parity", "report", "diff"] for c in cmds), (
        "the example must diff against the base branch"
    )
    parser = build_parser()
    for c in cmds:
        if c[0] == "parity":
            assert c[1] in _parity_subcommands()
            args = [a if "$" not in a and "*" not in a else "x/report.json" for a in c[1:]]
            parser.parse_args(args)  # raises SystemExit on an unknown flag
        else:
            assert (ROOT / c[0]).is_file() and os.access(ROOT / c[0], os.X_OK)
            flags = [a for a in c[1:] if a.startswith("--")]
            # `--` passes what follows to `parity run`
            own = flags[: flags.index("--")] if "--" in flags else flags
            assert set(own) <= {
                "--shard",
                "--out",
                "--matrix",
                "--against",
                "--vllm-diff",
                "--vllm-repo",
            }, flags
            if "--" in c:
                parser.parse_args(["run", *c[c.index("--") + 1 :]])


def test_gate_exit_codes(tmp_path):
    gate = str(CI / "parity-gate")
    assert subprocess.run([gate, "--help"], capture_output=True).returncode == 0
    assert subprocess.run([gate, "--bogus"], capture_output=True).returncode == 2
    no_parity = subprocess.run(
        [gate], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )
    # the harness not installed is setup: 2, as everywhere (no exit code of its own)
    assert no_parity.returncode == 2 and "not on PATH" in no_parity.stderr


def _nox_sessions() -> set[str]:
    import ast

    tree = ast.parse((ROOT / "noxfile.py").read_text())
    return {
        f.name
        for f in tree.body
        if isinstance(f, ast.FunctionDef)
        and any("session" in ast.unparse(d) for d in f.decorator_list)
    }


def test_gpu_check_runs_existing_sessions_on_existing_matrices():
    script = str(CI / "gpu-check")
    dry = subprocess.run(
        [script, "--dry-run", "--mteb", "--multi-gpu", "--power", "--out", "x"],
        capture_output=True,
        text=True,
    )
    assert dry.returncode == 0, dry.stderr
    phases = re.findall(r"=== gpu-check: (\w+): (.*)", dry.stdout)
    assert [p for p, _ in phases] == [
        "install",
        "default",
        "hub",
        "modes",
        "extended",
        "mteb",
        "power",
    ]
    parser = build_parser()
    for _, cmd in phases:
        argv = shlex.split(cmd)
        argv = argv[2:] if argv[0] == "env" else argv  # env PARITY_ENFORCE_EAGER=1 nox ...
        assert argv[:2] == ["nox", "-s"] and argv[2] in _nox_sessions(), cmd
        if "--" in argv:
            args = argv[argv.index("--") + 1 :]
            assert (ROOT / args[args.index("--matrix") + 1]).is_file()
            if argv[2] == "power":  # the GPU-only mutations run there
                assert power_parser().parse_args(args).device == "cuda"
            else:
                parser.parse_args([argv[2] if argv[2] == "mteb" else "run", *args])
    assert subprocess.run([script, "--bogus"], capture_output=True).returncode == 2


def test_gpu_check_refuses_a_machine_without_a_gpu(tmp_path):
    fake = tmp_path / "nvidia-smi"  # a driver tool that finds no card, whatever this host has
    fake.write_text("#!/bin/sh\nexit 9\n")
    fake.chmod(0o755)
    res = subprocess.run(
        [str(CI / "gpu-check")],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"},
    )
    assert res.returncode == 2 and "no NVIDIA GPU visible" in res.stderr  # setup: 2


def test_the_github_example_runs_journey_a_exactly():
    """A vLLM branch in one command: the example's job runs `parity branch` on the checkout and
    reads its exit codes (4: nothing selected, not a failure; anything else the gate's)."""
    doc = yaml.safe_load((CI / "github-actions.yml").read_text())
    steps = doc["jobs"]["branch"]["steps"]
    cmds = [c for s in steps if "run" in s for c in _commands(s["run"])]
    (branch,) = [c for c in cmds if c[:2] == ["parity", "branch"]]
    args = build_parser().parse_args(branch[1:])
    assert args.checkout == "vllm" and args.base == "origin/main"
    checkout = [s for s in steps if s.get("with", {}).get("path") == "vllm"]
    assert checkout and checkout[0]["with"]["fetch-depth"] == 0  # the merge-base is in history
