import sys

from harness.power.cli import main

sys.exit(main())
