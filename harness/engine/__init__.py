"""The vLLM under test: which one (PARITY_VLLM), its environment, and releases side by side.
Standard library only: nox and ci/parity-gate run `python -m harness.engine.env` before anything
else is installed."""
