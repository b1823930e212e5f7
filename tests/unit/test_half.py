"""Half precision, calibrated from the reference's own error: a correct runner whose error is of the
order of HF's own bf16 error passes, and the classic pooling bugs (lost normalisation, a wrong
activation, a wrong pooling method, a one-token shift) fail in bfloat16 with the default matrix's
own bounds, through the comparison path a run takes (session.verdict_for on outputs on disk)."""

from pathlib import Path

import numpy as np
import pytest

from harness.judge.compare import measure
from harness.judge.metrics import norm_rel
from harness.judge.side import Side
from harness.matrix.schema import Case, MatrixError, Tolerance
from harness.run.assemble import verdict_for
from harness.run.execute import RunOutcome
from harness.run.matrices import load_matrix
from harness.run.plan import REFERENCE_FP32, needs_fp32_reference
from harness.runners.outputs import save_items

POOLING = Path(__file__).resolve().parents[2] / "matrices" / "pooling.yaml"
RNG = np.random.default_rng(0)


def bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 to the nearest bfloat16 (ties to even), kept as float32: what a bf16 tensor
    holds. Written from the format (8 exponent bits, 7 mantissa bits), not from any library."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).reshape(np.shape(a))


def test_bf16_rounding_keeps_eight_significant_bits():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.14159, -2.5e-3], np.float32)
    got = bf16(x)
    assert got[0] == 1.0 and got[1] == 1.0  # a tie rounds to even
    assert got[2] == np.float32(1.0 + 2**-6)  # 1 + 3/256 rounds to 1 + 4/256
    assert np.all(np.abs(got - x) <= np.abs(x) * 2**-8)


def _forward(x, w, half: str | None):
    """A tiny layer, tanh(x @ w), in float32 or with inputs and outputs rounded to bf16 ('hf': every
    intermediate; 'runner': a different rounding point, as another kernel would)."""
    if half is None:
        return np.tanh(x @ w)
    if half == "hf":
        return bf16(np.tanh(bf16(bf16(x) @ bf16(w))))
    return bf16(np.tanh(bf16(x) @ bf16(w)))


def _tokens(n=6, t=7, d=48, h=384):  # h: all-MiniLM-L6-v2's width
    w = RNG.normal(size=(d, h)).astype(np.float32) / np.sqrt(d)
    xs = [RNG.normal(size=(t + i % 3, d)).astype(np.float32) for i in range(n)]
    return {mode: [_forward(x, w, mode) for x in xs] for mode in (None, "hf", "runner")}


def _unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _case(family_case: str) -> Case:
    return load_matrix(POOLING).case(family_case)


def _verdict(tmp_path, case: Case, ref32, ref, got, dtype="bfloat16"):
    """The verdict a run gives from three output files: HF in `dtype`, HF in float32, the runner."""
    paths = {}
    for name, items in (("hf", ref), (REFERENCE_FP32, ref32), ("got", got)):
        paths[name] = tmp_path / f"{name}.safetensors"
        save_items(paths[name], [np.asarray(a, np.float32) for a in items])
    ok = {"actual_runner": "v1"}
    return verdict_for(
        case,
        "vllm-v1",
        dtype,
        RunOutcome(case.id, "hf", "ok", output=str(paths["hf"])),
        RunOutcome(case.id, "vllm-v1", "ok", output=str(paths["got"]), info=ok),
        RunOutcome(case.id, REFERENCE_FP32, "ok", output=str(paths[REFERENCE_FP32])),
        calibrated=needs_fp32_reference(case, dtype),
    )


# ---- embed: normalised mean pooling -----------------------------------------------------------


def _embed(tok, pool="mean"):
    return [_unit(t.mean(0) if pool == "mean" else t[0]) for t in tok]


@pytest.fixture
def embed_case():
    case = _case("bert-tiny-mean-embed")
    assert case.family == "encoder-embed" and case.tolerance("bfloat16").k is not None
    return case


def _n_short_texts(case):
    from harness.matrix.inputs import input_set

    return len(input_set(case.inputs).items)


def _embed_set(case):
    n = _n_short_texts(case)
    out = {m: [] for m in (None, "hf", "runner")}
    while len(out[None]) < n:
        tok = _tokens()
        for m in out:
            out[m] += _embed(tok[m])
    return {m: v[:n] for m, v in out.items()}, tok


def test_a_correct_bf16_runner_passes_and_reports_its_error_over_hfs_own(tmp_path, embed_case):
    e, _ = _embed_set(embed_case)
    v = _verdict(tmp_path, embed_case, e[None], e["hf"], e["runner"])
    assert v.status == "pass", v.reason
    by = {m.name: m for m in v.metrics}
    assert by["cosine_distance"].ref_error > 0 and by["cosine_distance"].ratio is not None
    assert "norm_rel" in by  # normalised outputs are held to their length too


def test_hidden_normalisation_a_unit_vector_scaled_by_1_25_fails_in_bf16(tmp_path, embed_case):
    e, _ = _embed_set(embed_case)
    v = _verdict(tmp_path, embed_case, e[None], e["hf"], [1.25 * a for a in e["runner"]])
    assert v.status == "fail" and "norm_rel 0.25" in v.reason, v.reason
    assert "HF's own error" in v.reason


def test_wrong_pooling_cls_instead_of_mean_fails_in_bf16(tmp_path, embed_case):
    n = _n_short_texts(embed_case)
    ref32, ref, got = [], [], []
    while len(ref32) < n:
        tok = _tokens()
        ref32 += _embed(tok[None])
        ref += _embed(tok["hf"])
        got += _embed(tok["runner"], pool="cls")
    v = _verdict(tmp_path, embed_case, ref32[:n], ref[:n], got[:n])
    assert v.status == "fail" and "cosine_distance" in v.reason, v.reason


# ---- classify: softmax over labels --------------------------------------------------------------


def _softmax(x):
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


@pytest.mark.parametrize("activation", ["sigmoid", "none"])
def test_wrong_activation_fails_in_bf16(tmp_path, activation):
    case = next(
        c
        for c in load_matrix(POOLING).cases
        if c.family == "encoder-classify" and c.divergence is None
    )
    n = _n_short_texts(case)
    logits32 = [RNG.normal(scale=2.0, size=3).astype(np.float32) for _ in range(n)]
    ref32 = [_softmax(x) for x in logits32]
    ref = [bf16(_softmax(bf16(x + RNG.normal(scale=2e-2, size=3)))) for x in logits32]
    runner_logits = [bf16(x + RNG.normal(scale=2e-2, size=3)) for x in logits32]
    right = [bf16(_softmax(x)) for x in runner_logits]
    assert _verdict(tmp_path, case, ref32, ref, right).status == "pass"
    wrong = [bf16(1 / (1 + np.exp(-x))) if activation == "sigmoid" else x for x in runner_logits]
    v = _verdict(tmp_path, case, ref32, ref, wrong)
    assert v.status == "fail" and "max_abs" in v.reason, v.reason


# ---- per-token outputs: a one-token shift -------------------------------------------------------


def test_a_one_token_shift_fails_in_bf16(tmp_path):
    case = next(
        c
        for c in load_matrix(POOLING).cases
        if c.family == "colbert-token-embed" and c.divergence is None
    )
    n = _n_short_texts(case)
    out = {m: [] for m in (None, "hf", "runner")}
    while len(out[None]) < n:
        tok = _tokens()
        for m in out:
            out[m] += [_unit(t) for t in tok[m]]
    ref32, ref, right = (out[m][:n] for m in (None, "hf", "runner"))
    assert _verdict(tmp_path, case, ref32, ref, right).status == "pass"
    shifted = [np.concatenate([t[1:], t[:1]]) for t in right]
    v = _verdict(tmp_path, case, ref32, ref, shifted)
    assert v.status == "fail" and "cosine_distance" in v.reason, v.reason


# ---- the rules themselves -----------------------------------------------------------------------


def test_calibrated_bound_is_k_times_the_references_own_error_plus_the_floor():
    # two distinct items: a single item is a degenerate reference (harness.judge.compare)
    other = np.array([-3.0, 0.5, 1.5])
    ref32 = [np.array([1.0, 2.0, 4.0]), other]
    ref = [np.array([1.0, 2.0, 4.01]), other]  # HF's own max_abs error: 0.01
    items = ("a", "b")
    tol = Tolerance(k=3.0, max_abs=1e-3)
    m = measure(
        tol, ("max_abs",), Side(ref), Side([np.array([1.0, 2.0, 4.02]), other]), items, Side(ref32)
    ).metrics[0]
    assert m.ref_error == pytest.approx(0.01) and m.bound == pytest.approx(3 * 0.01 + 1e-3)
    assert m.value == pytest.approx(0.02) and m.ratio == pytest.approx(2.0) and m.ok
    bad = measure(
        tol, ("max_abs",), Side(ref), Side([np.array([1.0, 2.0, 4.04]), other]), items, Side(ref32)
    ).metrics[0]
    assert bad.value == pytest.approx(0.04) and not bad.ok
    # where HF in half equals HF in float32, the floor alone is the bound
    exact = measure(
        tol,
        ("max_abs",),
        Side(ref32),
        Side([np.array([1.0, 2.0, 4.0005]), other]),
        items,
        Side(ref32),
    ).metrics[0]
    assert exact.ref_error == 0.0 and exact.bound == pytest.approx(1e-3)
    assert exact.ratio is None and exact.ok


def test_calibrated_bounds_without_the_float32_reference_are_an_error(tmp_path, embed_case):
    e, _ = _embed_set(embed_case)
    save_items(tmp_path / "a.safetensors", e["hf"])
    ref = RunOutcome(embed_case.id, "hf", "ok", output=str(tmp_path / "a.safetensors"))
    got = RunOutcome(
        embed_case.id,
        "vllm-v1",
        "ok",
        output=str(tmp_path / "a.safetensors"),
        info={"actual_runner": "v1"},
    )
    v = verdict_for(embed_case, "vllm-v1", "bfloat16", ref, got, None, calibrated=True)
    assert v.status == "error" and "float32 reference" in v.reason
    failed = RunOutcome(embed_case.id, REFERENCE_FP32, "error", "boom")
    v = verdict_for(embed_case, "vllm-v1", "bfloat16", ref, got, failed, calibrated=True)
    assert v.status == "error"


def test_norm_rel_sees_length_not_direction():
    v = [np.array([3.0, 4.0])]
    assert norm_rel(v, [np.array([6.0, 8.0])]) == pytest.approx(1.0)
    assert norm_rel(v, [np.array([4.0, 3.0])]) == pytest.approx(0.0)
    # second implementation: per token rows, worst row
    t = [np.array([[1.0, 0.0], [0.0, 2.0]])]
    assert norm_rel(t, [np.array([[1.0, 0.0], [0.0, 2.5]])]) == pytest.approx(0.25)


def test_k_is_for_half_precision_only_and_only_half_runs_get_the_float32_reference():
    base = dict(
        id="c",
        family="f",
        task="embed",
        model={"source": "local", "path": "x"},
        inputs="short-texts",
        runners=["hf", "vllm-v1"],
    )
    bad = {"float32": {"k": 2, "cosine_distance": 1e-6, "max_abs": 1e-5}}
    with pytest.raises(ValueError, match="k: calibrated bounds"):
        Case.model_validate({**base, "tolerances": bad})
    case = Case.model_validate(
        {
            **base,
            "tolerances": {
                "float32": {"cosine_distance": 1e-6, "max_abs": 1e-5},
                "bfloat16": {"k": 2, "cosine_distance": 1e-4, "max_abs": 1e-3},
                "float16": {"cosine_distance": 1e-3, "max_abs": 1e-2},
            },
        }
    )
    assert needs_fp32_reference(case, "bfloat16")
    assert not needs_fp32_reference(case, "float32") and not needs_fp32_reference(case, "float16")


def test_every_half_precision_bound_of_the_default_matrix_is_calibrated():
    try:
        cases = load_matrix(POOLING).cases
    except MatrixError as e:  # pragma: no cover - the matrix tests report this
        pytest.fail(str(e))
    for case in cases:
        for dtype in ("bfloat16", "float16"):
            tol = case.tolerances.get(dtype)
            assert tol is not None and tol.k is not None, f"{case.id} {dtype}"
            if case.task in ("embed", "token_embed"):
                assert tol.norm_rel is not None, f"{case.id} {dtype}: vectors need norm_rel"


def _half_golden(tmp_path, case, e, ids=None):
    """`parity golden update` of a bfloat16 golden from outcomes on disk (HF in bf16 and in
    float32), through the session's own golden path; (verify(fresh ids=None) -> Verdict, dir)."""
    import json
    from types import SimpleNamespace

    from harness.matrix.inputs import input_set
    from harness.run.golden_flow import _golden_verdict

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    model = SimpleNamespace(path=model_dir, fingerprint="fp", description="synthetic")
    plan = SimpleNamespace(
        dtypes={case.id: "bfloat16"},
        calibrated={case.id: True},
        platform=SimpleNamespace(device="cpu"),
    )
    n = len(input_set(case.inputs).items)
    ids = ids or [[101, 7 + i, 102] for i in range(n)]

    def outcome(name, runner, items, token_ids):
        save_items(tmp_path / f"{name}.safetensors", items)
        (tmp_path / f"{name}.safetensors.requests.json").write_text(
            json.dumps([{"prompt_token_ids": t} for t in token_ids])
        )
        return RunOutcome(case.id, runner, "ok", output=str(tmp_path / f"{name}.safetensors"))

    ref, ref32 = outcome("hf", "hf", e["hf"], ids), outcome("hf32", REFERENCE_FP32, e[None], ids)
    gdir = tmp_path / "golden"
    v, _ = _golden_verdict(case, plan, ref, model, gdir, "update", ref32)
    assert v.status == "pass", v.reason

    def verify(fresh_ids=None):
        fresh = outcome("fresh", "hf", e["hf"], fresh_ids or ids)
        fresh32 = outcome("fresh32", REFERENCE_FP32, e[None], fresh_ids or ids)
        return _golden_verdict(case, plan, fresh, model, gdir, "verify", fresh32)

    return verify, gdir / case.id


def _rewrite_fp32(d: Path, items, rehash: bool) -> None:
    """Edit the float32 reference beside a golden (keeping its metadata); with `rehash`, fix the
    manifest's sha256 too (someone editing both)."""
    import json

    from harness.runners.outputs import load_items

    (path,) = d.glob("reference-float32*.safetensors")
    _, meta = load_items(path)
    save_items(path, items, meta)
    manifest = json.loads((d / "manifest.json").read_text())
    if rehash:
        from harness.judge.golden import file_sha256

        manifest["float32_reference"]["sha256"] = file_sha256(path)
        (d / "manifest.json").write_text(json.dumps(manifest))


def test_a_half_precision_golden_keeps_its_float32_reference_and_verify_checks_it(
    tmp_path, embed_case
):
    """The float32 reference beside a bf16 golden (the yardstick of its calibrated bounds) is
    listed with its sha256 in the manifest and verified: `golden verify` compares a fresh HF
    float32 run to it, as it compares HF in bf16 to the golden's arrays."""
    from harness.judge import golden

    e, _ = _embed_set(embed_case)
    verify, d = _half_golden(tmp_path, embed_case, e)
    m = golden.read(d.parent, embed_case.id).manifest
    assert m["schema_version"] == 3 and m["float32_reference"]["file"].startswith(
        "reference-float32-"
    )
    v, metrics = verify()
    assert v.status == "pass", v.reason
    assert "cosine_distance (float32)" in [x.name for x in metrics]
    assert v.notes["token_ids (float32)"].startswith("token ids equal for")
    # a drifted yardstick, the manifest's hash edited to match: the values fail
    _rewrite_fp32(d, [a + 1e-3 for a in e[None]], rehash=True)
    v, _ = verify()
    assert v.status == "fail", v.reason
    assert "HF in float32 against the golden's float32 reference: cosine_distance" in v.reason


def test_a_tampered_float32_reference_beside_a_half_golden_is_refused(tmp_path, embed_case):
    """Edited without its hash: the golden is corrupt, not a yardstick (green on `layout`, where
    the sidecar was not in the manifest)."""
    e, _ = _embed_set(embed_case)
    verify, d = _half_golden(tmp_path, embed_case, e)
    _rewrite_fp32(d, [a * 2 for a in e[None]], rehash=False)
    v, _ = verify()
    assert v.status == "error", v.reason
    assert "golden corrupt" in v.reason and "do not match the manifest's sha256" in v.reason


def test_golden_verify_of_a_half_golden_runs_the_token_id_check(tmp_path, embed_case):
    e, _ = _embed_set(embed_case)
    verify, _ = _half_golden(tmp_path, embed_case, e)
    n = len(e["hf"])
    v, _ = verify([[101, 999, 7 + i, 102] for i in range(n)])  # a token slipped in, every prompt
    assert v.status == "fail" and "token ids differ at item 0, position 1" in v.reason


def test_a_half_run_against_its_golden_reads_the_float32_reference_from_it(tmp_path, embed_case):
    from harness.judge import golden
    from harness.run.golden_flow import golden_outcomes

    e, _ = _embed_set(embed_case)
    _, d = _half_golden(tmp_path, embed_case, e)
    g = golden.read(d.parent, embed_case.id)
    out = golden_outcomes(embed_case, g, "fp", calibrated=True)
    ref32 = out[(embed_case.id, REFERENCE_FP32)]
    assert ref32.status == "ok" and Path(ref32.output) == g.fp32_path
    stale = golden_outcomes(embed_case, g, "other-weights", calibrated=True)
    stale32 = stale[(embed_case.id, REFERENCE_FP32)]
    assert stale32.status == "error" and "model_fingerprint" in stale32.reason
    # a golden without its float32 reference, or with one written before it was listed
    g_plain = golden.Golden(g.items, g.manifest, g.arrays_path)
    missing = golden_outcomes(embed_case, g_plain, "fp", calibrated=True)
    assert "no float32 reference beside it" in missing[(embed_case.id, REFERENCE_FP32)].reason
    save_items(d / golden.LEGACY_FP32_SIDECAR, e[None], {"model_fingerprint": "fp"})
    legacy = golden_outcomes(embed_case, g_plain, "fp", calibrated=True)
    assert "golden stale" in legacy[(embed_case.id, REFERENCE_FP32)].reason


def test_a_half_run_adds_a_float32_reference_load_to_the_hf_queue_a_float32_run_none(monkeypatch):
    from harness.models.resolve import ResolvedModel
    from harness.run import plan as plan_mod
    from harness.run.plan import build_plan
    from harness.runners.platform import Platform

    monkeypatch.setattr(
        plan_mod, "resolve", lambda src, base: ResolvedModel(Path(src.path), "fp", src.path)
    )
    tol = {
        "float32": {"cosine_distance": 1e-6, "max_abs": 1e-5},
        "bfloat16": {"k": 2, "cosine_distance": 1e-4, "max_abs": 1e-3},
    }
    cases = [
        Case.model_validate(
            dict(
                id=i,
                family="f",
                task="embed",
                model={"source": "local", "path": "m"},
                inputs="short-texts",
                runners=["hf", "vllm-v1"],
                tolerances=tol,
            )
        )
        for i in ("a", "b")
    ]
    half = build_plan(cases, Platform("cpu"), Path("."), dtype="bfloat16", fp32_reference=True)
    loads = {(load.name, load.dtype): [c.id for c in load.cases] for load in half.queues["hf"]}
    assert loads == {("hf", "bfloat16"): ["a", "b"], (REFERENCE_FP32, "float32"): ["a", "b"]}
    assert REFERENCE_FP32 not in half.runners  # not a compared runner
    fp32 = build_plan(cases, Platform("cpu"), Path("."), dtype="float32", fp32_reference=True)
    assert [(load.name, load.dtype) for load in fp32.queues["hf"]] == [("hf", "float32")]


def test_reports_show_hfs_own_error_and_the_ratio_beside_each_calibrated_metric():
    from harness.report.html import metric_rows
    from harness.report.markdown import to_markdown
    from harness.report.model import MetricOut, Report, Result

    m = MetricOut(name="max_abs", value=1.3e-2, bound=3.1e-2, ok=True, ref_error=1.0e-2, ratio=1.3)
    res = Result(
        case_id="c",
        family="fam",
        task="embed",
        runner="vllm-v1",
        runner_label="vLLM V1",
        status="fail",
        reason="why",
        metrics=[m],
        dtype="bfloat16",
    )
    md = to_markdown(
        Report(
            harness_version="0",
            matrix="m.yaml",
            matrix_sha256="0",
            device="cpu",
            started="now",
            results=[res],
        )
    )
    assert "max_abs 1.30e-02 ≤ 3.10e-02 (HF's own 1.00e-02, 1.3x)" in md
    row = [str(getattr(c, "html", c)) for c in metric_rows(res)[0]]
    assert any("0.01" in c for c in row) and any("1.3" in c for c in row)
