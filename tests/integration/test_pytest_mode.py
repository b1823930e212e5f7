"""The pytest path as a user runs it: only the matrix, one item per (case, runner) including the
derived check cases, each model loaded on one xdist worker, and the same reports as `parity run`."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from harness.matrix.checks import expand_checks
from harness.matrix.loader import model_group
from harness.run.matrices import load_matrix
from tests.conftest import ROOT, SUBPROCESS_GUARD

CASES = ["bert-tiny-mean-embed", "bert-tiny-token-classify"]


def test_matrix_only_items_grouped_per_model_with_reports(tmp_path):
    out = tmp_path / "parity"
    junit = tmp_path / "pytest-junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "harness.matrix_tests",
            "--parity-matrix",
            "matrices/ci.yaml",
            "--parity-runners",
            "vllm-v1",
            "--parity-against",
            "golden",
            "--parity-out",
            str(out),
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-k",
            " or ".join(CASES),
            f"--junitxml={junit}",
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=SUBPROCESS_GUARD,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]

    # one item per (case, runner), the derived `<id>@<check>` cases included; nothing else
    cases = [
        c
        for c in expand_checks(load_matrix(ROOT / "matrices" / "ci.yaml").cases)
        if (c.variant_of or c.id) in CASES
    ]
    expected = {f"{c.id}:vllm-v1" for c in cases}
    cases_run = {
        tc.get("name").split("[", 1)[1].split("]", 1)[0]
        for tc in ET.parse(junit).getroot().iter("testcase")
    }
    assert cases_run == expected and any(c.check for c in cases)
    # the metrics ride along in pytest's own JUnit
    props = {p.get("name") for p in ET.parse(junit).getroot().iter("property")}
    assert {"metric:max_abs", "bound:max_abs", "verdict"} <= props

    # each model loaded on exactly one xdist worker
    parts = sorted(p for p in out.iterdir() if p.is_dir())
    owner: dict[str, set[str]] = {}
    for part in parts:
        for log in part.rglob("logs/vllm-v1*.log"):
            owner.setdefault(log.parts[len(out.parts) + 1], set()).add(
                part.name
            )  # group folder -> workers
    groups = {f"parity-{model_group(c)}" for c in cases}
    assert set(owner) == groups and all(len(w) == 1 for w in owner.values()), owner
    assert len({w for ws in owner.values() for w in ws}) == 2  # the two models went to two workers

    # the same reports as `parity run`, merged across workers
    report = json.loads((out / "report.json").read_text())
    assert {f"{r['case_id']}:{r['runner']}" for r in report["results"]} == expected
    assert (out / "report.md").is_file() and (out / "junit.xml").is_file()
