"""Packages that find their own modules: adding a module to such a package is enough, no list
names it (harness.models.synthetic's builders, harness.runners.hf's recipes). Standard library
only, so the lowest layer can use it."""

from __future__ import annotations

import importlib
import pkgutil
import sys


class Discovery:
    """`discover()` for one package: import each of its public modules (not `_x`), in name
    order, the first time it is called; each registers itself on import. A failed import is
    raised and the next call tries again (nothing is half-remembered). The package's
    `__path__` is read at each call, so a test may extend it."""

    def __init__(self, package: str):
        self.package = package
        self.done = False

    def __call__(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            for name in sorted(
                m.name for m in pkgutil.iter_modules(sys.modules[self.package].__path__)
            ):
                if not name.startswith("_"):
                    importlib.import_module(f"{self.package}.{name}")
        except BaseException:
            self.done = False
            raise
