"""A sentence-transformers pooling config in the compact form (`"pooling_mode": "mean"`, written by
sentence-transformers >= 5.4) is not read: vLLM finds no pooling mode and serves the
architecture's default pooling (CLS for BERT) with no error."""

# replays vllm#45995 (0.23.0): get_pooling_config took the pooling mode only from keys whose value
# is True (the verbose pooling_mode_*_tokens booleans), so the compact string went unread. 0.32
# also reads `pooling_mode` strings; replayed by hiding that key from it, which leaves exactly
# the pre-fix reading of the file.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "pooling method"
REPLAYS = "vllm#45995"
MODULE = "vllm.transformers_utils.config"
FILES = ["vllm/transformers_utils/config.py"]
CASES = ["bert-tiny-st-compact-*"]
MATRIX = "matrices/real-bugs.yaml"


def apply(module):
    original = module.get_hf_file_to_dict

    def get_hf_file_to_dict(file_name, *args, **kwargs):
        data = original(file_name, *args, **kwargs)
        is_module_config = "/" in str(file_name)  # <module dir>/config.json, not config.json
        if is_module_config and isinstance(data, dict):
            if isinstance(data.get("pooling_mode"), str):
                data = {k: v for k, v in data.items() if k != "pooling_mode"}
        return data

    module.get_hf_file_to_dict = get_hf_file_to_dict
