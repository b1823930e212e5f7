"""`parity`: one command line for both journeys (harness.cli.entry); `python -m harness.cli`."""

from harness.cli.entry import main
from harness.cli.parser import build_parser

__all__ = ["build_parser", "main"]
