"""A matrix file, loaded for running: the schema's checks (harness.matrix.loader) plus the names
only the layers above the matrix know, the HF reference recipes and the synthetic architectures.
Every command and the pytest plugin load matrices here."""

from __future__ import annotations

import functools
from pathlib import Path

from harness.matrix.loader import load_matrix as _parse
from harness.matrix.schema import Matrix, Vocabulary


@functools.lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    from harness.models.synthetic import ARCHS
    from harness.runners.hf import RECIPES

    archs = frozenset(a for family in ARCHS.values() for a in family.archs)
    return Vocabulary(recipes=frozenset(RECIPES), archs=archs)


def load_matrix(path: str | Path) -> Matrix:
    """Load, merge and validate a matrix file. Raises MatrixError listing every problem."""
    return _parse(path, vocabulary=vocabulary())
