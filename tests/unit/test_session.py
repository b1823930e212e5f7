from pathlib import Path

from harness.run.assemble import verdict_for
from harness.run.execute import RunOutcome
from harness.runners.outputs import save_items
from tests.unit.test_compare import make_case, vecs


def _outcomes(tmp_path, runner, actual, items=None):
    ref_items = vecs(24)
    save_items(tmp_path / "ref.safetensors", ref_items)
    save_items(
        tmp_path / "got.safetensors", items if items is not None else [a.copy() for a in ref_items]
    )
    ref = RunOutcome("c", "hf", "ok", output=str(tmp_path / "ref.safetensors"))
    got = RunOutcome(
        "c",
        runner,
        "ok",
        output=str(tmp_path / "got.safetensors"),
        info={"actual_runner": actual, "runner_choice": "vLLM's choice: Triton unavailable"},
    )
    return ref, got


def test_explicit_runner_that_ran_the_other_one_is_an_error(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-v2", "v1")
    v = verdict_for(
        make_case(runners=["hf", "vllm-v2"], inputs="short-texts"), "vllm-v2", "float32", ref, got
    )
    assert v.status == "error" and "asked vLLM for model runner V2 but it ran V1" in v.reason


def test_default_runner_audit_fails_on_unexpected_choice(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-auto", "v1")
    case = make_case(runners=["hf", "vllm-auto"], expected_auto_runner="v2")
    v = verdict_for(case, "vllm-auto", "float32", ref, got)
    assert (
        v.status == "fail"
        and "default-runner audit: vLLM chose V1 but this family expects V2" in v.reason
    )
    assert "Triton unavailable" in v.reason
    ref, got = _outcomes(tmp_path, "vllm-auto", "v2")
    assert verdict_for(case, "vllm-auto", "float32", ref, got).status == "pass"


def test_failed_reference_never_yields_pass(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-v1", "v1")
    ref = RunOutcome("c", "hf", "error", reason="boom")
    v = verdict_for(make_case(), "vllm-v1", "float32", ref, got)
    assert v.status == "error" and "reference (hf) error: boom" in v.reason
    assert verdict_for(make_case(), "vllm-v1", "float32", None, None).status == "error"


def test_unreadable_output_is_an_error_of_that_case(tmp_path):
    ref, got = _outcomes(tmp_path, "vllm-v1", "v1")
    (tmp_path / "got.safetensors").write_bytes(b"garbage")
    v = verdict_for(make_case(), "vllm-v1", "float32", ref, got)
    assert v.status == "error" and v.reason.startswith("comparison failed")


def test_known_environment_error_is_a_skip_with_the_exact_error(tmp_path):
    ref, _ = _outcomes(tmp_path, "vllm-v1", "v1")
    case = make_case(
        skip_if_error={
            "runners": ["vllm-v1"],
            "error_match": "No module named 'torchvision'",
            "reason": "torchvision cannot sit beside torch+cpu",
        }
    )
    missing = "engine/model failed to load: ModuleNotFoundError: No module named 'torchvision'"
    own = "ModuleNotFoundError: No module named 'torchvision'"
    v = verdict_for(
        case, "vllm-v1", "float32", ref, RunOutcome("c", "vllm-v1", "error", missing, error=own)
    )
    assert v.status == "skip" and v.reason == f"{missing} (torchvision cannot sit beside torch+cpu)"
    # any other error stays an error; another runner is not covered
    other = RunOutcome(
        "c", "vllm-v1", "error", "engine/model failed to load: RuntimeError: out of blocks"
    )
    assert verdict_for(case, "vllm-v1", "float32", ref, other).status == "error"
    case2 = make_case(
        runners=["hf", "vllm-v1", "vllm-v2"], skip_if_error=case.skip_if_error.model_dump()
    )
    assert (
        verdict_for(
            case2,
            "vllm-v2",
            "float32",
            ref,
            RunOutcome("c", "vllm-v2", "error", missing, error=own),
        ).status
        == "error"
    )
    # where the runner does run, it is compared as usual
    ref, got = _outcomes(tmp_path, "vllm-v1", "v1")
    assert verdict_for(case, "vllm-v1", "float32", ref, got).status == "pass"


def test_a_runner_inserting_a_token_fails_against_the_golden_as_against_live_hf(tmp_path):
    """--against golden runs the same token-id check as a live HF reference: the golden stores the
    reference's prompt token ids. A golden from before token ids is refused, naming the fix."""
    import json

    import numpy as np

    from harness.judge import golden
    from harness.matrix.inputs import input_set
    from harness.run.golden_flow import golden_reference

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    case = make_case(
        runners=["hf", "vllm-v1"],
        inputs="short-texts",
        model={"source": "local", "path": str(model_dir)},
    )
    n = len(input_set(case.inputs).items)
    rng = np.random.default_rng(0)
    outputs = [rng.normal(size=8).astype(np.float32) for _ in range(n)]
    ids = [[101, 2000 + i, 2001 + i, 102] for i in range(n)]
    inserted = [[x[0], 999, *x[1:]] for x in ids]  # a token slipped in after [CLS], every prompt

    def outcome(name, runner, token_ids, info=None):
        save_items(tmp_path / f"{name}.safetensors", outputs)
        (tmp_path / f"{name}.safetensors.requests.json").write_text(
            json.dumps([{"prompt_token_ids": t} for t in token_ids])
        )
        return RunOutcome(
            case.id, runner, "ok", output=str(tmp_path / f"{name}.safetensors"), info=info or {}
        )

    live = outcome("hf", "hf", ids)
    gdir = tmp_path / "golden"
    golden.write(
        gdir,
        case.id,
        outputs,
        task=case.task,
        fingerprint="f" * 64,
        inputs={"name": "short-texts", "sha256": input_set(case.inputs).sha256},
        dtype="float32",
        device="cpu",
        versions={},
        model="synthetic",
        key=golden.reference_key(case, model_dir, "float32", "cpu"),
        token_ids=ids,
    )
    from_golden = golden_reference(case, model_dir, "f" * 64, "float32", "cpu", gdir)
    assert from_golden.status == "ok", from_golden.reason
    bad = outcome("bad", "vllm-v1", inserted, {"actual_runner": "v1"})
    good = outcome("good", "vllm-v1", ids, {"actual_runner": "v1"})
    for ref in (live, from_golden):
        v = verdict_for(case, "vllm-v1", "float32", ref, bad)
        assert v.status == "fail", v.reason
        assert "token ids differ at item 0, position 1: reference 2000, runner 999" in v.reason
        v = verdict_for(case, "vllm-v1", "float32", ref, good)
        assert v.status == "pass", v.reason
        assert v.notes["token_ids"] == f"token ids equal for {n} of {n} items"
    # a golden recorded before goldens stored token ids: loadable, but refused as the reference
    manifest = gdir / case.id / "manifest.json"
    m = json.loads(manifest.read_text())
    del m["token_ids"]
    manifest.write_text(json.dumps(m))
    assert golden.read(gdir, case.id).items  # still loadable
    stale = golden_reference(case, model_dir, "f" * 64, "float32", "cpu", gdir)
    assert stale.status == "error" and f"`parity golden update -k {case.id}`" in stale.reason
    v = verdict_for(case, "vllm-v1", "float32", stale, bad)
    assert v.status == "error" and "token ids" in v.reason


def test_a_served_runners_usage_is_held_to_the_goldens_token_ids(tmp_path):
    """--against golden passes the runner's per-item answers to the same comparison as a live
    reference: usage.prompt_tokens off by one fails against the golden's token ids, and the
    checks that had no evidence (rerank) say so."""
    import json

    import numpy as np

    from harness.judge import golden
    from harness.matrix.inputs import input_set
    from harness.run.golden_flow import golden_reference

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    case = make_case(
        runners=["hf", "vllm-serve-v1"],
        inputs="short-texts",
        model={"source": "local", "path": str(model_dir)},
    )
    n = len(input_set(case.inputs).items)
    outputs = [np.random.default_rng(i).normal(size=8).astype(np.float32) for i in range(n)]
    ids = [[101, 2000 + i, 102] for i in range(n)]
    golden.write(
        tmp_path / "golden",
        case.id,
        outputs,
        task=case.task,
        fingerprint="f" * 64,
        inputs={"name": "short-texts", "sha256": input_set(case.inputs).sha256},
        dtype="float32",
        device="cpu",
        versions={},
        model="synthetic",
        key=golden.reference_key(case, model_dir, "float32", "cpu"),
        token_ids=ids,
    )
    ref = golden_reference(case, model_dir, "f" * 64, "float32", "cpu", tmp_path / "golden")

    def served(offset):
        path = tmp_path / f"serve{offset}.safetensors"
        save_items(path, outputs)
        metas = [{"prompt_token_ids": x, "usage_prompt_tokens": len(x) + offset} for x in ids]
        Path(f"{path}.requests.json").write_text(json.dumps(metas))
        info = {"actual_runner": "v1"}
        return RunOutcome(case.id, "vllm-serve-v1", "ok", output=str(path), info=info)

    v = verdict_for(case, "vllm-serve-v1", "float32", ref, served(1))
    assert v.status == "fail" and "usage.prompt_tokens of item 0 is 4" in v.reason, v.reason
    v = verdict_for(case, "vllm-serve-v1", "float32", ref, served(0))
    assert v.status == "pass", v.reason
    assert v.notes["usage"].startswith("usage.prompt_tokens equal to the reference's token count")
    assert v.notes["rerank"] == "rerank order not compared: the runner gave no /rerank answers"
