"""Running a matrix: plan the model loads, execute them on worker processes, compare, and build
the report (harness.run.session orchestrates the one-way pipeline; harness.run.assemble judges
outcomes and builds the report; harness.run.golden_flow runs against and records goldens)."""
