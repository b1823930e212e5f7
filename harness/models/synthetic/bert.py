"""BERT (WordPiece tokenizer): BertModel, its classification heads and HF_ColBERT."""

from __future__ import annotations

from pathlib import Path

from harness.models.synthetic import DATA, ArchFamily, register


def bert_vocab() -> list[str]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    digits = list("0123456789")
    punct = list(".,!?;:'\"-()+*/=")
    words = []
    for w in (DATA / "words.txt").read_text().split():
        if w not in words and len(w) > 1:
            words.append(w)
    return specials + letters + digits + punct + ["##" + c for c in letters + digits] + words


def wordpiece_tokenizer(out: Path, config: dict, **options) -> None:
    if options:
        raise ValueError(f"the WordPiece tokenizer takes no options, got {sorted(options)}")
    from transformers import BertTokenizerFast

    vocab = bert_vocab()
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


register(
    "bert",
    ArchFamily(
        model_type="bert",
        config=dict(
            vocab_size=len(bert_vocab()),
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            max_position_embeddings=128,
            type_vocab_size=2,
            initializer_range=0.2,
            hidden_act="gelu",
        ),
        tokenizer=wordpiece_tokenizer,
        archs=(
            "BertModel",
            "BertForSequenceClassification",
            "BertForTokenClassification",
            "HF_ColBERT",
            "BertForMaskedLM",  # SPLADE: vLLM runs it as BertSpladeSparseEmbeddingModel
        ),
    ),
)
