"""Detection power: mutations of vLLM replayed against the gate (`parity power`)."""
