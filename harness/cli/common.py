"""What every command shares: the consoles, the project's default paths, the usage error, and
how several exit codes combine into one."""

from __future__ import annotations

import os
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


def check_settings(env: dict[str, str] | None = None) -> None:
    """Variables the run reads deep inside, checked at entry (a UsageError names the bad one)."""
    env = dict(os.environ) if env is None else env
    valid = {
        "PARITY_DTYPE": ("float32", "bfloat16", "float16"),
        "PARITY_DEVICE": ("cpu", "cuda"),
        "PARITY_BACKEND": ("cpu", "cuda"),
        "PARITY_ENFORCE_EAGER": ("0", "1"),
        "PARITY_INSTALLER": ("uv", "pip"),
    }
    for name, choices in valid.items():
        value = env.get(name)
        if value and value not in choices:
            raise UsageError(f"{name}={value!r}; valid: {', '.join(choices)}")
