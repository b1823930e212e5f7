"""LoRA cases (issue #27): the `lora` key, the seeded adapter peft builds beside the model, and
that the extended matrix's adapter matters: with it, peft's outputs move far beyond the case's
tolerance from the base model's (so a vLLM that dropped the adapter could not pass)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.matrix.inputs import input_set
from harness.matrix.schema import LoraAdapter, MatrixError
from harness.run.matrices import load_matrix
from tests.conftest import ROOT
from tests.requests import req

CASE = "qwen3-tiny-seq-classify-3-lora"


def _case():
    return load_matrix(ROOT / "matrices" / "extended.yaml").case(CASE)


def test_the_extended_case_names_its_adapter():
    case = _case()
    assert case.lora == LoraAdapter(
        seed=2704, r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], modules_to_save=["score"]
    )
    assert case.runners == ["hf", "vllm-v1", "vllm-v2"]
    assert case.reference == "hf-sequence-classification"


MATRIX = """
families:
  f: {{task: classify}}
cases:
  - id: c
    family: f
    task: classify
    inputs: short-texts
    runners: {runners}
    model: {{source: synthetic, arch: Qwen3ForSequenceClassification}}
    tolerances: {{float32: {{max_abs: 1.0e-5}}}}
    lora: {lora}
"""


def test_lora_loads_on_server_runners(write_matrix):
    path = write_matrix(
        MATRIX.format(runners="[hf, vllm-serve-v1]", lora="{target_modules: [q_proj]}")
    )
    assert load_matrix(path).cases[0].lora == LoraAdapter(target_modules=["q_proj"])


def test_a_server_serves_the_adapter_by_name_and_every_request_names_it(tmp_path):
    """vllm#44410: an adapter named as the model on a pooling endpoint. The server is started
    with the adapter under `--lora-modules NAME=DIR` and the offline runner's LoRA kwargs, and
    the requests (each item's and /tokenize's) name the adapter, not the base model's folder."""
    import httpx

    from harness.runners.serve import LORA_NAME, _lora_flags
    from harness.runners.serve_process import cli_args
    from tests.fake_server import served

    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 4}))
    flags = cli_args(_lora_flags(str(tmp_path)))
    assert flags[flags.index("--lora-modules") + 1] == f"{LORA_NAME}={tmp_path}"
    assert "--enable-lora" in flags and flags[flags.index("--max-loras") + 1] == "1"
    assert _lora_flags(None) == {}

    named = []

    def handler(request: httpx.Request) -> httpx.Response:
        named.append((request.url.path, json.loads(request.content)["model"]))
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [1, 2]})
        return httpx.Response(200, json={"data": [{"probs": [0.5, 0.5]}], "usage": {}})

    runner = served(handler, model="/models/base")
    runner.name = LORA_NAME
    runner.run("classify", ["a text"], req())
    assert named == [("/classify", LORA_NAME), ("/tokenize", LORA_NAME)]


@pytest.mark.parametrize(
    "lora, message",
    [
        ("{r: 4}", "target_modules"),
        ("{target_modules: []}", "target_modules"),
        ("{target_modules: [q_proj], r: 0}", "greater than 0"),
        ("{target_modules: [q_proj], alpha: 8}", "alpha"),  # a typo of lora_alpha
    ],
)
def test_a_malformed_lora_is_refused(write_matrix, lora, message):
    path = write_matrix(MATRIX.format(runners="[hf, vllm-v1]", lora=lora))
    with pytest.raises(MatrixError, match=message):
        load_matrix(path)


def test_vllm_engine_kwargs_take_the_smallest_rank_vllm_accepts(tmp_path):
    pytest.importorskip("vllm")
    from harness.runners.vllm_engine import lora_engine_kwargs

    for r, rank in ((1, 1), (4, 8), (8, 8), (9, 16)):
        (tmp_path / "adapter_config.json").write_text(json.dumps({"r": r}))
        assert lora_engine_kwargs(str(tmp_path)) == {
            "enable_lora": True,
            "max_loras": 1,
            "max_lora_rank": rank,
        }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The case's base model and its adapter, built twice, into a temp folder (not the cache)."""
    pytest.importorskip("peft")
    from harness.models import lora, synthetic

    case = _case()
    tmp = tmp_path_factory.mktemp("lora")
    synthetic.build(case.model, tmp / "model")
    fps = [lora.build(tmp / "model", case.lora, tmp / f"adapter{i}") for i in (0, 1)]
    return case, tmp, fps


def test_the_adapter_is_deterministic_and_peft_layout(built):
    case, tmp, fps = built
    assert fps[0] == fps[1]
    cfg = json.loads((tmp / "adapter0" / "adapter_config.json").read_text())
    assert cfg["peft_type"] == "LORA" and cfg["task_type"] == "SEQ_CLS"
    assert (cfg["r"], cfg["lora_alpha"]) == (4, 8)
    assert sorted(cfg["target_modules"]) == ["q_proj", "v_proj"]
    assert "score" in cfg["modules_to_save"]
    from safetensors.numpy import load_file

    tensors = load_file(str(tmp / "adapter0" / "adapter_model.safetensors"))
    b = [v for k, v in tensors.items() if "lora_B" in k]
    assert b and all(np.abs(v).max() > 0 for v in b)  # peft's init would leave lora_B at zero
    assert any(k.endswith("score.weight") for k in tensors)  # the head, via modules_to_save


def test_the_adapter_moves_the_outputs_far_beyond_the_tolerance(built):
    """peft with the adapter against the same PeftModel with it disabled (the base model), on
    the case's inputs: the difference dwarfs the case's float32 bound. Also: disabled, peft is
    the plain transformers model (the base case's reference), a second implementation."""
    import torch
    import transformers
    from peft import PeftModel

    case, tmp, _ = built
    tok = transformers.AutoTokenizer.from_pretrained(tmp / "model")
    base = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp / "model", dtype=torch.float32
    ).eval()
    with torch.inference_mode():
        encs = [tok(t, return_tensors="pt") for t in input_set(case.inputs).items]
        plain = [torch.softmax(base(**e).logits[0], -1).numpy() for e in encs]
        model = PeftModel.from_pretrained(base, tmp / "adapter0").eval()
        with_adapter = [torch.softmax(model(**e).logits[0], -1).numpy() for e in encs]
        with model.disable_adapter():
            without = [torch.softmax(model(**e).logits[0], -1).numpy() for e in encs]
        # the adapter's own head alone (modules_to_save), q/v LoRA kept: the base model's head
        # put back into the adapter's copy of it
        head = model.base_model.model.score
        head.modules_to_save["default"].load_state_dict(head.original_module.state_dict())
        base_head = [torch.softmax(model(**e).logits[0], -1).numpy() for e in encs]
    bound = case.tolerance("float32").max_abs
    moved = max(float(np.abs(a - b).max()) for a, b in zip(with_adapter, without))
    assert moved > 1000 * bound, moved
    print(f"adapter moves the outputs by {moved:.3g}")
    # so a vLLM that ran the q/v LoRA but kept the base score head could not pass either
    head_moved = max(float(np.abs(a - b).max()) for a, b in zip(with_adapter, base_head))
    assert head_moved > 1000 * bound, head_moved
    print(f"the adapter's head alone moves them by {head_moved:.3g}")
    assert max(float(np.abs(a - b).max()) for a, b in zip(without, plain)) < 1e-6


def test_a_lora_case_gets_its_own_model_and_load(monkeypatch):
    """The plan gives a LoRA case the model with its adapter (its own fingerprint, so its own
    load and golden key), the same model's plain case the base; a broken adapter fails only its
    case, as an error."""
    from pathlib import Path

    from harness.models.resolve import ResolvedModel
    from harness.run import plan as plan_mod
    from harness.runners.platform import Platform
    from tests.unit.test_compare import make_case

    monkeypatch.setattr(
        plan_mod, "resolve", lambda src, base: ResolvedModel(Path(src.path), "fp-base", "base")
    )

    def fake_with_adapter(model, spec):
        if spec.seed == 666:
            raise RuntimeError("peft crashed")
        return ResolvedModel(model.path, f"{model.fingerprint}+{spec.seed}", "lora", Path("ad"))

    monkeypatch.setattr(plan_mod, "with_adapter", fake_with_adapter)
    lora = {"seed": 1, "target_modules": ["q_proj"]}
    cases = [
        make_case(id="base"),
        make_case(id="lora", lora=lora),
        make_case(id="broken", lora={**lora, "seed": 666}),
    ]
    plan = plan_mod.build_plan(cases, Platform("cpu"), Path("."))
    assert plan.models["base"].adapter is None and plan.models["base"].fingerprint == "fp-base"
    assert plan.models["lora"].adapter == Path("ad")
    assert plan.models["lora"].fingerprint == "fp-base+1"
    assert plan.models["broken"] == plan_mod.ModelProblem(
        "error", "LoRA adapter could not be built: peft crashed"
    )
    loads = plan.queues["vllm-v1"]
    assert [[c.id for c in load.cases] for load in loads] == [["base"], ["lora"]]


def test_a_reference_recipe_that_does_not_run_the_adapter_is_refused(monkeypatch):
    """A recipe whose model does not come from HFRunner.auto_model (which puts peft's adapter on
    it) cannot be a LoRA case's reference: refused, never a silent base-model reference."""
    from harness.runners import LoadRequest
    from harness.runners import hf as hf_mod

    hf_mod.discover()
    monkeypatch.setitem(hf_mod._RECIPES, "no-adapter", lambda runner, items, options: [])
    runner = hf_mod.HFRunner(None)
    runner.req = LoadRequest(model_dir="m", dtype="float32", device="cpu", lora_dir="adapter")
    with pytest.raises(ValueError, match="does not run the case's LoRA adapter"):
        runner.run("classify", ["a"], req(reference="no-adapter"))
