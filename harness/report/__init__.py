"""Reports: report.json (harness.report.model) is the source of truth; Markdown, JUnit, HTML and
the diff of two runs derive from it."""
