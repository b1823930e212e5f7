import sys

from harness.cli.entry import main

sys.exit(main())
