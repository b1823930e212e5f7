"""A cross-encoder's configured activation (config.json `sentence_transformers.activation_fn`,
or sentence-transformers < 4's `sbert_ce_default_activation_function`) is not read: a one-label
head gets the sigmoid whatever the checkpoint says (Identity: raw scores)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = None
MODULE = "vllm.model_executor.layers.pooler.activations"
FILES = ["vllm/model_executor/layers/pooler/activations.py"]
CASES = ["bert-tiny-cross-encoder-score-config-*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.get_act_fn

    class _Unset:  # the config as if neither key were in config.json
        def __init__(self, config):
            self._config = config

        def __getattr__(self, name):
            if name in ("sentence_transformers", "sbert_ce_default_activation_function"):
                raise AttributeError(name)
            return getattr(self._config, name)

    def get_act_fn(config, static_num_labels=True):
        return original(_Unset(config), static_num_labels)

    module.get_act_fn = get_act_fn
