"""Last-token pooling of a chunked prompt returns state kept from its first chunk, not its last."""

# single-process analogue of vllm#56666 (later chunks read stale num_computed_tokens and the
# pooling post-step was skipped on non-final pipeline ranks): state carried across steps
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "chunked-prefill/prefix-cache state"
REPLAYS = "vllm#56666"
MODULE = "vllm.model_executor.layers.pooler.seqwise.methods"
FILES = ["vllm/model_executor/layers/pooler/seqwise/methods.py"]
CASES = ["qwen3-tiny-lasttoken-embed"]


def apply(module):
    original = module.LastPool.forward

    def forward(self, hidden_states, pooling_metadata):
        out = original(self, hidden_states, pooling_metadata)
        finished = pooling_metadata.get_pooling_cursor().get_finished_mask()
        for i, (state, done) in enumerate(zip(pooling_metadata.pooling_states, finished)):
            kept = getattr(state, "_parity_first_chunk", None)
            if not done and kept is None:
                state._parity_first_chunk = out[i].clone()
            elif done and kept is not None:
                out[i] = kept
                del state._parity_first_chunk
        return out

    module.LastPool.forward = forward
