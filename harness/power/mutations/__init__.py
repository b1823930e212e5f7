"""The mutation catalogue: one module per mutation (fields: harness/power/catalogue.py)."""
