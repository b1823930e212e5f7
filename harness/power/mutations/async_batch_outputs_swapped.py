"""Under async scheduling, a step's first two pooled outputs reach each other's requests."""

# the async path only: the engine core steps through its batch queue and the scheduler takes a
# batch's outputs one step late. vLLM turns async scheduling off for pooling models by default
# and always on CPU, so only the `async_scheduling` check reaches it, on a GPU (unproven on CPU:
# there the check is a skip)
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = None
MODULE = "vllm.v1.core.sched.scheduler"
FILES = ["vllm/v1/core/sched/scheduler.py", "vllm/v1/engine/core.py"]
NEEDS = "gpu"
CASES = ["qwen3-tiny-lasttoken-embed-modes"]
MATRIX = "matrices/extended.yaml"  # its checks are too slow for the default matrix


def apply(module):
    original = module.Scheduler.update_from_output

    def update_from_output(self, scheduler_output, model_runner_output):
        pooled = getattr(model_runner_output, "pooler_output", None)
        if getattr(self.scheduler_config, "async_scheduling", False) and isinstance(pooled, list):
            done = [i for i, p in enumerate(pooled) if p is not None]
            if len(done) >= 2:
                a, b = done[:2]
                pooled[a], pooled[b] = pooled[b], pooled[a]
        return original(self, scheduler_output, model_runner_output)

    module.Scheduler.update_from_output = update_from_output
