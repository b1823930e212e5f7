"""Inputs from files and from the matrix: read, hashed by content, and every malformed input a
matrix error naming the matrix's file:line and the input file's line."""

import re

import pytest

from harness.matrix.inputs import input_set
from harness.matrix.schema import MatrixError
from harness.run.matrices import load_matrix

HEAD = """
families:
  f: {task: embed, runners: [hf, vllm-v1], model: {source: local, path: x},
      tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}}}
cases:
  - id: one
    family: f
"""


def _matrix(tmp_path, inputs: str):
    p = tmp_path / "m.yaml"
    p.write_text(HEAD + f"    inputs: {inputs}\n")
    return p


def test_texts_from_a_file_pairs_from_jsonl_and_inline(tmp_path):
    (tmp_path / "t.txt").write_text("first text\n\nsecond text\n")
    (tmp_path / "p.jsonl").write_text(
        '{"query": "q", "document": "d1"}\n{"query": "q", "document": "d2"}\n'
    )
    a = input_set(load_matrix(_matrix(tmp_path, "{file: t.txt}")).cases[0].inputs)
    assert a.items == ("first text", "second text") and a.name.startswith("file:")
    b = input_set(load_matrix(_matrix(tmp_path, "{file: p.jsonl}")).cases[0].inputs)
    assert b.items == (("q", "d1"), ("q", "d2")) and b.pairs
    c = input_set(load_matrix(_matrix(tmp_path, "{texts: [x, y]}")).cases[0].inputs)
    assert c.items == ("x", "y")
    d = input_set(load_matrix(_matrix(tmp_path, "{pairs: [[q, d], [q, e]]}")).cases[0].inputs)
    assert d.items == (("q", "d"), ("q", "e"))


def test_the_hash_follows_the_content_not_the_machine(tmp_path):
    (tmp_path / "t.txt").write_text("first text\nsecond text\n")
    before = input_set(load_matrix(_matrix(tmp_path, "{file: t.txt}")).cases[0].inputs).sha256
    (tmp_path / "t.txt").write_text("first text, edited\nsecond text\n")
    assert (
        input_set(load_matrix(_matrix(tmp_path, "{file: t.txt}")).cases[0].inputs).sha256 != before
    )


@pytest.mark.parametrize(
    "inputs, files, text",
    [
        ("{file: missing.txt}", {}, r"inputs.file: .*missing.txt does not exist"),
        ("{file: empty.txt}", {"empty.txt": "\n\n"}, r"the input set is empty"),
        (
            "{file: bad.jsonl}",
            {"bad.jsonl": '{"text": "ok"}\n{not json}\n'},
            r"bad.jsonl:2: not valid JSON",
        ),
        (
            "{file: keys.jsonl}",
            {"keys.jsonl": '{"txt": "typo"}\n'},
            r"keys.jsonl:1: expected a string 'text'",
        ),
        (
            "{file: mixed.jsonl}",
            {"mixed.jsonl": '{"text": "a"}\n{"query": "q", "document": "d"}\n'},
            r"mixes \(query, document\) pairs",
        ),
        (
            "{file: img.jsonl}",
            {"img.jsonl": '{"image": "nope.png"}\n', "bad.png": "not a png"},
            r"img.jsonl:1: image .*nope.png does not exist",
        ),
        (
            "{file: img.jsonl}",
            {"img.jsonl": '{"image": "bad.png"}\n', "bad.png": "not a png"},
            r"img.jsonl:1: image .*bad.png cannot be read",
        ),
        ("{file: t.csv}", {"t.csv": "a,b\n"}, r"expected a .txt \(a text a line\) or .jsonl file"),
        ("{images: nowhere/}", {}, r"inputs.images: folder .*nowhere does not exist"),
        ("{texts: [a], pairs: [[q, d]]}", {}, r"exactly one of file, images, texts, pairs"),
        ("{pairs: [[q]]}", {}, r"inputs.pairs must be a list of \[query, document\]"),
        ("{file: /etc/hostname}", {}, r"outside the project .*PARITY_ALLOW_ABSOLUTE_PATHS=1"),
    ],
)
def test_each_malformed_input_is_a_matrix_error_with_both_locations(
    tmp_path, monkeypatch, inputs, files, text
):
    monkeypatch.delenv("PARITY_ALLOW_ABSOLUTE_PATHS", raising=False)
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    with pytest.raises(MatrixError) as e:
        load_matrix(_matrix(tmp_path, inputs))
    msg = str(e.value)
    assert re.search(r"m\.yaml:\d+: case 'one', key 'inputs': ", msg), msg
    assert re.search(text, msg), msg


def test_parity_inputs_show_prints_count_hash_and_first_items():
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "inputs",
            "show",
            "tests/integration/data/inputs/pairs.jsonl",
            "--first",
            "2",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "5 items · sha256 " in proc.stdout
        and "[1] ('what is parity'," in proc.stdout
        and "… 3 more" in proc.stdout
    )
    named = subprocess.run(
        [sys.executable, "-m", "harness.cli", "inputs", "show", "short-texts"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert named.returncode == 0 and named.stdout.startswith("short-texts · version 1 · 24 items")
    bad = subprocess.run(
        [sys.executable, "-m", "harness.cli", "inputs", "show", "nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "neither an input set" in bad.stderr
