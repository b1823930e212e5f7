"""Synthetic backbones: one builder module per family, found (not listed) by the core; every
builder module is part of the cache key."""

from __future__ import annotations

import sys
import textwrap

import pytest

from harness.matrix.schema import SyntheticModel
from harness.models import synthetic

SPEC = SyntheticModel(source="synthetic", arch="BertModel", seed=3, pooling="mean", normalize=True)

# the families and architectures of harness/models/synthetic.py's ARCHS before the split
BEFORE = {
    "bert": {"BertModel", "BertForSequenceClassification", "BertForTokenClassification"}
    | {"HF_ColBERT"},
    "qwen2": {"Qwen2Model", "Qwen2ForSequenceClassification", "Qwen2ForRewardModel"}
    | {"Qwen2ForProcessRewardModel"},
    "qwen3": {"Qwen3Model", "Qwen3ForSequenceClassification"},
    "modernbert": {"ModernBertModel", "ModernBertForSequenceClassification"},
    "lfm2": {"ColBERTLfm2Model"},
    "clip": {"CLIPModel"},
    "colpali": {"ColPaliForRetrieval"},
    "qwen2-vl": {"JinaVLForRanking"},
    "xlm-roberta": {"ColBERTJinaRobertaModel"},
}
# added after the split: BGE-M3's own family, SPLADE's masked-LM BERT, the LLM rerankers, SigLIP
ADDED = {
    "bge-m3": {"BgeM3EmbeddingModel"},
    "bert": {"BertForMaskedLM"},
    "qwen3": {"Qwen3ForCausalLM"},  # Qwen3-Reranker's yes/no-logit causal LM
    "qwen2": {"Qwen2ForCausalLM"},  # mxbai-rerank-v2's 0/1-logit causal LM
    "siglip": {"SiglipModel"},
    "qwen2-vl": {"Qwen2VLForConditionalGeneration"},  # DSE / GME last-token embedders
    # standalone XLM-R: multilingual-e5 embeddings, bge-reranker-v2-m3 cross-encoder
    "xlm-roberta-absolute": {"XLMRobertaModel", "XLMRobertaForSequenceClassification"},
    "gemma": {"GemmaForCausalLM"},  # bge-reranker-v2-gemma's "Yes"-logit causal LM
    "nomic_bert": {"NomicBertModel"},  # rotary encoders (vLLM bert_with_rope)
    "gte": {"GteModel"},
    # ColQwen3; Qwen3-VL-Reranker's causal VLM; a Qwen3-VL sequence classifier
    "qwen3-vl": {"ColQwen3", "Qwen3VLForConditionalGeneration", "Qwen3VLForSequenceClassification"},
    "gritlm": {"GritLM"},  # a Mistral under vLLM 0.28's GritLM architecture name
    "gemma3-text": {"Gemma3TextModel"},  # EmbeddingGemma: bidirectional Gemma 3, sliding window
}
NOW = {k: BEFORE.get(k, set()) | ADDED.get(k, set()) for k in {*BEFORE, *ADDED}}


def test_every_family_is_found():
    assert {name: set(f.archs) for name, f in synthetic.ARCHS.items()} == NOW


def test_a_new_builder_module_is_found_without_editing_a_list(tmp_path, monkeypatch):
    (tmp_path / "tinybert.py").write_text(
        textwrap.dedent(
            """
            from harness.models.synthetic import ARCHS, ArchFamily, register

            bert = ARCHS["bert"]
            register(
                "tinybert",
                ArchFamily(
                    model_type="bert",
                    config={**bert.config, "num_hidden_layers": 1},
                    tokenizer=bert.tokenizer,
                    archs=("TinyBertForSequenceClassification",),
                    hf_class={"TinyBertForSequenceClassification": "BertForSequenceClassification"},
                ),
            )
            """
        )
    )
    synthetic.ARCHS  # the shipped families first: the new module reads one
    monkeypatch.setattr(synthetic, "__path__", [*synthetic.__path__, str(tmp_path)])
    monkeypatch.setattr(synthetic.discover, "done", False)
    try:
        fam = synthetic.family_of("TinyBertForSequenceClassification")
        assert fam.config["num_hidden_layers"] == 1 and "tinybert" in synthetic.ARCHS
    finally:
        synthetic.ARCHS.pop("tinybert", None)
        sys.modules.pop("harness.models.synthetic.tinybert", None)


def test_an_architecture_belongs_to_one_family():
    bert = synthetic.ARCHS["bert"]
    with pytest.raises(
        ValueError, match=r"'BertModel', 'HF_ColBERT'\] already belong to \['bert'\]"
    ):
        synthetic.register("bert-again", bert)
    assert "bert-again" not in synthetic.ARCHS


def test_every_builder_module_is_in_the_cache_key(tmp_path, monkeypatch):
    """Editing any builder module (here the CLIP one) is a new key for every checkpoint."""
    import shutil
    from pathlib import Path

    real = Path(synthetic.__file__).parent
    copy = tmp_path / "harness" / "models" / "synthetic"
    shutil.copytree(real, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(real.parent / "refmodels.py", copy.parent / "refmodels.py")
    shutil.copytree(synthetic.DATA, tmp_path / "harness" / "data")
    monkeypatch.setattr(synthetic, "__file__", str(copy / "__init__.py"))
    monkeypatch.setattr(synthetic, "DATA", tmp_path / "harness" / "data")
    synthetic.builder_digest.cache_clear()
    try:
        before = synthetic.spec_dir(SPEC)
        clip = copy / "clip.py"
        clip.write_text(clip.read_text() + "\n# an edit\n")
        synthetic.builder_digest.cache_clear()
        assert synthetic.spec_dir(SPEC) != before
    finally:
        monkeypatch.undo()
        synthetic.builder_digest.cache_clear()
