"""When max_num_seqs holds requests back, a full step's first two pooled outputs are swapped."""

# the tiling path: a step that scheduled max_num_seqs requests while others wait for room. A
# batch that fits (the base run, one_by_one, the chunked checks' token-bound steps) never fills
# max_num_seqs, so only a tiled run (max_num_seqs smaller than the batch) reaches it
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "batching/order"
REPLAYS = None
MODULE = "vllm.v1.core.sched.scheduler"
FILES = ["vllm/v1/core/sched/scheduler.py"]
CASES = ["qwen3-tiny-lasttoken-embed-mixed"]
MATRIX = "matrices/extended.yaml"  # its checks are too slow for the default matrix


def apply(module):
    original = module.Scheduler.update_from_output

    def update_from_output(self, scheduler_output, model_runner_output):
        pooled = getattr(model_runner_output, "pooler_output", None)
        full = len(scheduler_output.num_scheduled_tokens) >= self.max_num_running_reqs
        if full and len(self.waiting) and isinstance(pooled, list):
            done = [i for i, p in enumerate(pooled) if p is not None]
            if len(done) >= 2:
                a, b = done[:2]
                pooled[a], pooled[b] = pooled[b], pooled[a]
        return original(self, scheduler_output, model_runner_output)

    module.Scheduler.update_from_output = update_from_output
