"""Mean pooling's segment runs one token past the prompt's end, into the next prompt."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.seqwise.methods"
FILES = ["vllm/model_executor/layers/pooler/seqwise/methods.py"]
CASES = ["*mean*"]  # MeanPool serves the mean-pooled embedders only


def apply(module):
    original = module.MeanPool.forward

    def forward(self, hidden_states, pooling_metadata):
        out = original(self, hidden_states, pooling_metadata)
        cursor = pooling_metadata.get_pooling_cursor()
        lens = cursor.prompt_lens_cpu.to(out).unsqueeze(1)
        nxt = cursor.last_token_indices_gpu + 1
        has_next = nxt < hidden_states.shape[0]
        extra = hidden_states[nxt.clamp(max=hidden_states.shape[0] - 1)].to(out)
        overrun = (out * lens + extra) / (lens + 1)
        return out.where(~has_next.unsqueeze(1), overrun)

    module.MeanPool.forward = forward
