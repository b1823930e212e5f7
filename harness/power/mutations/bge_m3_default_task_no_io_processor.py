"""The server registers no IO processor for BGE-M3's default pooling task (embed&token_classify):
a /pooling request without `task` looks that task up in the serving's processors and dies on a
KeyError (HTTP 500), instead of the clear refusal that names the plugin or --pooler-config.task."""

# replays vllm#51801: #37861 removed the frontend's multi-task support, so
# init_pooling_io_processors (entrypoints/pooling/factories.py) had no branch for the combined
# task; the fix (#51823) added UnsupportedCombinedTaskIOProcessor for it. Here that branch is
# undone: the processor is dropped from the table the factory returns, as before the fix.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "server encoding"
REPLAYS = "vllm#51801"
MODULE = "vllm.entrypoints.pooling.factories"
FILES = ["vllm/entrypoints/pooling/factories.py"]
MATRIX = "matrices/serve.yaml"
# the server's front end, the same code on either model runner: one runner's rows suffice
RUNNERS = ["vllm-serve-v1"]
CASES = ["serve-bge-m3-tiny-default-task-pooling-refused"]


def apply(module):
    original = module.init_pooling_io_processors

    def init_pooling_io_processors(*args, **kwargs):
        processors = original(*args, **kwargs)
        processors.pop("embed&token_classify", None)
        return processors

    module.init_pooling_io_processors = init_pooling_io_processors
