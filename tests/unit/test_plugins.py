"""harness.plugins.Discovery: a package's public modules imported once, retried after a failure."""

from __future__ import annotations

import sys

import pytest

from harness.plugins import Discovery


@pytest.fixture
def package(tmp_path, monkeypatch):
    root = tmp_path / "plugpkg"
    root.mkdir()
    (root / "__init__.py").write_text("LOADED = []\n")
    for name in ("b_second", "a_first", "_private"):
        (root / f"{name}.py").write_text(f"import plugpkg\nplugpkg.LOADED.append({name!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    for mod in [m for m in sys.modules if m == "plugpkg" or m.startswith("plugpkg.")]:
        del sys.modules[mod]


def test_public_modules_are_imported_once_in_name_order(package):
    import plugpkg

    discover = Discovery("plugpkg")
    discover()
    discover()
    assert plugpkg.LOADED == ["a_first", "b_second"]


def test_a_failed_import_is_raised_and_retried(package):
    import plugpkg

    (package / "c_broken.py").write_text("raise RuntimeError('broken builder')\n")
    discover = Discovery("plugpkg")
    with pytest.raises(RuntimeError, match="broken builder"):
        discover()
    assert not discover.done
    (package / "c_broken.py").write_text("import plugpkg\nplugpkg.LOADED.append('c_broken')\n")
    sys.modules.pop("plugpkg.c_broken", None)
    discover()
    assert plugpkg.LOADED[-1] == "c_broken" and discover.done


def test_both_registries_use_it():
    from harness.models import synthetic
    from harness.runners import hf

    assert isinstance(synthetic.discover, Discovery) and isinstance(hf.discover, Discovery)
