"""Reference packages pinned apart from the harness's dependencies (a model's own published code
that cannot be a plain dependency: harness.engine.env.NO_DEPS_REFERENCES installs them with
--no-deps). A recipe imports one here, at its pinned version or not at all: another version could
compute something else, and a missing one is a skip that says how to install it."""

from __future__ import annotations

import importlib
import importlib.metadata
from types import ModuleType

from harness.runners import SkipCase


def pinned_package(name: str, version: str, module: str | None = None) -> ModuleType:
    """`import module` (default: `name`) when the installed distribution `name` is exactly
    `version`; else a skip (SkipCase) naming what is installed and the pip command that installs
    the pin."""
    fix = f"pip install --no-deps {name}=={version}"
    try:
        installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        raise SkipCase(
            f"the reference package {name}=={version} is not installed here ({fix}; "
            f"`python -m harness.engine.env ensure` installs it with every engine)"
        ) from None
    if installed != version:
        raise SkipCase(
            f"the reference package {name} is {installed} here, the reference is pinned to "
            f"{version} ({fix})"
        )
    return importlib.import_module(module or name)
