"""Long-input chunked processing returns the token-weighted mean of the L2-normalised chunk
embeddings as it is: the mean of unit vectors is not re-normalised (norm < 1 for any input of
more than one chunk), although the request asked for the activation (use_activation)."""

# replays vllm#57498 (issue vllm#57927, reported on 0.29.0): EmbedIOProcessor._post_process_chunked
# averaged normalised chunks and skipped the final normalisation; the fix normalises multi-chunk
# aggregates when use_activation is set. Replayed by running the aggregation with the request's
# activation flag off, which is exactly the pre-fix code path (no final normalize).
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "normalisation/activation"
REPLAYS = "vllm#57498"
MODULE = "vllm.entrypoints.pooling.embed.io_processor"
FILES = ["vllm/entrypoints/pooling/embed/io_processor.py"]
CASES = ["serve-*-embed-chunked"]
MATRIX = "matrices/serve.yaml"
# front-end code the V1 and V2 servers share: one server runner is the whole test
RUNNERS = ["vllm-serve-v1"]


def apply(module):
    original = module.EmbedIOProcessor._post_process_chunked

    def _post_process_chunked(self, ctx):
        params = ctx.pooling_params
        saved = params.use_activation
        params.use_activation = False
        try:
            return original(self, ctx)
        finally:
            params.use_activation = saved

    module.EmbedIOProcessor._post_process_chunked = _post_process_chunked
