"""Prefix caching is on by default for encoder-only pooling models, as a forced
`--enable-prefix-caching` leaves it: the engine reaches the KV-cache coordinator with no cacheable
group and asserts at start (HybridKVCacheCoordinator), with no message naming the flag."""

# replays vllm#55049, a live 0.32 bug on the forced flag (recorded in matrices/real-bugs.yaml:
# *-prefix-caching-forced). 0.32 keeps the default right (is_prefix_caching_supported answers
# False for encoder_only pooling); arg_utils only warns when the flag forces it on, and nothing
# between the flag and get_kv_cache_coordinator refuses it. Replayed by answering True for
# encoder-only models, which leaves exactly the forced flag's path under the rows without it.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "engine start"
REPLAYS = "vllm#55049"
MODULE = "vllm.config.model"
FILES = ["vllm/config/model.py"]
# an encoder embedding model, a BERT cross-encoder and ModernBERT: every encoder-only layout
CASES = ["bert-tiny-mean-embed", "bert-tiny-cross-encoder-score", "modernbert-tiny-mean-embed-long"]


def apply(module):
    cls = module.ModelConfig
    original = cls.is_prefix_caching_supported.fget

    def is_prefix_caching_supported(self):
        if self.pooler_config is not None and self.attn_type == "encoder_only":
            return True
        return original(self)

    cls.is_prefix_caching_supported = property(is_prefix_caching_supported)
