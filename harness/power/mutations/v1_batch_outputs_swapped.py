"""Model Runner V1 hands the first two finished requests of a batch each other's outputs."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = None
MODULE = "vllm.v1.worker.gpu_model_runner"
FILES = ["vllm/v1/worker/gpu_model_runner.py"]
CASES = ["bert-tiny-mean-embed", "qwen3-tiny-lasttoken-embed", "serve-bert-tiny-mean-embed"]


def apply(module):
    original = module.GPUModelRunner._pool

    def _pool(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        pooled = getattr(out, "pooler_output", None)
        if isinstance(pooled, list):
            done = [i for i, p in enumerate(pooled) if p is not None]
            if len(done) >= 2:  # only a batch can show it
                a, b = done[:2]
                pooled[a], pooled[b] = pooled[b], pooled[a]
        return out

    module.GPUModelRunner._pool = _pool
