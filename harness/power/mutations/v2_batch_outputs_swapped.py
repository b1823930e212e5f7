"""Model Runner V2 hands the first two finished requests of a batch each other's outputs."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = None
MODULE = "vllm.v1.worker.gpu.pool.pooling_runner"
FILES = ["vllm/v1/worker/gpu/pool/pooling_runner.py"]
CASES = ["bert-tiny-mean-embed", "qwen3-tiny-lasttoken-embed", "serve-bert-tiny-mean-embed"]


def apply(module):
    original = module.PoolingRunner.pool

    def pool(self, *args, **kwargs):
        output, finished = original(self, *args, **kwargs)
        done = [i for i, f in enumerate(finished) if f]
        if isinstance(output, list) and len(done) >= 2:  # only a batch can show it
            a, b = done[:2]
            output = list(output)
            output[a], output[b] = output[b], output[a]
        elif hasattr(output, "index_select") and len(done) >= 2:
            a, b = done[:2]
            order = list(range(output.shape[0]))
            order[a], order[b] = b, a
            output = output[order]
        return output, finished

    module.PoolingRunner.pool = pool
