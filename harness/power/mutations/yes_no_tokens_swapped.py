"""An original LLM reranker converted with its "yes" and "no" rows swapped: the score row becomes
lm_head[no] - lm_head[yes], every score 1 - P(yes) (Qwen3-Reranker; mxbai-rerank-v2's "0", "1")."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.adapters"
FILES = ["vllm/model_executor/models/adapters.py"]
CASES = ["*yes-no*", "*mxbai*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.SEQ_CLS_LOAD_METHODS["from_2_way_softmax"]

    def load_weights_using_from_2_way_softmax(model, weights):
        # the conversion reads classifier_from_token as [false token, true token]: hand it the
        # two reversed for the load, as a conversion taking the wrong row of lm_head would
        configs = {id(c): c for c in (model.config, model.config.get_text_config())}.values()
        saved = [(c, getattr(c, "classifier_from_token", None)) for c in configs]
        for c, tokens in saved:
            if tokens is not None:
                c.classifier_from_token = list(reversed(tokens))
        try:
            return original(model, weights)
        finally:
            for c, tokens in saved:
                if tokens is not None:
                    c.classifier_from_token = tokens

    module.load_weights_using_from_2_way_softmax = load_weights_using_from_2_way_softmax
    module.SEQ_CLS_LOAD_METHODS["from_2_way_softmax"] = load_weights_using_from_2_way_softmax
