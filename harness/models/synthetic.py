"""Synthetic tiny checkpoints, deterministic across runs and library releases.

Weights are drawn from a numpy generator seeded by (spec seed, parameter name), never from
torch's init code, so a new torch or transformers does not change them. Tokenizers are built
from a vocabulary shipped in harness/data (no training: WordPiece training is not deterministic).

Run as `python -m harness.models.synthetic '<SyntheticModel JSON>'` to build one into the cache.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from harness.matrix.paths import cache_root
from harness.matrix.schema import SyntheticModel
from harness.models.cache import fingerprint

# bump when a builder's output changes for the same spec
BUILDER_VERSION = 2
DATA = Path(__file__).parent.parent / "data"


@dataclass(frozen=True)
class ArchFamily:
    model_type: str
    config: dict  # tiny defaults; a spec's `config:` overrides them
    tokenizer: Callable[..., None]  # (out_dir, config, **spec.tokenizer options)
    archs: tuple[str, ...] = field(default_factory=tuple)
    # arch -> the transformers class that builds it, where the names differ (ColBERTLfm2Model)
    hf_class: dict[str, str] = field(default_factory=dict)
    # saved weight-name prefix -> the published checkpoints' prefix (first match wins)
    checkpoint_prefixes: dict[str, str] = field(default_factory=dict)
    # extra files after saving (e.g. a sentence-transformers Dense projection)
    post_build: Callable[[Path, SyntheticModel, object], None] | None = None


def _bert_vocab() -> list[str]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    digits = list("0123456789")
    punct = list(".,!?;:'\"-()+*/=")
    words = []
    for w in (DATA / "words.txt").read_text().split():
        if w not in words and len(w) > 1:
            words.append(w)
    return specials + letters + digits + punct + ["##" + c for c in letters + digits] + words


def _wordpiece_tokenizer(out: Path, config: dict, **options) -> None:
    if options:
        raise ValueError(f"the WordPiece tokenizer takes no options, got {sorted(options)}")
    from transformers import BertTokenizerFast

    vocab = _bert_vocab()
    # a dict vocab: transformers 5 reads `vocab=`, and silently ignores a `vocab_file=` keyword
    tok = BertTokenizerFast(
        vocab={t: i for i, t in enumerate(vocab)},
        do_lower_case=True,
        model_max_length=config["max_position_embeddings"],
    )
    probe = tok.tokenize("the cat sat")
    if "[UNK]" in probe:  # guard: a tokenizer that maps words to [UNK] makes every case weak
        raise RuntimeError(f"synthetic WordPiece tokenizer maps plain words to [UNK]: {probe}")
    tok.save_pretrained(out)


_QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"]


def _bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 / Qwen byte-to-unicode table of byte-level BPE."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _add_merge_chain(
    symbols: list[str], vocab: dict[str, int], merges: list[tuple[str, str]]
) -> None:
    """Merge `symbols` left to right into one token, adding each new merge and token once."""
    cur = symbols[0]
    for sym in symbols[1:]:
        nxt = cur + sym
        if nxt not in vocab:
            vocab[nxt] = len(vocab)
            merges.append((cur, sym))
        cur = nxt


def _qwen_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level BPE without training: a merge chain per word (space-prefixed forms first)."""
    b2u = _bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges: list[tuple[str, str]] = []
    words: list[str] = []
    for w in (DATA / "words.txt").read_text().split():
        for form in (w, w.capitalize()):
            if form not in words:
                words.append(form)
    for form in ["\u0120" + w for w in words] + words:
        _add_merge_chain(list(form), vocab, merges)
    for tok in _QWEN_SPECIALS:
        vocab[tok] = len(vocab)
    return vocab, merges


_QWEN_VOCAB_SIZE = len(_qwen_vocab_and_merges()[0])
_QWEN_PAD = _qwen_vocab_and_merges()[0]["<|endoftext|>"]


def _qwen_tokenizer(out: Path, config: dict, append_eos: bool = False) -> None:
    """Like real Qwen tokenizers: no EOS appended, <|endoftext|> is pad and eos.

    `append_eos=True` appends <|endoftext|> to every input: only to reproduce the divergence where
    HF pools the last non-pad token and vLLM the literal last token."""
    from tokenizers import processors
    from transformers import Qwen2Tokenizer

    vocab, merges = _qwen_vocab_and_merges()
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=config["max_position_embeddings"],
        additional_special_tokens=_QWEN_SPECIALS[1:],
    )
    if append_eos:
        eos = _QWEN_SPECIALS[0]
        tok._tokenizer.post_processor = processors.TemplateProcessing(
            single=f"$A:0 {eos}:0", pair=f"$A:0 $B:1 {eos}:1", special_tokens=[(eos, vocab[eos])]
        )
    tok.save_pretrained(out)


_QWEN_BASE = dict(
    vocab_size=_QWEN_VOCAB_SIZE,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=128,
    max_position_embeddings=512,
    initializer_range=0.2,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    pad_token_id=_QWEN_PAD,
    eos_token_id=_QWEN_PAD,
    bos_token_id=None,
)


def _modernbert_config() -> dict:
    v = _bert_vocab()
    return dict(
        vocab_size=len(v),
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
        initializer_range=0.2,
        # full, sliding, full: long-texts (47-92 tokens) exceed the 16-token window, so the
        # sliding layer matters (HF with window 16 vs 4096 differs by 0.11 on long-texts)
        layer_types=["full_attention", "sliding_attention", "full_attention"],
        local_attention=16,
        pad_token_id=v.index("[PAD]"),
        cls_token_id=v.index("[CLS]"),
        sep_token_id=v.index("[SEP]"),
        bos_token_id=v.index("[CLS]"),
        eos_token_id=v.index("[SEP]"),
    )


def _colbert_dense(out: Path, spec: SyntheticModel, config) -> None:
    """ColBERT over a non-BERT backbone: a sentence-transformers Dense projection (1_Dense)
    applied per token, as vLLM's ColBERT models read it; `architectures` names the ColBERT model."""
    from safetensors.numpy import save_file

    dim = 32
    cfg = json.loads((out / "config.json").read_text())
    cfg["architectures"] = [spec.arch]  # save_pretrained wrote the backbone's class name
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    dense = out / "1_Dense"
    dense.mkdir()
    weight = seeded_values(spec.seed, "1_Dense.linear.weight", (dim, config.hidden_size), 0.2)
    save_file({"linear.weight": weight}, str(dense / "model.safetensors"))
    (dense / "config.json").write_text(
        json.dumps(
            {
                "in_features": config.hidden_size,
                "out_features": dim,
                "bias": False,
                "activation_function": "torch.nn.modules.linear.Identity",
                "module_input_name": "token_embeddings",
            },
            indent=2,
            sort_keys=True,
        )
    )
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    (out / "modules.json").write_text(json.dumps(modules, indent=2))
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 512, "do_lower_case": False})
    )


def _lfm2_config() -> dict:
    return dict(
        vocab_size=_QWEN_VOCAB_SIZE,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=192,
        block_multiple_of=32,
        block_auto_adjust_ff_dim=True,
        block_ffn_dim_multiplier=1.0,
        block_dim=64,
        conv_dim=64,
        conv_L_cache=3,
        conv_bias=False,
        layer_types=["conv", "conv"],
        max_position_embeddings=512,
        norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        initializer_range=0.2,
        tie_word_embeddings=False,
        pad_token_id=_QWEN_PAD,
        eos_token_id=_QWEN_PAD,
        bos_token_id=None,
    )


_CLIP_SPECIALS = ("<|startoftext|>", "<|endoftext|>")


def _clip_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """CLIP's BPE without training: bytes, bytes + '</w>', one merge chain per word; the specials
    come LAST so that id 0 is a byte (vLLM uses token id 0 as CLIP's image placeholder)."""
    b2u = _bytes_to_unicode()
    chars = [b2u[b] for b in range(256)]
    vocab = {c: i for i, c in enumerate(chars)}
    for c in chars:
        vocab[c + "</w>"] = len(vocab)
    merges: list[tuple[str, str]] = []
    words: list[str] = []
    for w in (DATA / "words.txt").read_text().lower().split():
        w = "".join(ch for ch in w if ch.isalpha())
        if len(w) > 1 and w not in words:
            words.append(w)
    for w in words:
        _add_merge_chain(list(w[:-1]) + [w[-1] + "</w>"], vocab, merges)
    for tok in _CLIP_SPECIALS:
        vocab[tok] = len(vocab)
    return vocab, merges


def _clip_tokenizer_and_processor(out: Path, config: dict) -> None:
    """CLIP tokenizer plus the PIL image processor (transformers' default CLIP processor needs
    torchvision, which cannot sit beside torch+cpu; vLLM falls back to the same PIL one)."""
    from transformers import CLIPTokenizer
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    vocab, merges = _clip_vocab_and_merges()
    tok = CLIPTokenizer(
        vocab=vocab,
        merges=merges,
        model_max_length=config["text_config"]["max_position_embeddings"],
    )
    if 0 in tok.all_special_ids:
        raise RuntimeError("CLIP tokenizer: id 0 must not be special (vLLM's image placeholder)")
    tok.save_pretrained(out)
    side = config["vision_config"]["image_size"]
    CLIPImageProcessorPil(
        size={"shortest_edge": side}, crop_size={"height": side, "width": side}
    ).save_pretrained(out)


def _clip_config() -> dict:
    vocab, _ = _clip_vocab_and_merges()
    bos, eos = vocab[_CLIP_SPECIALS[0]], vocab[_CLIP_SPECIALS[1]]
    return dict(
        # projection_dim inside both towers too (vLLM reads it there); eos must be the real EOS id,
        # else HF pools position 0 and every text gets the same vector
        text_config=dict(
            vocab_size=len(vocab),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=77,
            hidden_act="quick_gelu",
            projection_dim=64,
            bos_token_id=bos,
            eos_token_id=eos,
            pad_token_id=eos,
        ),
        vision_config=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
            num_channels=3,
            hidden_act="quick_gelu",
            projection_dim=64,
        ),
        projection_dim=64,
        initializer_range=0.2,
    )


# Gemma / PaliGemma: ids 0-5 are fixed by the family (5 is the image token)
_GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<image>"]


def _gemma_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Gemma's byte-fallback BPE without training: the specials, the 256 `<0xNN>` byte tokens, a
    literal "\n" (PaliGemma prompts end in one: vLLM looks it up), "▁" and single characters,
    one merge chain per word (ColPali's prompt words first), then PaliGemma's `<locNNNN>` and
    `<segNNN>` tokens last, as in the real vocabulary."""
    vocab = {t: i for i, t in enumerate(_GEMMA_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    chars = ["\n", "\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    chars += [chr(c) for c in range(ord("A"), ord("Z") + 1)] + list("0123456789.,!?;:'\"-()+*/=")
    for c in chars:
        vocab.setdefault(c, len(vocab))
    merges: list[tuple[str, str]] = []
    words = ["Question", "Describe", "\u2581the", "\u2581image"]
    for w in (DATA / "words.txt").read_text().split():
        for form in ("\u2581" + w, "\u2581" + w.capitalize(), w):
            if form not in words:
                words.append(form)
    for w in words:
        _add_merge_chain(list(w), vocab, merges)
    for i in range(1024):
        vocab[f"<loc{i:04d}>"] = len(vocab)
    for i in range(128):
        vocab[f"<seg{i:03d}>"] = len(vocab)
    return vocab, merges


def _colpali_tokenizer_and_processor(out: Path, config: dict) -> None:
    """Gemma tokenizer + SigLIP's PIL image processor, saved as one ColPaliProcessor."""
    from transformers import ColPaliProcessor, GemmaTokenizer
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    vocab, merges = _gemma_vocab_and_merges()
    tok = GemmaTokenizer(
        vocab=vocab,
        merges=merges,
        model_max_length=512,
        extra_special_tokens={"image_token": "<image>"},
    )
    probe = tok.tokenize("The cat sat quietly.")
    if any(t.startswith("<0x") for t in probe) or tok.convert_tokens_to_ids("<image>") != 5:
        raise RuntimeError(f"synthetic Gemma tokenizer is broken: {probe}")
    vision = config["vlm_config"]["vision_config"]
    side = vision["image_size"]
    seq_len = (side // vision["patch_size"]) ** 2
    images = SiglipImageProcessorPil(size={"height": side, "width": side}, image_seq_length=seq_len)
    ColPaliProcessor(image_processor=images, tokenizer=tok).save_pretrained(out)


def _colpali_config() -> dict:
    vocab, _ = _gemma_vocab_and_merges()
    text = dict(
        model_type="gemma",
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=512,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    vision = dict(
        model_type="siglip_vision_model",
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
        vision_use_head=False,
    )
    vlm = dict(
        model_type="paligemma",
        text_config=text,
        vision_config=vision,
        image_token_index=5,
        projection_dim=64,
        hidden_size=64,
        pad_token_id=0,
    )
    return dict(vlm_config=vlm, embedding_dim=32, initializer_range=0.2)


_QWEN_VL_SPECIALS = [
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]


def _qwen_vl_vocab() -> dict[str, int]:
    vocab, _ = _qwen_vocab_and_merges()
    return {**vocab, **{t: len(vocab) + i for i, t in enumerate(_QWEN_VL_SPECIALS)}}


def _qwen_vl_tokenizer_and_processor(out: Path, config: dict) -> None:
    """Qwen2 byte-level BPE plus the vision specials, and Qwen2-VL's PIL image processor. The
    combined Qwen2VLProcessor cannot be built without torchvision (its video processor), so its
    parts are saved with a processor_config.json naming the class."""
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    vocab, merges = _qwen_vl_vocab(), _qwen_vocab_and_merges()[1]
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=config["text_config"]["max_position_embeddings"],
        additional_special_tokens=_QWEN_SPECIALS[1:] + _QWEN_VL_SPECIALS,
    )
    if tok.convert_tokens_to_ids("<|image_pad|>") != config["image_token_id"]:
        raise RuntimeError(
            "synthetic Qwen2-VL tokenizer: <|image_pad|> id differs from the config's"
        )
    tok.save_pretrained(out)
    vision = config["vision_config"]
    side = (
        vision["patch_size"] * vision["spatial_merge_size"] * 2
    )  # 64x64 images -> 56x56 -> 4 tokens
    Qwen2VLImageProcessorPil(
        min_pixels=side * side,
        max_pixels=4 * side * side,
        patch_size=vision["patch_size"],
        temporal_patch_size=vision["temporal_patch_size"],
        merge_size=vision["spatial_merge_size"],
    ).save_pretrained(out)
    (out / "processor_config.json").write_text(
        json.dumps({"processor_class": "Qwen2VLProcessor"}, indent=2)
    )


def _qwen2_vl_config() -> dict:
    vocab = _qwen_vl_vocab()
    text = dict(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [4, 6, 6]},
        bos_token_id=_QWEN_PAD,
        eos_token_id=_QWEN_PAD,
        pad_token_id=_QWEN_PAD,
        tie_word_embeddings=False,
        num_labels=1,
    )
    vision = dict(
        depth=2,
        embed_dim=32,
        hidden_size=64,
        mlp_ratio=2,
        num_heads=2,
        in_channels=3,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
    )
    return dict(
        text_config=text,
        vision_config=vision,
        image_token_id=vocab["<|image_pad|>"],
        video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"],
        vision_end_token_id=vocab["<|vision_end|>"],
        tie_word_embeddings=False,
        initializer_range=0.2,
    )


_XLMR_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # ids 0..4 (the class fixes unk at 3)


def _xlmr_vocab() -> list[tuple[str, float]]:
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


def _xlmr_tokenizer(out: Path, config: dict) -> None:
    from transformers import XLMRobertaTokenizer

    tok = XLMRobertaTokenizer(
        vocab=_xlmr_vocab(), model_max_length=config["max_position_embeddings"]
    )
    probe = tok.tokenize("The cat sat quietly.")
    if "<unk>" in probe:
        raise RuntimeError(f"synthetic XLM-R tokenizer maps words to <unk>: {probe}")
    tok.save_pretrained(out)


def _jina_remote_config(out: Path, spec: SyntheticModel, config) -> None:
    """What vLLM's Jina ColBERT needs: a config class named XLMRobertaFlashConfig (auto_map to a
    configuration file in the checkpoint) with lora_rank and lora_alpha."""
    shutil.copy(
        DATA / "jina" / "configuration_xlm_roberta.py", out / "configuration_xlm_roberta.py"
    )
    cfg = json.loads((out / "config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": "configuration_xlm_roberta.XLMRobertaFlashConfig"}
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


ARCHS: dict[str, ArchFamily] = {
    "xlm-roberta": ArchFamily(
        model_type="xlm-roberta",
        config=dict(
            vocab_size=len(_xlmr_vocab()),
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            hidden_act="gelu",
            max_position_embeddings=128,
            type_vocab_size=1,
            layer_norm_eps=1e-5,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            position_embedding_type="rotary",
            rotary_emb_base=10000.0,
            lora_rank=4,
            lora_alpha=1,
            initializer_range=0.2,
        ),
        tokenizer=_xlmr_tokenizer,
        archs=("ColBERTJinaRobertaModel",),
        post_build=_jina_remote_config,
    ),
    "colpali": ArchFamily(
        model_type="colpali",
        config=_colpali_config(),
        tokenizer=_colpali_tokenizer_and_processor,
        archs=("ColPaliForRetrieval",),
        # transformers 5 saves `vlm.vision_tower.X`; the hub checkpoints (and vLLM) use
        # `vlm.vision_tower.vision_model.X`, and transformers loads both. First match wins, so a
        # name already in the hub layout stays as it is.
        checkpoint_prefixes={
            "vlm.vision_tower.vision_model.": "vlm.vision_tower.vision_model.",
            "vlm.vision_tower.": "vlm.vision_tower.vision_model.",
        },
    ),
    "qwen2-vl": ArchFamily(
        model_type="qwen2_vl",
        config=_qwen2_vl_config(),
        tokenizer=_qwen_vl_tokenizer_and_processor,
        archs=("JinaVLForRanking",),
    ),
    "clip": ArchFamily(
        model_type="clip",
        config=_clip_config(),
        tokenizer=_clip_tokenizer_and_processor,
        archs=("CLIPModel",),
    ),
    "lfm2": ArchFamily(
        model_type="lfm2",
        config=_lfm2_config(),
        tokenizer=_qwen_tokenizer,
        archs=("ColBERTLfm2Model",),
        hf_class={"ColBERTLfm2Model": "Lfm2Model"},
        post_build=_colbert_dense,
    ),
    "modernbert": ArchFamily(
        model_type="modernbert",
        config=_modernbert_config(),
        tokenizer=_wordpiece_tokenizer,
        archs=("ModernBertModel", "ModernBertForSequenceClassification"),
    ),
    "qwen2": ArchFamily(
        model_type="qwen2",
        config=_QWEN_BASE,
        tokenizer=_qwen_tokenizer,
        archs=(
            "Qwen2Model",
            "Qwen2ForSequenceClassification",
            "Qwen2ForRewardModel",
            "Qwen2ForProcessRewardModel",
        ),
    ),
    "qwen3": ArchFamily(
        model_type="qwen3",
        config=dict(_QWEN_BASE, head_dim=32),
        tokenizer=_qwen_tokenizer,
        archs=("Qwen3Model", "Qwen3ForSequenceClassification"),
    ),
    "bert": ArchFamily(
        model_type="bert",
        config=dict(
            vocab_size=len(_bert_vocab()),
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            max_position_embeddings=128,
            type_vocab_size=2,
            initializer_range=0.2,
            hidden_act="gelu",
        ),
        tokenizer=_wordpiece_tokenizer,
        archs=(
            "BertModel",
            "BertForSequenceClassification",
            "BertForTokenClassification",
            "HF_ColBERT",
        ),
    ),
}


def family_of(arch: str) -> ArchFamily:
    for fam in ARCHS.values():
        if arch in fam.archs:
            return fam
    valid = sorted(a for f in ARCHS.values() for a in f.archs)
    raise ValueError(f"unknown synthetic arch {arch!r}; valid: {', '.join(valid)}")


@functools.lru_cache(maxsize=1)
def builder_digest() -> str:
    """What shapes a checkpoint besides its spec: the builder's code (architecture configs,
    tokenizers, post-build steps) and the data files it reads. Editing any of them is a new key,
    so a stale checkpoint is never reused silently."""
    h = hashlib.sha256()
    for path in sorted([Path(__file__), Path(__file__).parent / "refmodels.py", *DATA.rglob("*")]):
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and "mteb" not in path.relative_to(DATA.parent).parts
        ):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def spec_dir(spec: SyntheticModel) -> Path:
    key = json.dumps(
        {
            "v": BUILDER_VERSION,
            "builder": builder_digest(),
            "family": _family_data(spec.arch),
            **spec.model_dump(),
        },
        sort_keys=True,
        default=str,
    )
    return (
        cache_root()
        / "models"
        / f"{spec.arch.lower()}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    )


def _family_data(arch: str) -> dict:
    """The ArchFamily as data (its functions by name), so a change made at run time counts too."""
    try:
        fam = family_of(arch)
    except ValueError:
        return {}
    return (
        {k: getattr(v, "__qualname__", v) for k, v in dataclasses.asdict(fam).items()}
        if dataclasses.is_dataclass(fam)
        else {"repr": repr(fam)}
    )


def seeded_values(seed: int, name: str, shape: tuple[int, ...], std: float) -> np.ndarray:
    """The value of one parameter: a function of (seed, name, shape) only."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    leaf = name.rsplit(".", 1)[-1]
    is_norm = "norm" in name.lower() and leaf == "weight"
    if is_norm:
        return (1.0 + rng.normal(0.0, 0.1, shape)).astype(np.float32)
    if leaf == "bias":
        return rng.normal(0.0, 0.02, shape).astype(np.float32)
    return rng.normal(0.0, std, shape).astype(np.float32)


def build(spec: SyntheticModel, target: Path) -> str:
    """Write the checkpoint atomically into `target`; returns its fingerprint."""
    import torch
    import transformers

    from harness.models.refmodels import REFERENCE_ARCHS, checkpoint_names

    fam = family_of(spec.arch)
    cfg = {**fam.config, **spec.config}
    config = transformers.AutoConfig.for_model(fam.model_type, **cfg)
    config.architectures = [spec.arch]
    torch.manual_seed(0)  # irrelevant to the result: every parameter is overwritten below
    if spec.arch in REFERENCE_ARCHS:
        ref_cls, num_labels = REFERENCE_ARCHS[spec.arch]
        if num_labels is not None:
            config.num_labels = num_labels
        model = ref_cls(config).eval()
    else:
        model = getattr(transformers, fam.hf_class.get(spec.arch, spec.arch))(config).eval()
    std = float(cfg.get("initializer_range", 0.2))
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.from_numpy(seeded_values(spec.seed, name, tuple(param.shape), std)))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        if isinstance(model, transformers.PreTrainedModel):
            model.save_pretrained(tmp, safe_serialization=True)
            if fam.checkpoint_prefixes:
                _rename_saved_weights(tmp / "model.safetensors", fam.checkpoint_prefixes)
        else:  # a harness reference architecture: plain safetensors + config
            from safetensors.torch import save_file

            # index buffers (position_ids, token_type_ids) are not weights: vLLM rejects them
            state = {
                k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("_ids")
            }
            save_file(
                checkpoint_names(type(model), state),
                str(tmp / "model.safetensors"),
                metadata={"format": "pt"},
            )
            config.save_pretrained(tmp)
        if fam.post_build is not None:
            fam.post_build(tmp, spec, config)
        fam.tokenizer(tmp, cfg, **spec.tokenizer)
        if spec.pooling:
            _write_sentence_transformers(
                tmp, spec, config.hidden_size, cfg.get("max_position_embeddings", 512)
            )
        fp = fingerprint(tmp)
        (tmp / "fingerprint.txt").write_text(fp + "\n")
        if target.exists():  # another process won the race; theirs is identical
            shutil.rmtree(tmp)
        else:
            os.rename(tmp, target)
        return fp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _rename_saved_weights(path: Path, prefixes: dict[str, str]) -> None:
    from safetensors.numpy import load_file, save_file

    from harness.models.refmodels import renamed

    save_file(
        {renamed(k, prefixes): v for k, v in load_file(str(path)).items()},
        str(path),
        metadata={"format": "pt"},
    )


def _write_sentence_transformers(out: Path, spec: SyntheticModel, dim: int, max_len: int) -> None:
    """The modules.json layout sentence-transformers and vLLM both read for pooling/normalize."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
    ]
    pooling_dir = out / "1_Pooling"
    pooling_dir.mkdir()
    modes = {
        "mean": "pooling_mode_mean_tokens",
        "cls": "pooling_mode_cls_token",
        "lasttoken": "pooling_mode_lasttoken",
    }
    pooling_cfg = {
        "word_embedding_dimension": dim,
        **{v: k == spec.pooling for k, v in modes.items()},
    }
    (pooling_dir / "config.json").write_text(json.dumps(pooling_cfg, indent=2, sort_keys=True))
    modules.append(
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
    )
    if spec.normalize:
        (out / "2_Normalize").mkdir()
        modules.append(
            {
                "idx": 2,
                "name": "2",
                "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize",
            }
        )
    (out / "modules.json").write_text(json.dumps(modules, indent=2))
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_len, "do_lower_case": False}, indent=2)
    )


def main(argv: list[str]) -> int:
    spec = SyntheticModel.model_validate_json(argv[0])
    target = spec_dir(spec)
    fp = build(spec, target) if not (target / "fingerprint.txt").exists() else None
    print(
        json.dumps(
            {
                "path": str(target),
                "fingerprint": fp or (target / "fingerprint.txt").read_text().strip(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
