from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def write_matrix(tmp_path):
    """Write a matrix YAML into a temp folder and return its path."""

    def _write(text: str, name: str = "m.yaml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return _write
