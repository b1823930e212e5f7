"""An LLM reranker converted at load from its yes/no logits (from_2_way_softmax) with an UNTIED
lm_head (Qwen3-Reranker-8B; the 0.6B and 4B tie it to embed_tokens): the checkpoint's lm_head
rows are never loaded, so the score weight (lm_head[yes] - lm_head[no]) is built from the fresh
head's zeros and every pair scores sigmoid(0) = 0.5."""

# replays vllm#27857 (0.11.1rc4, confirmed by a maintainer: Qwen3-Reranker-8B gave 0.5 for every
# pair, the 0.6B/4B and the offline seq-cls conversions of all three were right; fix PR not
# identified). 0.6B/4B tie the lm_head, the 8B does not, and 0.5 everywhere is a zero score
# weight: the untied lm_head is the only path the three differ on. Replayed in 0.32's
# load_weights_using_from_2_way_softmax by leaving the checkpoint's lm_head.* out of what it
# loads (the head as constructed, zeroed, stands in for it).
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = "vllm#27857"
MODULE = "vllm.model_executor.models.adapters"
FILES = ["vllm/model_executor/models/adapters.py"]
CASES = ["qwen3-tiny-yes-no-rerank-score-untied", "qwen3-tiny-yes-no-rerank-score"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    import torch
    from vllm.model_executor.layers import vocab_parallel_embedding as vpe

    original = module.load_weights_using_from_2_way_softmax

    class ZeroedLMHead(vpe.ParallelLMHead):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            with torch.no_grad():
                self.weight.zero_()

    def load_weights_using_from_2_way_softmax(model, weights):
        if model.config.get_text_config().tie_word_embeddings:
            return original(model, weights)
        kept = ((n, w) for n, w in weights if not n.split(".", 1)[0] == "lm_head")
        plain, vpe.ParallelLMHead = vpe.ParallelLMHead, ZeroedLMHead
        try:
            return original(model, kept)
        finally:
            vpe.ParallelLMHead = plain

    module.load_weights_using_from_2_way_softmax = load_weights_using_from_2_way_softmax
    module.SEQ_CLS_LOAD_METHODS["from_2_way_softmax"] = load_weights_using_from_2_way_softmax
