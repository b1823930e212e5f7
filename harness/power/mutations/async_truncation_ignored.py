"""AsyncLLM.encode ignores the truncation its caller asks for: the prompt is tokenized whole,
while the offline LLM and the server truncate it."""

# replays vllm#31013 (issue vllm#31012): AsyncLLM.encode read truncation only from its own
# `truncate_prompt_tokens` argument and ignored the request's (PoolingParams.truncate_prompt_tokens
# then), so async callers got untruncated prompts. vLLM 0.32 carries a request's truncation in
# `tokenization_kwargs` alone (PoolingParams has no such field); replayed by AsyncLLM.encode
# dropping it from what it hands add_request.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = "vllm#31013"
MODULE = "vllm.v1.engine.async_llm"
FILES = ["vllm/v1/engine/async_llm.py"]
CASES = ["async-*-truncated*"]
MATRIX = "matrices/extended.yaml"
# front-end code both model runners share: one AsyncLLM runner's rows are the whole test
RUNNERS = ["vllm-async-v1"]


def apply(module):
    original = module.AsyncLLM.encode

    def encode(self, prompt, pooling_params, request_id, *args, tokenization_kwargs=None, **kw):
        kept = {
            k: v
            for k, v in (tokenization_kwargs or {}).items()
            if k not in ("truncate_prompt_tokens", "truncation_side")
        }
        return original(
            self, prompt, pooling_params, request_id, *args, tokenization_kwargs=kept or None, **kw
        )

    module.AsyncLLM.encode = encode
