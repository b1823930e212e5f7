"""`python -m harness.models.synthetic '<SyntheticModel JSON>' ...`: build checkpoints."""

import sys

from harness.models.synthetic import main

sys.exit(main(sys.argv[1:]))
