"""parity-harness: pooling-model parity between Hugging Face and vLLM's model runners."""

__version__ = "0.1.0"
