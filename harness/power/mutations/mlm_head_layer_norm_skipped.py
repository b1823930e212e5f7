"""BERT's masked-LM head skips its transform LayerNorm (dense, gelu, then straight to the
vocabulary decoder)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.bert"
FILES = ["vllm/model_executor/models/bert.py"]
CASES = ["bert-tiny-mlm-token-classify"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    def forward(self, hidden_states):
        return self.decoder(self.activation(self.dense(hidden_states)))

    module.BertMLMHead.forward = forward
