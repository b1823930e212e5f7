"""The HF reference's recipe registry: recipe modules are found, not listed, and declare their
own defaults; the parent process can read the registry without torch or transformers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import harness.runners.hf as hf

ROOT = Path(__file__).resolve().parents[2]

# what the central tables of harness/runners/hf.py said before the recipes moved into modules
# (main e908c13): the split must not change a name, a version or a default
BEFORE = {
    "versions": {
        "st-embed": 1,
        "st-cross-encoder": 1,
        "hf-sequence-classification": 1,
        "hf-token-classification": 1,
        "reference-token-reward": 1,
        "reference-step-reward": 1,
        "colbert-token-embed": 1,
        "colbert-maxsim": 1,
        "clip-embed": 1,
        "colpali-token-embed": 1,
        "colpali-maxsim": 1,
        "jina-vl-rerank": 1,
    },
    "by_task": {
        "embed": "st-embed",
        "classify": "hf-sequence-classification",
        "score": "st-cross-encoder",
        "token_classify": "hf-token-classification",
        "reward": "reference-token-reward",
        "step_reward": "reference-step-reward",
        "token_embed": "colbert-token-embed",
    },
    "by_arch": {
        ("CLIPModel", "embed"): "clip-embed",
        ("ColPaliForRetrieval", "token_embed"): "colpali-token-embed",
        ("ColPaliForRetrieval", "score"): "colpali-maxsim",
        ("JinaVLForRanking", "score"): "jina-vl-rerank",
    },
}


# recipes added after the split (each a module of its own)
ADDED = {
    "bge-m3-dense": 1,
    "bge-m3-sparse": 1,
    "bge-m3-colbert": 1,
    "bge-m3-dense-and-sparse": 1,
    "splade-max": 1,
    "yes-no-reranker": 1,
    "mxbai-rerank-v2": 1,
    "siglip-embed": 1,
    "qwen2-vl-last-embed": 1,
    "hf-masked-lm": 1,  # per-token vocabulary softmax of an MLM head
    "flag-llm-reranker": 1,  # bge-reranker-v2-gemma (FlagEmbedding FlagLLMReranker)
    "hf-multi-label-classification": 1,
    "st-embed-chunked": 1,
    "st-embed-cosine": 1,  # /score on an embedding model: cosine of two encodings
    "hf-sequence-classification-fp32-head": 1,  # vLLM's default float32 head, from transformers
    "hf-token-classification-fp32-head": 1,
    "gme-qwen2-vl-embed": 1,  # GME card code (gme_inference.py), positions card or mrope
    "pylate-colbert-token-embed": 1,  # ColBERT markers and query expansion (pylate's tokenize)
    "pylate-colbert-maxsim": 1,
    "colqwen3-token-embed": 1,  # colpali-engine's ColQwen3
    "colqwen3-maxsim": 1,
    "gritlm-embed": 1,  # the gritlm package's GritLM.encode(instruction=...)
    "qwen3-vl-reranker": 1,  # Qwen3-VL-Reranker's published scoring code
    "qwen3-vl-sequence-classification": 1,  # Qwen3VLModel + the checkpoint's score head
    # a decoder seq classifier read as a PRM: its score head per token at the step tags
    "hf-sequence-classification-step-reward": 1,
}
# the defaults they claim (for their own architecture only)
ADDED_BY_ARCH = {
    ("SiglipModel", "embed"): "siglip-embed",
    ("Qwen2VLForConditionalGeneration", "embed"): "qwen2-vl-last-embed",
    ("ColQwen3", "token_embed"): "colqwen3-token-embed",
    ("ColQwen3", "score"): "colqwen3-maxsim",
    ("GritLM", "embed"): "gritlm-embed",
    ("Qwen3VLForConditionalGeneration", "score"): "qwen3-vl-reranker",
    ("Qwen3VLForSequenceClassification", "classify"): "qwen3-vl-sequence-classification",
}


def test_the_split_kept_every_recipe_version_and_default():
    assert hf.RECIPE_VERSIONS == {**BEFORE["versions"], **ADDED}
    assert set(hf.RECIPES) == set(BEFORE["versions"]) | set(ADDED)
    assert hf.DEFAULT_RECIPE == BEFORE["by_task"]
    assert hf.DEFAULT_RECIPE_BY_ARCH == {**BEFORE["by_arch"], **ADDED_BY_ARCH}
    assert hf.resolve_recipe("score", "ColPaliForRetrieval", None) == "colpali-maxsim"
    assert hf.resolve_recipe("score", "BertForSequenceClassification", None) == "st-cross-encoder"
    assert hf.resolve_recipe("score", "JinaVLForRanking", "colbert-maxsim") == "colbert-maxsim"


def test_a_new_recipe_module_is_found_without_editing_a_list(tmp_path, monkeypatch):
    (tmp_path / "newfamily.py").write_text(
        textwrap.dedent(
            """
            from harness.runners.hf import recipe

            @recipe("newfamily-embed", version=3, default_for=[("NewFamilyModel", "embed")])
            def _embed(runner, items, options):
                return []
            """
        )
    )
    monkeypatch.setattr(hf, "__path__", [*hf.__path__, str(tmp_path)])
    monkeypatch.setattr(hf.discover, "done", False)
    monkeypatch.delitem(sys.modules, "harness.runners.hf.newfamily", raising=False)
    try:
        assert hf.RECIPE_VERSIONS["newfamily-embed"] == 3
        assert hf.resolve_recipe("embed", "NewFamilyModel", None) == "newfamily-embed"
        assert hf.resolve_recipe("embed", "BertModel", None) == "st-embed"
    finally:
        for table in hf.LAZY.values():
            for key in [k for k, v in table.items() if "newfamily" in str(k) + str(v)]:
                del table[key]
        sys.modules.pop("harness.runners.hf.newfamily", None)


def test_two_recipes_cannot_claim_one_default_or_one_name():
    hf.discover()
    with pytest.raises(ValueError, match=r"claims the default for \('CLIPModel', 'embed'\)"):
        hf.recipe("other-clip", default_for=[("CLIPModel", "embed")])(lambda r, i, o: [])
    with pytest.raises(ValueError, match="claims the default for 'embed'.*'st-embed'"):
        hf.recipe("other-embed", default_for=["embed"])(lambda r, i, o: [])
    with pytest.raises(ValueError, match="recipe 'st-embed' is already registered by"):
        hf.recipe("st-embed")(lambda r, i, o: [])
    assert "other-clip" not in hf.RECIPES and "other-embed" not in hf.RECIPES


def test_reading_the_registry_imports_neither_torch_nor_transformers():
    """The parent process validates matrices with the registry: a recipe module imports its heavy
    libraries inside its functions."""
    code = (
        "import sys, json; import harness.runners.hf as h; n = len(h.RECIPES); "
        "print(json.dumps([n, sorted(m for m in ('torch', 'transformers', "
        "'sentence_transformers', 'vllm') if m in sys.modules)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    n, heavy = json.loads(out.stdout)
    assert n == len(BEFORE["versions"]) + len(ADDED) and heavy == []


def test_a_fresh_worker_runs_a_recipe_the_case_names():
    """A worker's first call may name its recipe (`reference:`): the registry is discovered for it
    too, not only when a default is looked up."""
    code = (
        "import harness.runners.hf as h\n"
        "def reached(self):\n"
        "    raise RuntimeError('st-embed reached')\n"
        "h.HFRunner.sentence_transformer = reached\n"
        "from harness.matrix.request import Request\n"
        "try:\n"
        "    h.HFRunner(None).run('embed', ['a text'], Request(reference='st-embed'))\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == "st-embed reached", out.stderr[-2000:]
