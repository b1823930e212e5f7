"""Token pooling of a chunked prompt reads earlier chunks from a buffer the next step overwrote."""

# single-process analogue of vllm#48214 (pooling input buffers raced across chunked-prefill
# steps): the cached chunk aliases the step's hidden-states buffer instead of owning a copy
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "chunked-prefill/prefix-cache state"
REPLAYS = "vllm#48214"
MODULE = "vllm.model_executor.layers.pooler.tokwise.methods"
FILES = ["vllm/model_executor/layers/pooler/tokwise/methods.py"]
CASES = ["qwen2-tiny-prm-step-reward", "qwen2-tiny-reward*"]


def apply(module):
    original = module.AllPool.forward

    def forward(self, hidden_states, pooling_metadata):
        if self.enable_chunked_prefill:
            # what a shared buffer would hold now: this step's hidden states at the same offsets
            for state in pooling_metadata.pooling_states:
                for chunk in state.hidden_states_cache:
                    n = min(chunk.shape[0], hidden_states.shape[0])
                    chunk[:n].copy_(hidden_states[:n])
        return original(self, hidden_states, pooling_metadata)

    module.AllPool.forward = forward
