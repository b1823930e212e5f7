"""Token-id prompts lose their trailing [MASK] ids: the renderer strips them as if they were
padding, so a ColBERT query sent with its [MASK] expansion (issue #27) runs, and returns one row
per token, without it."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.renderers.base"
FILES = ["vllm/renderers/base.py"]
MATRIX = "matrices/extended.yaml"
# the ColBERT convention cases: the query rows go red; the document rows (no [MASK]) and the
# divergence row (sent as text) stay green by design
CASES = [
    "colbert-*-tiny-query-expanded-token-embed",
    "colbert-*-tiny-document-marked-token-embed",
    "colbert-bert-tiny-default-query-text-maxsim-score",
]
RUNNERS = ["vllm-v1", "vllm-v2"]


def apply(module):
    original = module.BaseRenderer._process_tokens

    def _process_tokens(self, prompt, *args, **kwargs):
        mask = getattr(self.tokenizer, "mask_token_id", None)
        if mask is not None and not prompt.get("prompt") and not prompt.get("multi_modal_data"):
            ids = list(prompt["prompt_token_ids"])
            while ids and ids[-1] == mask:
                ids.pop()
            prompt = {**prompt, "prompt_token_ids": ids}
        return original(self, prompt, *args, **kwargs)

    module.BaseRenderer._process_tokens = _process_tokens
