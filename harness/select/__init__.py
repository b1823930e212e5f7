"""Which (case, runner) rows a change can affect (`parity select`), read from vLLM's own source."""
