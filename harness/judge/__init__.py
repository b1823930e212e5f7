"""What outputs mean: metrics, the one comparison of a runner's outputs against the reference,
server answers' structure checks, goldens, and the verdict rules (harness.judge.verdict)."""
