"""ModernBERT (WordPiece tokenizer, sliding-window attention): embedding and classification."""

from __future__ import annotations

from harness.models.synthetic import ArchFamily, register
from harness.models.synthetic.bert import bert_vocab, wordpiece_tokenizer


def _modernbert_config() -> dict:
    v = bert_vocab()
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


register(
    "modernbert",
    ArchFamily(
        model_type="modernbert",
        config=_modernbert_config(),
        tokenizer=wordpiece_tokenizer,
        archs=("ModernBertModel", "ModernBertForSequenceClassification"),
    ),
)
