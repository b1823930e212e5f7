"""The CI matrix (matrices/ci.yaml, or --parity-matrix) as pytest items: real HF and vLLM workers."""

from harness.matrix_tests import test_parity  # noqa: F401 - collected here as part of the suite
