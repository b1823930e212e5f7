"""A VLM converted into a sequence classifier from two token rows of its LM head (Qwen3-VL-Reranker:
"no", "yes") looks for its lm_head on the outer multimodal model instead of its inner language
model: the checkpoint's lm_head.weight is routed to the language model, which has none."""

# replays vllm#32089 (2026-01-10, "Fix Qwen3-VL-Reranker model loading for sequence
# classification", fixing #32086: "There is no module or parameter named 'lm_head' in
# Qwen3LLMForCausalLM"): the from_2_way_softmax loader assumed a flat model (model.lm_head, the
# embeddings of model.model, model.score); the fix finds the inner language model
# (adapters._get_language_model_for_seq_cls) and builds, ties and reads lm_head there. Replayed
# by making that lookup return the outer model itself, the pre-fix assumption.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = "vllm#32089"
MODULE = "vllm.model_executor.models.adapters"
FILES = ["vllm/model_executor/models/adapters.py"]
CASES = ["qwen3-vl-tiny-reranker-*"]
MATRIX = "matrices/multimodal.yaml"


def apply(module):
    module._get_language_model_for_seq_cls = lambda model: model
