"""`parity check MODEL`: parity for a user's own checkpoint, with no matrix to write.

infer.py reads the checkpoint folder (config.json, modules.json, the pooling config, a
cross-encoder's config, num_labels) and says which families of the default matrix it belongs
to, and from which file it learned each fact; cases.py turns that into matrix cases (the default
matrix's own family bounds and inputs, plus the adversarial built-in sets and the user's inputs)
and writes them as a matrix file that `parity run -m` loads like any other.
"""
