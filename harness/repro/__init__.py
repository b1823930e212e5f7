"""From a red row to a bug report: a failing or diverging (case, runner) row of a run exported as
a standalone folder (checkpoint, inputs, a script in plain transformers / sentence-transformers
and vLLM). A consumer of reports and matrices, like report/diff; `parity repro` is its CLI."""
