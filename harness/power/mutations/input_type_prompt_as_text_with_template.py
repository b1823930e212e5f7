"""The fix of a live bug (vllm#40616): /v2/embed's input_type prompt is prepended to the text on a
model with a chat template too, as sentence-transformers does, not rendered as a system message."""

# The record (matrices/serve.yaml, serve-qwen3-tiny-lasttoken-st-prompt-query-chat-template-embed)
# holds a live 0.32 bug: with a chat template, EmbedIOProcessor renders the input_type prompt and
# the text as a conversation (the prompt a system message). This mutation takes the plain
# prompt + text path whatever the template, so the record must turn xpass: proof that the row
# sees the mechanism and will flag the release that fixes it.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.embed.io_processor"
FILES = ["vllm/entrypoints/pooling/embed/io_processor.py"]
CASES = ["serve-qwen3-tiny-lasttoken-st-prompt-query-chat-template-embed"]
RUNNERS = ["vllm-serve-v1", "vllm-serve-v2"]  # offline vLLM takes no prompt name
MATRIX = "matrices/serve.yaml"


def apply(module):
    # only the input_type path asks whether a template exists; a conversation sent as `inputs`
    # is rendered through the template on another path
    module.EmbedIOProcessor._has_chat_template = lambda self: False
