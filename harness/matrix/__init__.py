"""What to run: the matrix schema and its loader, input sets, invariance checks, task kinds and
runner names. Nothing here imports torch, transformers or vLLM; a worker process may import
harness.matrix.inputs and harness.matrix.runner_names but never the schema (pydantic) or yaml."""
