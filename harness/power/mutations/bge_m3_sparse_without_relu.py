"""BGE-M3's sparse head loses its relu: negative lexical weights come out (token_classify and the
combined embed&token_classify task)."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "vllm.model_executor.models.roberta"
FILES = ["vllm/model_executor/models/roberta.py"]
CASES = ["bge-m3-*"]


def apply(module):
    import torch

    original = module.pooler_for_token_classify

    def pooler_for_token_classify(*args, **kwargs):
        if kwargs.get("act_fn") is torch.relu:  # only BgeM3EmbeddingModel's sparse head
            kwargs["act_fn"] = lambda x: x
        return original(*args, **kwargs)

    module.pooler_for_token_classify = pooler_for_token_classify
