"""A sentence-transformers Dense module is looked for in `<idx>_Dense/`, not in the folder
modules.json names: a checkpoint that saves it as `2_Dense_<width>/` (stella) gets no projector
and serves the pooled hidden-size vectors."""

# replays vllm#39579 (open when crawled; the thread names the symptom, stella_en_1.5B_v5 served
# at 1536 dimensions, not 1024, with 2_Dense_1024/ never read, and no root cause). vLLM 0.32's
# try_get_dense_modules reads each Dense module's folder from its modules.json `path`; replayed
# by deriving the folder from the module's index instead, which finds the conventional layout
# (2_Dense) and misses stella's, the failure the thread reports.
TARGETS = ">=0.32,<0.33"
BUG_CLASS = "head"
REPLAYS = "vllm#39579"
MODULE = "vllm.transformers_utils.config"
FILES = ["vllm/transformers_utils/config.py"]
CASES = ["bert-tiny-st-dense-width-folder-embed", "bert-tiny-st-dense-embed"]
MATRIX = "matrices/extended.yaml"


def apply(module):
    def try_get_dense_modules(model, revision=None):
        modules = module.get_hf_file_to_dict("modules.json", model, revision)
        if isinstance(modules, dict):
            modules = modules.get("modules", [])
        configs = []
        for m in modules or []:
            if m.get("type") not in module._DENSE_MODULE_TYPES:
                continue
            folder = f"{m.get('idx')}_Dense"  # the module's `path` not read
            config = module.get_hf_file_to_dict(f"{folder}/config.json", model, revision)
            if config:
                configs.append({**config, "folder": folder})
        return configs or None

    module.try_get_dense_modules = try_get_dense_modules
