"""`parity mteb`: MTEB main scores of the reference and each runner, side by side."""
