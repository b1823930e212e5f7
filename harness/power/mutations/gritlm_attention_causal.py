"""GritLM embeds with causal attention: the pooling model's layers are built as a decoder's (the
config's is_causal=False that GritLM sets for the pooling runner is undone before the layers
read it)."""

TARGETS = ">=0.28,<0.29"  # vLLM removed GritLM after 0.28.0 (vllm#53608)
BUG_CLASS = "pooling method"
REPLAYS = None
MODULE = "vllm.model_executor.models.gritlm"
FILES = ["vllm/model_executor/models/gritlm.py"]
CASES = ["gritlm-*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    base = module.LlamaForCausalLM

    class _CausalAgain(base):
        def __init__(self, *, vllm_config, prefix="", **kwargs):
            vllm_config.model_config.hf_config.is_causal = True
            super().__init__(vllm_config=vllm_config, prefix=prefix, **kwargs)

    # GritLM.__init__ sets is_causal=False, then its super().__init__ builds the layers: a base in
    # between puts it back first
    module.GritLM.__bases__ = (_CausalAgain,)
