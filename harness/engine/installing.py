"""Installing into an engine's virtualenv: uv when it can take pip's settings, else pip.

`Installer` runs `uv pip` in the new venv with pip's configured indexes, links, constraints and
certificate handed over as uv options; PARITY_INSTALLER=pip or a setting uv cannot take keeps pip.
Standard library only (harness.engine.env runs before the harness's dependencies exist).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.settings import current


def run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    # our stdout carries the environment's JSON for the caller (noxfile): a child's output,
    # pip's or a check's print, goes to stderr
    kw.setdefault("stdout", sys.stderr)
    subprocess.run(cmd, check=True, **kw)


# pip settings (`pip config list`, PIP_* variables) and the uv options that mean the same
_UV_LIST_OPTIONS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links"}
_UV_OPTIONS = {"index-url": "--index-url", "constraint": "--constraint"}
_UV_FLAGS = {"no-index": "--no-index", "pre": "--prerelease=allow"}
# settings that change nothing uv does here (pip's own chatter, its cache, its timeouts)
_PIP_ONLY = {
    "disable-pip-version-check",
    "no-cache-dir",
    "cache-dir",
    "progress-bar",
    "quiet",
    "verbose",
    "no-input",
    "root-user-action",
    "retries",
}


def pip_settings(python: str) -> dict[str, str]:
    """pip's effective settings as `pip config list` prints them (files and PIP_* variables),
    the later scope winning: global, then user/site files, then the install section, then the
    environment (`:env:`)."""
    out = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    rank = {"global": 0, "install": 1, ":env:": 2}
    found: list[tuple[int, str, str]] = []
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if not sep or section not in rank:
            continue
        found.append((rank[section], name, value.strip().strip("'\"")))
    return {name: value for _, name, value in sorted(found, key=lambda f: f[0])}


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The uv command-line options and environment that carry pip's settings. Raises ValueError
    naming a setting uv cannot be given (the caller then keeps pip)."""
    opts = ["--no-config", "--index-strategy", "unsafe-best-match"]
    env: dict[str, str] = {}
    for name, value in settings.items():
        if name in _UV_LIST_OPTIONS:
            for item in value.split():
                opts += [_UV_LIST_OPTIONS[name], item]
        elif name in _UV_OPTIONS:
            opts += [_UV_OPTIONS[name], value]
        elif name in _UV_FLAGS:
            if value.lower() in ("1", "true", "yes", "on"):
                opts.append(_UV_FLAGS[name])
        elif name == "cert":
            env["SSL_CERT_FILE"] = value
        elif name in ("timeout", "default-timeout"):
            env["UV_HTTP_TIMEOUT"] = value
        elif name == "trusted-host":
            for host in value.split():
                opts += ["--allow-insecure-host", host]
        elif name not in _PIP_ONLY:
            raise ValueError(f"pip setting {name}={value!r} has no uv equivalent here")
    return opts, env


@dataclass
class Installer:
    """Installs into one venv: uv (`uv pip`, with pip's settings translated) or pip itself."""

    python: str
    uv: str | None = None  # the uv binary; None: pip
    uv_args: list[str] = field(default_factory=list)
    uv_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def pip(cls, python: str) -> Installer:
        return cls(python)

    def _uv(self, verb: str, *args: str) -> None:
        run(
            [self.uv, "pip", verb, "--python", self.python, "--quiet", *args],  # type: ignore[list-item]
            env={**os.environ, **self.uv_env},
        )

    def install(self, *args: str) -> None:
        if self.uv:
            # --compile-bytecode: pip compiles at install, uv does not; where the machine sets
            # PYTHONDONTWRITEBYTECODE nothing would ever be compiled and every vLLM import
            # (each worker, each model inspection) would parse its sources again
            self._uv("install", "--compile-bytecode", *self.uv_args, *args)
        else:
            run([self.python, "-m", "pip", "install", "-q", *args])

    def uninstall(self, *names: str) -> None:
        if self.uv:
            self._uv("uninstall", *names)
        else:
            run([self.python, "-m", "pip", "uninstall", "-q", "--yes", *names])


def installer(python: str) -> Installer:
    """The installer for a new venv: uv, installed into it by its pip, unless PARITY_INSTALLER=pip,
    a pip setting uv cannot take, or uv fails to install (each said on stderr; pip then runs)."""
    if current().installer == "pip":
        run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
        return Installer.pip(python)
    try:
        opts, env = uv_options(pip_settings(python))
        run([python, "-m", "pip", "install", "-q", "uv"])
    except (ValueError, subprocess.CalledProcessError) as err:
        print(f"parity: installing with pip, not uv: {err}", file=sys.stderr, flush=True)
        return Installer.pip(python)
    return Installer(python, str(Path(python).parent / "uv"), opts, env)
