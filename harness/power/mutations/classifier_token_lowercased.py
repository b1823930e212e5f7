"""An LLM converted by `no_post_processing` scores the row of its classifier token lower-cased:
bge-reranker-v2-gemma's score row becomes lm_head["yes"], not lm_head["Yes"]."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.adapters"
FILES = ["vllm/model_executor/models/adapters.py"]
CASES = ["gemma-tiny-bge-reranker-*"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    original = module.SEQ_CLS_LOAD_METHODS["no_post_processing"]

    def load_weights_no_post_processing(model, weights):
        configs = {id(c): c for c in (model.config, model.config.get_text_config())}.values()
        saved = [(c, getattr(c, "classifier_from_token", None)) for c in configs]
        for c, tokens in saved:
            if tokens is not None:
                c.classifier_from_token = [t.lower() for t in tokens]
        try:
            return original(model, weights)
        finally:
            for c, tokens in saved:
                if tokens is not None:
                    c.classifier_from_token = tokens

    module.load_weights_no_post_processing = load_weights_no_post_processing
    module.SEQ_CLS_LOAD_METHODS["no_post_processing"] = load_weights_no_post_processing
