"""Running a matrix: plan the model loads, execute them on worker processes, compare, and build
the report (harness.run.session is the one-way pipeline)."""
