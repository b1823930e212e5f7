"""A Triton backend named `cpu` that compiles nothing: with TRITON_INTERPRET=1 every kernel runs
in Triton's numpy interpreter. vLLM's CPU build only enables Triton (and so Model Runner V2)
when `triton.backends` has a `cpu` entry; this package provides one. Only V2 workers on CPU
see it, through PYTHONPATH pointing at `site/` (see harness.runners.platform).
"""
