"""Non-final pipeline ranks skip the pooling post-step: later chunks read stale state."""

# replays vllm#56666 itself (pipeline parallel, two GPUs); chunked_last_pool_stale_state is its
# single-process analogue on CPU
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "chunked-prefill/prefix-cache state"
REPLAYS = "vllm#56666"
MODULE = "vllm.v1.worker.gpu_model_runner"
FILES = ["vllm/v1/worker/gpu_model_runner.py"]
NEEDS = "gpu"


def apply(module):
    original = module.GPUModelRunner._update_states

    def _update_states(self, scheduler_output, *args, **kwargs):
        if not (self.is_pooling_model and not module.get_pp_group().is_last_rank):
            return original(self, scheduler_output, *args, **kwargs)
        before = {rid: s.num_computed_tokens for rid, s in self.requests.items()}
        out = original(self, scheduler_output, *args, **kwargs)
        for rid, n in before.items():
            if rid in self.requests:
                self.requests[rid].num_computed_tokens = n
        return out

    module.GPUModelRunner._update_states = _update_states
