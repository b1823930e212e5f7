"""A pooling endpoint answers 404 for a LoRA adapter named as the request's model: the pooling
serving finds the adapter, then falls through to the base-model check, which the adapter's
name fails ("The model `NAME` does not exist")."""

# replays vllm#44410: #36110 gave the pooling servings their own _maybe_get_adapters, whose LoRA
# branch set the adapter and did not return; the fix (#44410) returns there, as the shared
# BaseServing._maybe_get_adapters that 0.32's PoolingBaseServing inherits does. This puts the
# fall-through back on PoolingBaseServing (every pooling endpoint: /pooling, /v1/embeddings,
# /classify, /score, /rerank).
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "adapters (LoRA)"
REPLAYS = "vllm#44410"
MODULE = "vllm.entrypoints.pooling.base.serving"
FILES = ["vllm/entrypoints/pooling/base/serving.py"]
MATRIX = "matrices/serve.yaml"
CASES = ["serve-qwen3-tiny-seq-classify-3-lora"]


def apply(module):
    from vllm.exceptions import VLLMNotFoundError

    def _maybe_get_adapters(self, request, supports_default_mm_loras=False):
        lora = self.models.lora_requests.get(request.model)  # found, and not returned
        if self._is_model_supported(request.model):
            return lora
        raise VLLMNotFoundError(f"The model `{request.model}` does not exist.")

    module.PoolingBaseServing._maybe_get_adapters = _maybe_get_adapters
