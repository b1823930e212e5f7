from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# how long a test waits for a subprocess before calling it hung: a guard, never a budget (a loaded
# 2-core host took 136 s for one `vllm serve` start; a run of several servers, 20 min and more)
SUBPROCESS_GUARD = 3600


@pytest.fixture
def write_matrix(tmp_path):
    """Write a matrix YAML into a temp folder and return its path."""

    def _write(text: str, name: str = "m.yaml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return _write
