"""A multimodal sequence classifier sizes its score head from the text config's num_labels (2, the
PreTrainedConfig default a composite config's text part keeps) instead of the top-level config
that declares the checkpoint's labels: a 3-label Qwen3-VL classifier cannot load."""

# replays vllm#50950 (fixing #47956, merged 2026-08-04: "multimodal sequence classifiers size
# the score head from the text config"): as_seq_cls_model built `score` with
# text_config.num_labels; the fix (adapters._resolve_num_labels) prefers the top-level config
# whenever it declares a label space of its own. Replayed by resolving to the text config's.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = "vllm#50950"
MODULE = "vllm.model_executor.models.adapters"
FILES = ["vllm/model_executor/models/adapters.py"]
CASES = ["qwen3-vl-tiny-seq-classify-*"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    module._resolve_num_labels = lambda hf_config, text_config: text_config.num_labels
