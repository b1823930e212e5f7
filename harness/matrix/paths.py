"""Paths a matrix names, kept inside the folder they are relative to."""

from __future__ import annotations

from pathlib import Path

from harness.settings import current


def cache_root() -> Path:
    return current().cache_root()


class UnsafePath(ValueError):
    """A matrix path points outside the project and the cache, and absolute paths are not
    allowed."""


def contained_path(raw: str, base: Path, what: str, relative_to: Path | None = None) -> Path:
    """A path a matrix names. Relative paths resolve against `relative_to` (default: the matrix's
    folder `base`) and must stay inside the project (the matrix folder's parent) or the harness
    cache; anything else, absolute paths included, needs PARITY_ALLOW_ABSOLUTE_PATHS=1, so a matrix
    from a pull request cannot read arbitrary files."""
    p = Path(raw)
    path = (Path(relative_to or base) / p).resolve() if not p.is_absolute() else p.resolve()
    allowed = (Path(base).resolve().parent, cache_root().resolve())
    inside = any(path == root or root in path.parents for root in allowed)
    if not inside and not current().allow_absolute_paths:
        raise UnsafePath(
            f"{what} {raw!r} resolves to {path}, outside the project "
            f"({allowed[0]}) and the cache ({allowed[1]}); set PARITY_ALLOW_ABSOLUTE_PATHS=1 to "
            f"allow it"
        )
    return path
