"""Step pooling (process reward models) puts two entries in its output for a request whose
prefill is not finished: the outputs no longer line up with the requests of the step."""

# replays vllm#41049 ("Fix redundant None append in StepPool.forward for chunked prefill",
# 2026-04-27): None was appended twice for an unfinished chunk, "the pooling output becomes
# misaligned with the batch requests". On 0.32 the token head checks the output count against
# the requests, so the replayed mechanism surfaces as that error on the row's chunked step.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "chunked-prefill/prefix-cache state"
REPLAYS = "vllm#41049"
MODULE = "vllm.model_executor.layers.pooler.tokwise.methods"
FILES = ["vllm/model_executor/layers/pooler/tokwise/methods.py"]
CASES = ["*prm*"]


def apply(module):
    original = module.StepPool.forward

    def forward(self, hidden_states, pooling_metadata):
        pooled = []
        for data in original(self, hidden_states, pooling_metadata):
            pooled.append(data)
            if data is None:  # the unfinished request's entry, appended a second time
                pooled.append(None)
        return pooled

    module.StepPool.forward = forward
