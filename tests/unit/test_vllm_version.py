"""The one answer to "which vLLM is this" (harness.engine.target.vllm_version)."""

from __future__ import annotations

import sys
import types

from harness.engine import target


def test_an_imported_vllm_answers_with_its_own_version(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.30.1"))
    assert target.vllm_version() == "0.30.1"


def test_without_importing_vllm_its_version_file_is_read_as_text(tmp_path, monkeypatch):
    pkg = tmp_path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "_version.py").write_text("__version__ = version = '0.29.0+cpu'\n")
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert target.vllm_version() == "0.29.0+cpu"
    assert "vllm" not in sys.modules  # asked, never imported


def test_no_vllm_importable_is_none(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert target.vllm_version() is None
