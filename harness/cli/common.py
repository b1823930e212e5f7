"""What every command shares: the consoles, the project's default paths, the usage error, and
how several exit codes combine into one."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
# CI logs are not terminals: keep ids whole there instead of folding them at 80 columns
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
out = Console(width=None if sys.stdout.isatty() else 160)


class UsageError(Exception):
    """Bad usage or setup (a path, a variable, an option): exit 2 with this message."""


def project_path(relative: str) -> str:
    """A default path of the project (`matrices/pooling.yaml`, `golden`): relative to the working
    folder when it has one, else the project checkout's own, so `parity` works from anywhere."""
    if Path(relative).exists() or not (ROOT / relative).exists():
        return relative
    return str(ROOT / relative)


DEFAULT_MATRIX = "matrices/pooling.yaml"


def combine(codes: list[int]) -> int:
    """One exit code for several runs: 1 if any failed or errored, else 2 if any could not be set
    up, else 0 if any compared (and held), else 4: nothing was compared anywhere."""
    for code in (1, 2, 0):
        if code in codes:
            return code
    return 4 if all(c == 4 for c in codes) else max(codes, default=4)


def check_settings() -> None:
    """Every PARITY_* setting read at entry (harness.settings): a bad value is a UsageError
    naming the variable and its valid values, before anything runs."""
    from harness.settings import SettingError, current

    try:
        current()
    except SettingError as e:
        raise UsageError(str(e)) from None
