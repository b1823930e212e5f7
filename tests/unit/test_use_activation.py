"""Pooler settings users override (issue #27): a case's `use_activation` (vLLM's per-request
PoolingParams / request field) and the engine's pooler_config.use_activation; what the matrix
accepts, what each runner is sent, and what the reference recipes compute with it on and off,
each checked against a second implementation (numpy on the model's raw outputs)."""

import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from harness.matrix.schema import Case, SyntheticModel, Tolerance
from harness.models.synthetic import build
from harness.run.execute import Executor
from harness.runners import LoadRequest
from tests.fake_server import served
from tests.requests import nest, req

TEXTS = ["the cat sat on the mat", "a dog ran", "where is the station?"]
TOL = {"float32": Tolerance(max_abs=1e-5, max_rel=1e-4, cosine_distance=1e-6)}


def _case(task: str = "classify", **kw) -> Case:
    return Case(
        id="c",
        family="f",
        task=task,
        model={"source": "synthetic", "arch": "BertForSequenceClassification"},
        inputs="short-texts",
        runners=["hf", "vllm-v1"],
        tolerances=TOL,
        **nest(kw),
    )


# --- the matrix ---


def test_use_activation_applies_to_the_tasks_that_have_a_post_processing():
    for task in ("embed", "classify", "token_embed", "token_classify", "reward"):
        assert _case(task, use_activation=False).request.use_activation is False
    for task in ("score", "step_reward"):
        with pytest.raises(ValueError, match="use_activation applies to tasks"):
            _case(task, use_activation=True)
        with pytest.raises(ValueError, match="use_activation applies to tasks"):
            _case(task, hf={"use_activation": False})
    # an engine setting alone stays a fault injection (tests/integration/data/faults.yaml)
    assert _case("score", engine={"pooler_config": {"use_activation": False}}).hf == {}
    with pytest.raises(ValueError, match="drop hf.use_activation"):
        _case(use_activation=True, hf={"use_activation": False})


def test_the_request_setting_goes_to_every_runner_the_engine_one_to_the_reference_only(
    tmp_path,
):
    engine = _case(
        engine={"pooler_config": {"use_activation": False}}, hf={"use_activation": False}
    )
    hf, _ = Executor._run_request(engine, "hf", tmp_path)
    v1, _ = Executor._run_request(engine, "vllm-v1", tmp_path)
    assert hf["request"]["use_activation"] is False
    assert "use_activation" not in v1["request"]  # the engine already has it
    fault = _case(engine={"pooler_config": {"use_activation": False}})
    hf, _ = Executor._run_request(fault, "hf", tmp_path)
    assert "use_activation" not in hf["request"]  # the reference keeps the task's default
    request = _case(use_activation=False)
    for runner in ("hf", "vllm-v1", "vllm-serve-v1"):
        got, _ = Executor._run_request(request, runner, tmp_path)
        assert got["request"]["use_activation"] is False, runner
    plain, _ = Executor._run_request(_case(), "vllm-v1", tmp_path)
    assert "use_activation" not in plain["request"]


def test_the_golden_key_holds_the_setting_and_omits_it_when_unset(tmp_path):
    from harness.judge.golden import reference_key

    assert "use_activation" not in reference_key(_case(), tmp_path, "float32", "cpu")
    key = reference_key(_case(use_activation=False), tmp_path, "float32", "cpu")
    assert key["use_activation"] is False


# --- what the runners send ---


def test_the_server_sends_use_activation_in_the_request_body():
    sent = []

    def handler(request):
        body = json.loads(request.content)
        sent.append((request.url.path, body.get("use_activation", "absent")))
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [1]})
        if request.url.path == "/classify":
            return httpx.Response(200, json={"data": [{"probs": [0.5]}], "usage": {}})
        return httpx.Response(200, json={"data": [{"data": [[0.1]]}], "usage": {}})

    runner = served(handler)
    runner.run("classify", ["a text"], req(use_activation=False))
    runner.run("reward", ["a text"], req(use_activation=True))
    runner.run("classify", ["a text"], req())
    assert sent == [
        ("/classify", False),
        ("/tokenize", "absent"),
        ("/pooling", True),
        ("/tokenize", "absent"),
        ("/classify", "absent"),
        ("/tokenize", "absent"),
    ]


def test_the_offline_runner_sends_pooling_params_with_the_setting():
    from harness.runners.vllm import VllmRunner

    seen = []

    class Out:
        def __init__(self):
            self.outputs = type("O", (), {"data": np.zeros((2, 1), np.float32)})()
            self.prompt_token_ids, self.request_id, self.num_cached_tokens = [1, 2], "0", 0

    class FakeLLM:
        def encode(self, prompts, pooling_task=None, **kw):
            seen.append(kw.get("pooling_params"))
            return [Out() for _ in prompts]

    runner = VllmRunner("v1")
    runner.llm = FakeLLM()
    runner._call("reward", ["a"], {}, {"use_activation": True})
    runner._call("reward", ["a"], {}, {})
    assert seen[0].use_activation is True and seen[0].dimensions is None
    assert seen[1] is None  # nothing asked: the engine's default, no PoolingParams


# --- the reference recipes, on and off, against numpy on the model's raw outputs ---


def _built(tmp_path: Path, **spec) -> Path:
    d = tmp_path / spec["arch"]
    build(SyntheticModel(source="synthetic", **spec), d)
    return d


def _hf(model_dir: Path):
    from harness.runners.hf import HFRunner

    runner = HFRunner(None)
    runner.load(LoadRequest(model_dir=str(model_dir), dtype="float32", device="cpu"))
    return runner


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_st_embed_off_is_the_mean_pooled_vector_and_on_its_unit_vector(tmp_path):
    import torch
    import transformers

    d = _built(tmp_path, arch="BertModel", seed=0, pooling="mean", normalize=True)
    runner = _hf(d)
    off = runner.run("embed", TEXTS, req(reference="st-embed", use_activation=False)).outputs
    on = runner.run("embed", TEXTS, req(reference="st-embed", use_activation=True)).outputs
    default = runner.run("embed", TEXTS, req(reference="st-embed")).outputs
    runner.unload()
    tok = transformers.AutoTokenizer.from_pretrained(str(d))
    model = transformers.AutoModel.from_pretrained(str(d)).eval()
    for text, o, n, p in zip(TEXTS, off, on, default):
        with torch.inference_mode():
            hidden = model(**tok(text, return_tensors="pt")).last_hidden_state[0].numpy()
        mean = hidden.mean(axis=0)  # one unpadded text: mean over its tokens
        np.testing.assert_allclose(o, mean, atol=1e-5)
        assert abs(float(np.linalg.norm(o)) - 1.0) > 0.1  # the case proves something
        np.testing.assert_allclose(n, mean / np.linalg.norm(mean), atol=1e-6)
        np.testing.assert_allclose(p, n, atol=1e-6)


def test_classifiers_off_are_the_logits_and_on_their_softmax(tmp_path):
    import torch
    import transformers

    d = _built(tmp_path, arch="BertForSequenceClassification", seed=2, config={"num_labels": 3})
    runner = _hf(d)
    off = runner.run("classify", TEXTS, req(use_activation=False)).outputs
    default = runner.run("classify", TEXTS, req()).outputs
    runner.unload()
    tok = transformers.AutoTokenizer.from_pretrained(str(d))
    model = transformers.AutoModelForSequenceClassification.from_pretrained(str(d)).eval()
    for text, o, p in zip(TEXTS, off, default):
        with torch.inference_mode():
            logits = model(**tok(text, return_tensors="pt")).logits[0].numpy()
        np.testing.assert_allclose(o, logits, atol=1e-6)
        np.testing.assert_allclose(p, _softmax(logits), atol=1e-6)


def test_token_classifier_off_is_the_logits_per_token(tmp_path):
    d = _built(tmp_path, arch="BertForTokenClassification", seed=3, config={"num_labels": 5})
    runner = _hf(d)
    off = runner.run("token_classify", TEXTS, req(use_activation=False)).outputs
    default = runner.run("token_classify", TEXTS, req()).outputs
    runner.unload()
    for o, p in zip(off, default):
        assert o.shape == p.shape and o.shape[1] == 5
        assert not np.allclose(o.sum(axis=-1), 1.0)
        np.testing.assert_allclose(p, _softmax(o), atol=1e-6)


def test_reward_on_is_the_sigmoid_of_the_raw_reward(tmp_path):
    d = _built(tmp_path, arch="Qwen2ForRewardModel", seed=13)
    runner = _hf(d)
    on = runner.run("reward", TEXTS, req(use_activation=True)).outputs
    off = runner.run("reward", TEXTS, req(use_activation=False)).outputs
    default = runner.run("reward", TEXTS, req()).outputs
    runner.unload()
    for n, o, p in zip(on, off, default):
        np.testing.assert_array_equal(o, p)  # raw is the reward's default
        np.testing.assert_allclose(n, 1.0 / (1.0 + np.exp(-o)), atol=1e-6)


def test_colbert_token_embed_off_is_the_projection_before_normalising(tmp_path):
    d = _built(tmp_path, arch="HF_ColBERT", seed=30)
    runner = _hf(d)
    off = runner.run("token_embed", TEXTS, req(use_activation=False)).outputs
    default = runner.run("token_embed", TEXTS, req()).outputs
    runner.unload()
    for o, p in zip(off, default):
        norms = np.linalg.norm(o, axis=-1, keepdims=True)
        assert np.abs(norms - 1.0).max() > 0.1
        np.testing.assert_allclose(p, o / norms, atol=1e-6)


def test_a_recipe_without_the_setting_refuses_it(tmp_path):
    d = _built(tmp_path, arch="BertForSequenceClassification", seed=1, config={"num_labels": 1})
    runner = _hf(d)
    with pytest.raises(ValueError, match="does not implement use_activation"):
        runner.run(
            "score",
            [("a query", "a document")],
            req(reference="st-cross-encoder", use_activation=False),
        )
    runner.unload()
