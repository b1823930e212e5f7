"""GritLM: the synthetic checkpoint's tokenizer gives the prompt pattern vLLM looks for, the pinned
reference package is imported at its pin or skipped, and the reference (the `gritlm` package's
GritLM.encode) is checked against a second implementation (numpy mean over transformers'
bidirectional hidden states, the instruction's tokens left out)."""

from __future__ import annotations

import importlib.metadata
import json

import numpy as np
import pytest

from harness.runners import SkipCase
from tests.requests import req

INSTRUCTION = "<|user|>\nGiven a scientific paper title, retrieve the paper's abstract\n<|embed|>\n"
TEXTS = [
    "The cat sat quietly on the warm stone near the river.",
    "A long day of work at the company ended early.",
    "Water",
]


@pytest.fixture(scope="module")
def gritlm_dir(tmp_path_factory):
    from harness.matrix.schema import SyntheticModel
    from harness.models.synthetic import build

    d = tmp_path_factory.mktemp("gritlm") / "m"
    build(SyntheticModel(source="synthetic", arch="GritLM", seed=2705), d)
    return d


def test_the_checkpoint_is_a_mistral_named_gritlm_with_the_prompt_pattern_tokens(gritlm_dir):
    from transformers import AutoTokenizer

    cfg = json.loads((gritlm_dir / "config.json").read_text())
    assert cfg["architectures"] == ["GritLM"] and cfg["model_type"] == "mistral"
    assert cfg.get("sliding_window") is None and cfg["bos_token_id"] == 1
    tok = AutoTokenizer.from_pretrained(gritlm_dir)
    ids = tok(INSTRUCTION + TEXTS[0])["input_ids"]
    pieces = tok.convert_ids_to_tokens(ids)
    # the patterns vLLM 0.28's GritLMMeanPool matches: <s>, then the user pattern at index 1,
    # then "\n<|embed|>\n" closing the instruction
    assert pieces[:7] == ["<s>", "\u2581<", "|", "user", "|", ">", "<0x0A>"]
    n = len(tok(INSTRUCTION)["input_ids"])
    assert pieces[n - 7 : n] == ["<0x0A>", "<", "|", "embed", "|", ">", "<0x0A>"]
    assert ids[:n] == tok(INSTRUCTION)["input_ids"]  # GritLM.encode masks exactly this prefix
    assert "<0x" not in "".join(pieces[n:])  # the text itself needs no byte fallback


def test_a_pinned_package_is_imported_at_its_pin_only(monkeypatch):
    from harness.runners.hf import packages

    have = importlib.metadata.version("numpy")
    assert packages.pinned_package("numpy", have) is np

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(packages.importlib.metadata, "version", missing)
    with pytest.raises(SkipCase, match=r"gritlm==1\.0\.2 is not installed here \(pip install "):
        packages.pinned_package("gritlm", "1.0.2")
    monkeypatch.setattr(packages.importlib.metadata, "version", lambda name: "1.0.1")
    with pytest.raises(SkipCase) as e:
        packages.pinned_package("gritlm", "1.0.2")
    assert str(e.value) == (
        "the reference package gritlm is 1.0.1 here, the reference is pinned to 1.0.2 "
        "(pip install --no-deps gritlm==1.0.2)"
    )


def _hf_runner(model_dir):
    from harness.runners import LoadRequest
    from harness.runners.hf import HFRunner

    runner = HFRunner(None)
    runner.req = LoadRequest(model_dir=str(model_dir), dtype="float32", device="cpu")
    return runner


def test_only_a_recipe_that_takes_an_instruction_is_given_one(gritlm_dir):
    with pytest.raises(ValueError, match="does not implement instruction"):
        _hf_runner(gritlm_dir).run(
            "embed", TEXTS, req(reference="st-embed", instruction=INSTRUCTION)
        )


def test_an_instruction_is_refused_where_it_means_nothing():
    from pydantic import ValidationError

    from tests.unit.test_compare import make_case

    assert make_case(instruction=INSTRUCTION).request.instruction == INSTRUCTION
    with pytest.raises(ValidationError, match="instruction applies to task 'embed'"):
        make_case(task="classify", instruction=INSTRUCTION)
    with pytest.raises(ValidationError, match="instruction applies to task 'embed'"):
        make_case(instruction=INSTRUCTION, prompt_name="query")


def _independent(model_dir, causal: bool) -> np.ndarray:
    """transformers' MistralModel with the config's is_causal (its own bidirectional mask, not
    GritLM's forward argument), one text at a time; mean and L2 norm in numpy (float64) over
    the tokens after the instruction's (BOS included in the instruction)."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, MistralModel

    cfg = AutoConfig.from_pretrained(model_dir)
    cfg.is_causal = causal
    model = MistralModel.from_pretrained(model_dir, config=cfg, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    n = len(tok(INSTRUCTION)["input_ids"])
    out = []
    for text in TEXTS:
        ids = torch.tensor([tok(INSTRUCTION + text)["input_ids"]])
        with torch.no_grad():
            h = model(input_ids=ids).last_hidden_state[0].numpy().astype(np.float64)
        v = h[n:].mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.stack(out)


def test_the_gritlm_reference_is_a_bidirectional_mean_without_the_instruction(gritlm_dir):
    from harness.engine.env import no_deps_pin

    pin = no_deps_pin("gritlm")
    try:
        have = importlib.metadata.version("gritlm")
    except importlib.metadata.PackageNotFoundError:
        have = None
    if have != pin:
        pytest.skip(
            f"gritlm=={pin} is not installed in this environment ({have}): "
            "python -m harness.engine.env ensure installs it"
        )
    runner = _hf_runner(gritlm_dir)
    got = np.stack(
        runner.run("embed", TEXTS, req(reference="gritlm-embed", instruction=INSTRUCTION)).outputs
    )
    bidirectional = _independent(gritlm_dir, causal=False)
    causal = _independent(gritlm_dir, causal=True)
    assert np.abs(got - bidirectional).max() < 1e-6
    # what the mutations do is far outside that: causal attention, or the instruction averaged in
    assert np.abs(got - causal).max() > 1e-2
    with_instruction = np.stack(
        runner.run("embed", [INSTRUCTION + t for t in TEXTS], req(reference="gritlm-embed")).outputs
    )
    assert np.abs(got - with_instruction).max() > 1e-2
    # the ids the reference ran: its tokenizer over instruction + text, <s> first
    assert all(ids[0] == 1 and len(ids) > 20 for ids in runner.tokens[: len(TEXTS)])
