"""A pooling request's LoRARequest is dropped: the base model answers instead of the adapter."""

# the engine-side request: InputProcessor.process_inputs builds the EngineCoreRequest that
# carries the LoRA to the scheduler and model runner; here it forgets it for pooling parameters
# only (generation keeps its adapter), so every LLM.classify/embed/score/encode with a
# lora_request runs the base weights. Only the LoRA case sends one.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "adapters (LoRA)"
REPLAYS = None
MODULE = "vllm.v1.engine.input_processor"
FILES = ["vllm/v1/engine/input_processor.py"]
CASES = ["qwen3-tiny-seq-classify-3-lora"]
MATRIX = "matrices/extended.yaml"  # the LoRA case is extended only


def apply(module):
    import inspect

    original = module.InputProcessor.process_inputs
    signature = inspect.signature(original)

    def process_inputs(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        if isinstance(bound.arguments.get("params"), module.PoolingParams):
            bound.arguments["lora_request"] = None
        return original(*bound.args, **bound.kwargs)

    module.InputProcessor.process_inputs = process_inputs
