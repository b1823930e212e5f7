"""NomicBert rotates with the default rope base 10000, not the checkpoint's 1000 (a config
update that drops rope_parameters' rope_theta)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.config"
FILES = ["vllm/model_executor/models/config.py"]
CASES = ["nomic-bert-tiny-mean-embed"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    cls = module.NomicBertModelConfig
    original = cls.verify_and_update_model_config

    def verify_and_update_model_config(model_config):
        original(model_config)
        rotary = model_config.hf_config.rotary_kwargs
        rotary["rope_parameters"] = {**rotary["rope_parameters"], "rope_theta": 10000.0}

    cls.verify_and_update_model_config = staticmethod(verify_and_update_model_config)
