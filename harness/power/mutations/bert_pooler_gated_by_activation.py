"""BERT's pooler (dense + tanh on the CLS state) runs only when the request asks for the output
activation: with `use_activation` off, the classifier gets the raw CLS hidden state, so the
"raw logits" a user asked for are the logits of another network."""

# replays vllm#57664 ("use_activation=False incorrectly skipped BERT-family architectural
# poolers along with the final activation"), a regression of #32148 (2026-01-12), which passed
# the pooler's dense + tanh as the head's activation, applied only when use_activation is set.
# Replayed by building BertPooler's head that way again.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = "vllm#57664"
MODULE = "vllm.model_executor.models.bert"
FILES = ["vllm/model_executor/models/bert.py"]
CASES = ["bert-tiny-seq-classify-3-*activation-off*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.BertPooler.__init__

    def __init__(self, model_config):
        original(self, model_config)
        self.head = module.EmbeddingPoolerHead(
            head_dtype=model_config.head_dtype,
            activation=lambda x: self.act_fn(self.dense(x)),
        )

    module.BertPooler.__init__ = __init__
