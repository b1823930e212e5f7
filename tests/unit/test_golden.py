import json
import os

import numpy as np
import pytest
from safetensors.numpy import save_file

from harness.judge import golden
from harness.judge.golden import GoldenError


def _items(seed=0, n=4):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=6).astype(np.float32) for _ in range(n)]


KEY = {
    "task": "embed",
    "dtype": "float32",
    "device": "cpu",
    "truncate": None,
    "hf_options": {},
    "recipe": "st-embed",
    "recipe_version": 1,
}


def _write(root, items, fp="f" * 64, inputs_sha="i" * 64, key=KEY):
    return golden.write(
        root,
        "case-a",
        items,
        task="embed",
        fingerprint=fp,
        inputs={"name": "short-texts", "sha256": inputs_sha},
        dtype="float32",
        device="cpu",
        versions={"torch": "x"},
        model="synthetic",
        key=key,
        token_ids=[[101, 7 + i, 102] for i in range(len(items))],
    )


def test_round_trip_with_readable_manifest(tmp_path):
    items = _items()
    d = _write(tmp_path, items)
    g = golden.read(tmp_path, "case-a")
    assert all(np.array_equal(a, b) for a, b in zip(items, g.items))
    m = json.loads((d / "manifest.json").read_text())
    assert (
        m["model_fingerprint"] == "f" * 64
        and m["task"] == "embed"
        and m["versions"] == {"torch": "x"}
    )
    assert m["items"][0]["shape"] == [6] and m["items"][0]["mean"] == pytest.approx(
        float(items[0].mean()), rel=1e-6
    )
    golden.check_matches(g, "case-a", "f" * 64, "i" * 64, KEY)


def test_missing_golden_says_how_to_record(tmp_path):
    with pytest.raises(GoldenError, match=r"parity golden record -k case-x") as e:
        golden.read(tmp_path, "case-x")
    assert e.value.kind == "missing"


def test_golden_from_other_weights_or_inputs_is_refused(tmp_path):
    _write(tmp_path, _items())
    g = golden.read(tmp_path, "case-a")
    with pytest.raises(
        GoldenError,
        match=r"other weights, inputs or reference \(model fingerprint ffffffffffff != case's 000000000000\).*parity golden update -k case-a",
    ) as e:
        golden.check_matches(g, "case-a", "0" * 64, "i" * 64, KEY)
    assert e.value.kind == "mismatch"
    with pytest.raises(GoldenError, match=r"input hash iiiiiiiiiiii != case's jjjjjjjjjjjj"):
        golden.check_matches(g, "case-a", "f" * 64, "j" * 64, KEY)


@pytest.mark.parametrize(
    "field, value",
    [
        ("task", "classify"),
        ("dtype", "bfloat16"),
        ("device", "cuda"),
        ("truncate", 64),
        ("hf_options", {"pooling": "cls"}),
        ("recipe", "clip-embed"),
        ("recipe_version", 2),
    ],
)
def test_golden_made_for_another_reference_is_refused(tmp_path, field, value):
    _write(tmp_path, _items())
    g = golden.read(tmp_path, "case-a")
    with pytest.raises(GoldenError, match=rf"{field} .* != case's") as e:
        golden.check_matches(g, "case-a", "f" * 64, "i" * 64, {**KEY, field: value})
    assert e.value.kind == "mismatch"


def test_golden_without_a_reference_key_is_refused(tmp_path):
    _write(tmp_path, _items(), key=KEY)
    manifest = tmp_path / "case-a" / "manifest.json"
    m = json.loads(manifest.read_text())
    del m["reference_key"]
    manifest.write_text(json.dumps(m))
    with pytest.raises(GoldenError, match="records no reference key"):
        golden.check_matches(golden.read(tmp_path, "case-a"), "case-a", "f" * 64, "i" * 64, KEY)


def test_reference_key_resolves_the_recipe_from_the_checkpoint(tmp_path):
    from harness.matrix.schema import Case
    from harness.runners.hf import RECIPE_VERSIONS

    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["CLIPModel"]}))
    case = Case.model_validate(
        dict(
            id="c",
            family="f",
            task="embed",
            model={"source": "local", "path": "x"},
            inputs="short-texts",
            runners=["hf"],
            request={"truncate": 16},
            tolerances={"float32": {"cosine_distance": 1e-6, "max_abs": 1e-5}},
        )
    )
    key = golden.reference_key(case, tmp_path, "float32", "cpu")
    assert key["recipe"] == "clip-embed" and key["recipe_version"] == RECIPE_VERSIONS["clip-embed"]
    assert key["truncate"] == 16 and key["device"] == "cpu"


def test_truncated_or_edited_arrays_are_corrupt_not_compared(tmp_path):
    _write(tmp_path, _items())
    g = golden.read(tmp_path, "case-a")
    data = g.arrays_path.read_bytes()
    g.arrays_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(GoldenError, match="do not match the manifest's sha256") as e:
        golden.read(tmp_path, "case-a")
    assert e.value.kind == "corrupt"
    (tmp_path / "case-a" / "manifest.json").write_text("{not json")
    with pytest.raises(GoldenError, match="not valid JSON"):
        golden.read(tmp_path, "case-a")


def test_tampered_value_with_consistent_hash_fails_the_comparison(tmp_path):
    """Someone edits a number and the hash: the values themselves must then fail."""
    from harness.judge.compare import compare
    from tests.unit.test_compare import TOL, make_case

    items = _items()
    _write(tmp_path, items)
    g = golden.read(tmp_path, "case-a")
    tampered = [a.copy() for a in g.items]
    tampered[2][3] += 1e-3
    save_file({f"item.{i:05d}": a for i, a in enumerate(tampered)}, str(g.arrays_path))
    manifest = json.loads((tmp_path / "case-a" / "manifest.json").read_text())
    manifest["arrays_sha256"] = golden.file_sha256(g.arrays_path)
    (tmp_path / "case-a" / "manifest.json").write_text(json.dumps(manifest))
    g2 = golden.read(tmp_path, "case-a")
    v = compare(
        make_case(), "vllm-v1", TOL, ("cosine_distance", "max_abs"), g2.items, items, tuple("abcd")
    )
    assert v.status == "fail" and "max_abs 0.001 > 1e-05" in v.reason


def test_killed_update_leaves_the_old_golden(tmp_path, monkeypatch):
    old = _items(0)
    _write(tmp_path, old)
    real_replace = os.replace

    def die_on_manifest(src, dst):
        if str(dst).endswith("manifest.json"):
            raise KeyboardInterrupt  # the process is killed between the arrays and the manifest
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", die_on_manifest)
    with pytest.raises(KeyboardInterrupt):
        _write(tmp_path, _items(1))
    monkeypatch.undo()
    g = golden.read(tmp_path, "case-a")
    assert all(np.array_equal(a, b) for a, b in zip(old, g.items))
    # and a later update completes and removes the old arrays
    _write(tmp_path, _items(1))
    assert len(list((tmp_path / "case-a").glob("reference-*.safetensors"))) == 1
    g = golden.read(tmp_path, "case-a")
    assert np.array_equal(g.items[0], _items(1)[0])


def test_committed_goldens_cover_the_default_matrix():
    from harness.run.matrices import load_matrix
    from tests.conftest import ROOT

    for case in load_matrix(ROOT / "matrices" / "pooling.yaml").cases:
        if case.expect is not None:  # a refusal case: its reference is the refusal rule
            assert not (ROOT / "golden" / case.id).exists(), case.id
            continue
        g = golden.read(ROOT / "golden", case.id)
        assert g.manifest["case_id"] == case.id and g.manifest["task"] == case.task
        # every committed golden carries the reference's token ids (an entry per item, maybe null)
        assert g.requests is not None and len(g.requests) == len(g.items), case.id


def test_token_ids_round_trip_and_an_edited_tokens_file_is_corrupt(tmp_path):
    d = _write(tmp_path, _items())
    g = golden.read(tmp_path, "case-a")
    assert [m["prompt_token_ids"] for m in g.requests] == [[101, 7 + i, 102] for i in range(4)]
    assert g.manifest["token_ids"]["items_with_ids"] == 4
    tokens = d / g.manifest["token_ids"]["file"]
    tokens.write_text(tokens.read_text().replace("101", "100", 1))
    with pytest.raises(
        GoldenError, match=r"tokens-.*contents do not match.*parity golden update -k case-a"
    ) as e:
        golden.read(tmp_path, "case-a")
    assert e.value.kind == "corrupt"


def test_a_golden_without_token_ids_loads_but_is_refused_naming_the_update(tmp_path):
    d = _write(tmp_path, _items())
    m = json.loads((d / "manifest.json").read_text())
    del m["token_ids"]
    (d / "manifest.json").write_text(json.dumps(m))
    g = golden.read(tmp_path, "case-a")  # loadable
    assert g.requests is None and len(g.items) == 4
    with pytest.raises(
        GoldenError,
        match=r"before goldens stored the reference's prompt token "
        r"ids.*`parity golden update -k case-a`",
    ) as e:
        golden.check_matches(g, "case-a", "f" * 64, "i" * 64, KEY)
    assert e.value.kind == "stale"


def test_an_update_replaces_the_token_ids_file(tmp_path):
    d = _write(tmp_path, _items())
    first = json.loads((d / "manifest.json").read_text())["token_ids"]["file"]
    golden.write(
        tmp_path,
        "case-a",
        _items(),
        task="embed",
        fingerprint="f" * 64,
        inputs={"sha256": "i" * 64},
        dtype="float32",
        device="cpu",
        versions={},
        model="m",
        key=KEY,
        token_ids=[None] * 4,
    )
    second = json.loads((d / "manifest.json").read_text())["token_ids"]
    assert second["file"] != first and not (d / first).exists() and second["items_with_ids"] == 0
    assert golden.read(tmp_path, "case-a").requests == [{"prompt_token_ids": None}] * 4


def test_a_half_golden_lists_its_float32_reference_and_an_edited_one_is_corrupt(tmp_path):
    """The float32 reference beside a half-precision golden is written like the arrays (temporary
    name, rename), named with its sha256 in the manifest, and checked when read."""
    half, fp32 = _items(0), _items(1)
    golden.write(
        tmp_path,
        "case-a",
        half,
        task="embed",
        fingerprint="f" * 64,
        inputs={"name": "short-texts", "sha256": "i" * 64},
        dtype="bfloat16",
        device="cpu",
        versions={},
        model="synthetic",
        key=KEY,
        token_ids=None,
        fp32=(fp32, {"model_fingerprint": "f" * 64, "inputs_sha256": "i" * 64}),
    )
    g = golden.read(tmp_path, "case-a")
    entry = g.manifest[golden.FP32_KEY]
    assert g.fp32_path.name == entry["file"] and entry["sha256"] == golden.file_sha256(g.fp32_path)
    assert not list((tmp_path / "case-a").glob("*.tmp"))
    assert golden.fp32_reference(g, "case-a", "f" * 64, "i" * 64) == g.fp32_path
    with pytest.raises(GoldenError, match="made from other inputs_sha256") as e:
        golden.fp32_reference(g, "case-a", "f" * 64, "other")
    assert e.value.kind == "mismatch"
    save_file({"item.00000": fp32[0] * 2}, str(g.fp32_path))
    with pytest.raises(GoldenError, match="do not match the manifest's sha256") as e:
        golden.read(tmp_path, "case-a")
    assert e.value.kind == "corrupt"
    # an update replaces it and removes the old file; a float32 golden lists none
    _write(tmp_path, _items(2))
    g = golden.read(tmp_path, "case-a")
    assert g.fp32_path is None and golden.FP32_KEY not in g.manifest
    assert not list((tmp_path / "case-a").glob("reference-float32*"))
