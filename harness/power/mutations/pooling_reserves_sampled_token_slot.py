"""The scheduler reserves a context slot for a sampled token on a pooling runner too: a prompt
of exactly max_model_len tokens that is prefilled in chunks can never schedule its last token
(the running queue caps each step at max_model_len - computed - 1), so its request never ends."""

# replays vllm#55427 (and #29496): Scheduler.__init__ set num_sampled_tokens_per_step = 1 for
# every runner but diffusion ones; pooling runners append no sampled token. 0.32 reserves none
# for a pooling runner (v1/core/sched/scheduler.py); this puts the reservation back.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "chunked-prefill/prefix-cache state"
REPLAYS = "vllm#55427"
MODULE = "vllm.v1.core.sched.scheduler"
FILES = ["vllm/v1/core/sched/scheduler.py"]
MATRIX = "matrices/serve.yaml"
CASES = ["serve-qwen3-tiny-lasttoken-embed-at-max-len-chunked"]


def apply(module):
    original = module.Scheduler.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not self.vllm_config.model_config.is_diffusion:
            self.num_sampled_tokens_per_step = 1

    module.Scheduler.__init__ = __init__
