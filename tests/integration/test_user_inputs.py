"""Inputs users bring run through HF, V1 and V2: texts from a file, pairs from JSONL, a folder of images."""

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

DATA = Path(__file__).parent / "data"


def test_texts_pairs_and_images_from_files_run_on_every_runner(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "-m",
            str(DATA / "user-inputs.yaml"),
            "--runners",
            "vllm-v1",
            "vllm-v2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    results = {
        (r["case_id"], r["runner"]): r
        for r in json.loads((tmp_path / "report.json").read_text())["results"]
    }
    expected = {
        "user-texts-from-file": ("file:", 5),
        "user-pairs-from-jsonl": ("file:", 5),
        "user-images-from-folder": ("images:", 4),
    }
    for case, (prefix, count) in expected.items():
        for runner in ("vllm-v1", "vllm-v2"):
            r = results[(case, runner)]
            assert (
                r["status"] == "pass"
                and r["inputs"]["name"].startswith(prefix)
                and r["inputs"]["count"] == count
            )
    assert (
        results[("user-pairs-from-jsonl", "vllm-v2")]["checks"]["token_ids"]
        == "token ids equal for 5 of 5 items"
    )
