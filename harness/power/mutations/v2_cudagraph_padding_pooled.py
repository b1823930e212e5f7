"""Model Runner V2 pools the CUDA-graph padding tokens with the batch's real tokens."""

# only a GPU pads a batch to a captured graph size: on CPU num_tokens_after_padding == num_tokens
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = None
MODULE = "vllm.v1.worker.gpu.pool.pooling_runner"
FILES = ["vllm/v1/worker/gpu/pool/pooling_runner.py"]
NEEDS = "gpu"


def apply(module):
    original = module.PoolingRunner.pool

    def pool(self, hidden_states, input_batch, req_states):
        real = input_batch.num_tokens
        input_batch.num_tokens = input_batch.num_tokens_after_padding
        try:
            return original(self, hidden_states, input_batch, req_states)
        finally:
            input_batch.num_tokens = real

    module.PoolingRunner.pool = pool
