"""The fix of the recorded ModernBERT head divergence: the sequence classifier's pooler applies
config.classifier_activation (as transformers does) instead of a hardcoded GELU; the record
modernbert-tiny-classify-3-silu-head must turn xpass."""

# The record (matrices/real-bugs.yaml) holds a live 0.32 bug found here: ModernBertPooler builds
# nn.GELU() whatever the config says. This mutation is the fix, so the gate must ask for the mark
# to go: proof that the record sees the key and will flag the release that reads it.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.modernbert"
FILES = ["vllm/model_executor/models/modernbert.py"]
CASES = ["modernbert-tiny-classify-3-silu-head"]
MATRIX = "matrices/real-bugs.yaml"


def apply(module):
    from transformers.activations import ACT2FN

    original = module.ModernBertPooler.__init__

    def __init__(self, model_config):
        original(self, model_config)
        self.act = ACT2FN[model_config.hf_config.classifier_activation]

    module.ModernBertPooler.__init__ = __init__
