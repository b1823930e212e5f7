"""XLM-RoBERTa backbones (Unigram tokenizer): the absolute-position encoder (XLMRobertaModel,
XLMRobertaForSequenceClassification: multilingual-e5, bge-reranker-v2-m3; its config shared
with bge_m3.py) and Jina ColBERT (rotary, the checkpoint's remote config class)."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.matrix.schema import SyntheticModel
from harness.models.synthetic import DATA, ArchFamily, register, update_config_json

_XLMR_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # ids 0..4 (the class fixes unk at 3)


def xlmr_vocab() -> list[tuple[str, float]]:
    """A Unigram (SentencePiece-style) vocabulary without training: letters, digits and
    punctuation with and without the word-start mark, then whole words, scored so words win."""
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [
        chr(c) for c in range(ord("A"), ord("Z") + 1)
    ]
    chars += list("0123456789") + list(".,!?;:'\"-()+*/=")
    words: list[str] = []
    for w in (DATA / "words.txt").read_text().split():
        for form in (w, w.capitalize()):
            if len(form) > 1 and form not in words:
                words.append(form)
    pieces = [(t, 0.0) for t in _XLMR_SPECIALS] + [("\u2581", -8.0)]
    pieces += [("\u2581" + c, -9.0) for c in chars] + [(c, -10.0) for c in chars]
    pieces += [("\u2581" + w, -5.0) for w in words] + [(w, -6.0) for w in words]
    seen: set[str] = set()
    return [p for p in pieces if not (p[0] in seen or seen.add(p[0]))]


def xlmr_tokenizer(out: Path, config: dict) -> None:
    from transformers import XLMRobertaTokenizer

    tok = XLMRobertaTokenizer(
        vocab=xlmr_vocab(), model_max_length=config["max_position_embeddings"]
    )
    probe = tok.tokenize("The cat sat quietly.")
    if "<unk>" in probe:
        raise RuntimeError(f"synthetic XLM-R tokenizer maps words to <unk>: {probe}")
    tok.save_pretrained(out)


def xlmr_offset_tokenizer(out: Path, config: dict) -> None:
    """The Unigram XLM-R tokenizer, 2 positions shorter than the model: RoBERTa's positions run
    from pad_token_id + 1, so a full-length input needs max_position_embeddings = length + 2."""
    xlmr_tokenizer(
        out, {**config, "max_position_embeddings": config["max_position_embeddings"] - 2}
    )


# the absolute-position XLM-RoBERTa of transformers (pad id 1: positions start at 2), tiny
XLMR_ABSOLUTE = dict(
    vocab_size=len(xlmr_vocab()),
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=128,
    hidden_act="gelu",
    max_position_embeddings=130,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    initializer_range=0.2,
)


def _jina_remote_config(out: Path, spec: SyntheticModel, config) -> None:
    """What vLLM's Jina ColBERT needs: a config class named XLMRobertaFlashConfig (auto_map to a
    configuration file in the checkpoint) with lora_rank and lora_alpha."""
    shutil.copy(
        DATA / "jina" / "configuration_xlm_roberta.py", out / "configuration_xlm_roberta.py"
    )
    auto_map = {"AutoConfig": "configuration_xlm_roberta.XLMRobertaFlashConfig"}
    update_config_json(out, {"auto_map": auto_map})


register(
    "xlm-roberta",
    ArchFamily(
        model_type="xlm-roberta",
        # the same tiny XLM-R, rotary (positions from 0: no pad offset) with Jina's LoRA keys
        config={
            **XLMR_ABSOLUTE,
            "max_position_embeddings": 128,
            "position_embedding_type": "rotary",
            "rotary_emb_base": 10000.0,
            "lora_rank": 4,
            "lora_alpha": 1,
        },
        tokenizer=xlmr_tokenizer,
        archs=("ColBERTJinaRobertaModel",),
        post_build=_jina_remote_config,
    ),
)


# multilingual-e5 (XLMRobertaModel, mean pooling) and bge-reranker-v2-m3 (a one-label
# XLMRobertaForSequenceClassification cross-encoder), as transformers builds them.
# position_embedding_type is written as the published config.json files have it (saved by
# transformers 4; transformers 5's XLMRobertaConfig no longer declares it): vLLM 0.32 reads it
# unguarded for an XLMRobertaModel (models/config.py, JinaRobertaModelConfig) and fails the load
# with "XLMRobertaConfig object has no attribute position_embedding_type" without it (measured).
register(
    "xlm-roberta-absolute",
    ArchFamily(
        model_type="xlm-roberta",
        config={**XLMR_ABSOLUTE, "position_embedding_type": "absolute"},
        tokenizer=xlmr_offset_tokenizer,
        archs=("XLMRobertaModel", "XLMRobertaForSequenceClassification"),
    ),
)
