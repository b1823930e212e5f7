"""Cross-encoder token_type_ids are truncated from the other side than the tokens they belong to."""

# replays vllm#47772 (token types went wrong after left truncation): the query/document
# boundary the ids carry is misplaced once a pair is cut
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = "vllm#47772"
MODULE = "vllm.entrypoints.pooling.scoring.io_processor"
FILES = ["vllm/entrypoints/pooling/scoring/io_processor.py"]
CASES = ["*cross-encoder*truncated*"]


def apply(module):
    original = module._apply_post_tokenization_to_token_type_ids

    def _apply_post_tokenization_to_token_type_ids(tokenizer, tok_params, token_type_ids):
        kept = original(tokenizer, tok_params, token_type_ids)
        if 0 < len(kept) < len(token_type_ids):
            n = len(kept)
            wrong = token_type_ids[-n:] if kept == token_type_ids[:n] else token_type_ids[:n]
            return list(wrong)
        return kept

    module._apply_post_tokenization_to_token_type_ids = _apply_post_tokenization_to_token_type_ids
