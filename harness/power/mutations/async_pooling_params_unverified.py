"""AsyncLLM's requests skip PoolingParams.verify: a request that leaves use_activation unset keeps
it unset (no normalisation, no softmax), where the offline LLM fills in the default (on)."""

# replays vllm#33361 (fix PRs vllm#33385, vllm#34972): PoolingParams.verify, which merges the
# pooler config and sets the defaults (use_activation=True for embed and classify), ran on the
# offline LLM's path only; AsyncLLM handed the engine the caller's params as they were, so
# AsyncLLM's embeddings differed from LLM's. vLLM 0.32 verifies in the input processor both share;
# replayed by AsyncLLM's own input processor skipping the verify call.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = "vllm#33361"
MODULE = "vllm.v1.engine.async_llm"
FILES = ["vllm/v1/engine/async_llm.py", "vllm/v1/engine/input_processor.py"]
CASES = ["async-bert-tiny-mean-embed", "async-bert-tiny-seq-classify-3"]
MATRIX = "matrices/extended.yaml"
RUNNERS = ["vllm-async-v1"]


def apply(module):
    import threading

    from vllm.pooling_params import PoolingParams

    unverified = threading.local()  # set while AsyncLLM's input processor validates
    verify = PoolingParams.verify

    def verify_unless_async(self, model_config):
        if not getattr(unverified, "on", False):
            verify(self, model_config)

    PoolingParams.verify = verify_unless_async
    original_init = module.AsyncLLM.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        validate = self.input_processor._validate_params

        def _validate_params(params, supported_tasks):
            unverified.on = True
            try:
                return validate(params, supported_tasks)
            finally:
                unverified.on = False

        self.input_processor._validate_params = _validate_params

    module.AsyncLLM.__init__ = __init__
