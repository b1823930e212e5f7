"""vLLM FIXED: JinaRobertaModelConfig reads XLM-R's position_embedding_type with a default
("absolute"), so a config.json saved by transformers 5 (no such key) starts. Not a bug but a
change of behaviour: the recorded divergence xlmr-tiny-mean-embed-transformers5-config must stop
being xfail (xpass: the gate asks for the mark to go), proving that record cannot hide a fix."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "engine start"
REPLAYS = None
MODULE = "vllm.model_executor.models.config"
FILES = ["vllm/model_executor/models/config.py"]
CASES = ["xlmr-tiny-mean-embed-transformers5-config"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    cls = module.JinaRobertaModelConfig
    original = cls.verify_and_update_model_config

    def verify_and_update_model_config(model_config):
        config = model_config.hf_config
        if not hasattr(config, "position_embedding_type"):
            config.position_embedding_type = "absolute"
        original(model_config)

    cls.verify_and_update_model_config = staticmethod(verify_and_update_model_config)
