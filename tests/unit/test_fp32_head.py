"""The float32-head reference recipes (harness/runners/hf/fp32_head.py): a bfloat16 model whose
head runs in float32, checked against numpy on the model's own bfloat16 hidden states and its
head weights in float32; and shown to differ from the bfloat16 head they stand beside."""

import copy
from pathlib import Path

import numpy as np
import pytest

from harness.matrix.schema import SyntheticModel
from harness.models.synthetic import build
from harness.runners import LoadRequest
from tests.requests import req

TEXTS = ["the cat sat on the mat", "a dog ran far away", "where is the station?"]
LAYERLESS = {"num_hidden_layers": 0, "num_labels": 32}  # as the matrix's bert-tiny0 cases


def _built(tmp_path: Path, arch: str, seed: int) -> Path:
    d = tmp_path / arch
    build(SyntheticModel(source="synthetic", arch=arch, seed=seed, config=LAYERLESS), d)
    return d


def _hf(model_dir: Path, dtype: str = "bfloat16"):
    from harness.runners.hf import HFRunner

    runner = HFRunner(None)
    runner.load(LoadRequest(model_dir=str(model_dir), dtype=dtype, device="cpu"))
    return runner


def _numpy_head(model_dir: Path, cls_name: str, text: str) -> np.ndarray:
    """numpy's float32 head on transformers' bfloat16 last hidden state: the checkpoint's own
    float32 weights (read from model.safetensors, not through transformers) of the classifier,
    and for a sequence classifier BERT's pooler, tanh(W h[0] + b), first."""
    import torch
    import transformers
    from safetensors.numpy import load_file

    tok = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    model = getattr(transformers, cls_name).from_pretrained(str(model_dir), dtype=torch.bfloat16)
    model.eval()
    with torch.inference_mode():
        hidden = model.bert(**tok(text, return_tensors="pt"), output_hidden_states=True)
    h = hidden.hidden_states[-1][0].float().numpy().astype(np.float64)
    w = {
        k: v.astype(np.float64) for k, v in load_file(str(model_dir / "model.safetensors")).items()
    }
    if "bert.pooler.dense.weight" in w:
        h = np.tanh(h[0] @ w["bert.pooler.dense.weight"].T + w["bert.pooler.dense.bias"])
    return h @ w["classifier.weight"].T + w["classifier.bias"]


@pytest.mark.parametrize(
    "arch, cls_name, task, recipe",
    [
        (
            "BertForTokenClassification",
            "AutoModelForTokenClassification",
            "token_classify",
            "hf-token-classification",
        ),
        (
            "BertForSequenceClassification",
            "AutoModelForSequenceClassification",
            "classify",
            "hf-sequence-classification",
        ),
    ],
)
def test_the_float32_head_is_numpys_float32_head_and_not_the_bfloat16_one(
    tmp_path, arch, cls_name, task, recipe
):
    d = _built(tmp_path, arch, seed=2710)
    runner = _hf(d)
    fp32 = runner.run(
        task, TEXTS, req(reference=f"{recipe}-fp32-head", use_activation=False)
    ).outputs
    probs = runner.run(task, TEXTS, req(reference=f"{recipe}-fp32-head")).outputs
    half = runner.run(task, TEXTS, req(reference=recipe, use_activation=False)).outputs
    model = runner.auto_model(cls_name)
    dtypes = {p.dtype for p in model.parameters()}
    runner.unload()
    import torch

    assert dtypes == {torch.bfloat16}  # the recipe put the model's own head back
    worst_half = 0.0
    for text, got, p, h in zip(TEXTS, fp32, probs, half):
        want = _numpy_head(d, cls_name, text)
        assert got.shape == want.shape and got.shape[-1] == 32
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=0)
        e = np.exp(want - want.max(axis=-1, keepdims=True))
        np.testing.assert_allclose(p, e / e.sum(axis=-1, keepdims=True), atol=1e-6, rtol=0)
        worst_half = max(worst_half, float(np.abs(h - want).max()))
    # the bfloat16 head rounds its logits (2^-8 relative): far above the float32 agreement above
    assert worst_half > 1e-3


def test_a_model_without_a_known_head_is_refused_and_left_as_it_was():
    import torch

    from harness.runners.hf.fp32_head import float32_head, head_modules

    class Backbone(torch.nn.Module):
        base_model_prefix = "body"

        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(4, 4).to(torch.bfloat16)

    with pytest.raises(ValueError, match="no classifier head named classifier or score"):
        head_modules(Backbone(), pooled=True)

    model, full = Backbone(), Backbone()
    full.score = torch.nn.Linear(4, 2)
    model.score = copy.deepcopy(full.score).to(torch.bfloat16)
    own = model.score
    assert head_modules(model, pooled=True) == ["score"]
    x = torch.randn(3, 4).to(torch.bfloat16)
    with pytest.raises(RuntimeError, match="boom"):
        with float32_head(model, ["score"], full):
            assert model.score(x).dtype == torch.float32
            raise RuntimeError("boom")
    assert model.score is own and own.weight.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="score of the float32 model is not float32"):
        with float32_head(model, ["score"], model):
            pass
    assert model.score is own


def test_the_matrix_cases_ask_vllm_for_each_head_dtype_and_the_mutation_selects_the_fp32_ones():
    import fnmatch

    from harness.power.hook import load_mutation
    from harness.run.matrices import load_matrix

    root = Path(__file__).resolve().parents[2]
    cases = {
        c.id: c
        for c in load_matrix(root / "matrices" / "extended.yaml").cases
        if c.id.startswith("bert-tiny0-token-classify-32-")
    }
    setting = {i: c.engine.get("hf_overrides", {}).get("head_dtype") for i, c in cases.items()}
    assert setting == {
        "bert-tiny0-token-classify-32-fp32-head": None,  # vLLM's default
        "bert-tiny0-token-classify-32-fp32-head-explicit": "float32",
        "bert-tiny0-token-classify-32-model-head": "model",
    }
    for i, c in cases.items():
        fp32 = setting[i] != "model"
        assert c.reference == "hf-token-classification" + ("-fp32-head" if fp32 else "")
        assert c.dtype == "bfloat16" and c.request.use_activation is False
        assert c.model.config == LAYERLESS
        tol = c.tolerance("bfloat16")
        assert tol.k is None and tol.bounds() == {"max_abs": 1e-3}  # fixed, not calibrated
    globs = load_mutation("head_fp32_cast_dropped").CASES
    red = {i for i in cases if any(fnmatch.fnmatch(i, g) for g in globs)}
    assert red == {i for i in cases if setting[i] != "model"}
