"""/v2/embed's input_type prompt (config_sentence_transformers.json) is appended, not prepended."""

TARGETS = ">=0.32,<0.33"
BUG_CLASS = "tokenisation"
REPLAYS = None
MODULE = "vllm.entrypoints.pooling.embed.io_processor"
FILES = ["vllm/entrypoints/pooling/embed/io_processor.py"]
CASES = ["serve-bert-tiny-st-prompt-query-embed"]  # a sentence-transformers prompt by name
RUNNERS = ["vllm-serve-v1", "vllm-serve-v2"]  # offline vLLM takes no prompt name: the user prefixes
MATRIX = "matrices/serve.yaml"


def apply(module):
    def _apply_task_instruction(self, texts, input_type):
        prefix = self._get_task_instruction_prefix(input_type)
        return [t + prefix for t in texts] if prefix else texts

    module.EmbedIOProcessor._apply_task_instruction = _apply_task_instruction
