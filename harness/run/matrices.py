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
    from harness.runners import hf

    archs = frozenset(a for family in ARCHS.values() for a in family.archs)
    defaults = {**{("", t): r for t, r in hf.DEFAULT_RECIPE.items()}, **hf.DEFAULT_RECIPE_BY_ARCH}
    return Vocabulary(
        recipes=frozenset(hf.RECIPES),
        archs=archs,
        honours=dict(hf.RECIPE_HONOURS),
        defaults=defaults,
    )


def load_matrix(path: str | Path) -> Matrix:
    """Load, merge and validate a matrix file. Raises MatrixError listing every problem."""
    return _parse(path, vocabulary=vocabulary())
