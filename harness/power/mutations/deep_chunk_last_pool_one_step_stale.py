"""A prompt prefilled over 4 or more chunks is pooled from the chunk before its last."""

# the shape of vllm#48214 (pooling buffers carried across chunked-prefill steps), in a place only
# deep chunking reaches: prompts in one or two chunks (the base run, chunked_prefill's 16-token
# steps over short texts) pool correctly
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "chunked-prefill/prefix-cache state"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.seqwise.methods"
FILES = ["vllm/model_executor/layers/pooler/seqwise/methods.py"]
CASES = ["qwen3-tiny-lasttoken-embed-mixed"]
MATRIX = "matrices/extended.yaml"  # its checks are too slow for the default matrix

DEEP = 4  # chunks


def apply(module):
    original = module.LastPool.forward

    def forward(self, hidden_states, pooling_metadata):
        out = original(self, hidden_states, pooling_metadata)
        finished = pooling_metadata.get_pooling_cursor().get_finished_mask()
        for i, (state, done) in enumerate(zip(pooling_metadata.pooling_states, finished)):
            chunks = getattr(state, "_parity_chunks", 0) + 1
            if done:
                kept = getattr(state, "_parity_previous", None)
                if chunks >= DEEP and kept is not None:
                    out[i] = kept  # the state of the step before: one chunk stale
                for name in ("_parity_chunks", "_parity_previous"):
                    if hasattr(state, name):
                        delattr(state, name)
            else:
                state._parity_chunks = chunks
                state._parity_previous = out[i].clone()
        return out

    module.LastPool.forward = forward
