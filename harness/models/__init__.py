"""Where weights come from: the model cache and fingerprints, resolving a case's model source, the
synthetic tiny checkpoints the harness builds, and reference code for remote-code architectures."""
