"""`python -m harness.models.synthetic '<SyntheticModel JSON>'`: build one checkpoint."""

import sys

from harness.models.synthetic import main

sys.exit(main(sys.argv[1:]))
