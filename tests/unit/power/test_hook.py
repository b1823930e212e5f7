"""The import hook: patches a module right after it executes, leaves evidence, breaks no import."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.power import hook

SITE = Path(hook.__file__).parent / "site"

MUTATION = '''\
"""Doubles fakepkg.target.value."""
TARGETS = ">=0.1"
BUG_CLASS = "head"
REPLAYS = None
MODULE = "fakepkg.target"
FILES = ["vllm/fake.py"]

def apply(module):
    module.value = module.value * 2
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A package `fakepkg` with a module `target`, and a catalogue folder holding mutations."""
    pkg = tmp_path / "src" / "fakepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "target.py").write_text("value = 21\n")
    cat = tmp_path / "mutations"
    cat.mkdir()
    (cat / "double.py").write_text(MUTATION)
    (cat / "missing_attr.py").write_text(
        MUTATION.replace("module.value = module.value * 2", "module.nothing_here.x = 1")
    )
    (cat / "old_only.py").write_text(MUTATION.replace('">=0.1"', '"<0.0.1"'))
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    for name in ("fakepkg", "fakepkg.target"):
        sys.modules.pop(name, None)
    yield tmp_path, cat
    for name in ("fakepkg", "fakepkg.target"):
        sys.modules.pop(name, None)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, hook.MutationFinder)]


def _events(log: Path) -> list[dict]:
    return [
        json.loads(line) for f in sorted(log.glob("*.jsonl")) for line in f.read_text().splitlines()
    ]


def _install(tmp_path, cat, name, monkeypatch):
    monkeypatch.setattr(hook, "_vllm_version", lambda: "0.32.0+cpu")
    env = {hook.ENV_NAME: name, hook.ENV_LOG: str(tmp_path / "log"), hook.ENV_DIR: str(cat)}
    return hook.install(env)


def test_finder_applies_the_mutation_after_the_module_executes(fake, monkeypatch):
    tmp_path, cat = fake
    finder = _install(tmp_path, cat, "double", monkeypatch)
    assert finder is not None and sys.meta_path[0] is finder
    import fakepkg.target

    assert fakepkg.target.value == 42
    (event,) = _events(tmp_path / "log")
    assert event["status"] == "applied" and event["module"] == "fakepkg.target"
    assert event["pid"] == os.getpid() and event["mutation"] == "double"


def test_other_modules_are_untouched(fake, monkeypatch):
    tmp_path, cat = fake
    _install(tmp_path, cat, "double", monkeypatch)

    assert "fakepkg.target" not in sys.modules
    assert not (tmp_path / "log").exists()


def test_missing_target_is_not_applicable_and_the_import_still_works(fake, monkeypatch):
    tmp_path, cat = fake
    _install(tmp_path, cat, "missing_attr", monkeypatch)
    import fakepkg.target

    assert fakepkg.target.value == 21
    (event,) = _events(tmp_path / "log")
    assert event["status"] == "not_applicable" and "nothing_here" in event["reason"]


def test_version_out_of_range_is_not_applicable(fake, monkeypatch):
    tmp_path, cat = fake
    _install(tmp_path, cat, "old_only", monkeypatch)
    import fakepkg.target

    assert fakepkg.target.value == 21
    (event,) = _events(tmp_path / "log")
    assert event["status"] == "not_applicable" and "outside TARGETS" in event["reason"]


def test_unknown_mutation_installs_nothing_and_says_so(fake, monkeypatch):
    tmp_path, cat = fake
    assert _install(tmp_path, cat, "no_such", monkeypatch) is None
    (event,) = _events(tmp_path / "log")
    assert event["status"] == "not_applicable" and "double" in event["reason"]


def test_no_mutation_named_installs_nothing():
    before = list(sys.meta_path)
    assert hook.install({}) is None
    assert sys.meta_path == before


@pytest.mark.parametrize(
    "version,spec,ok",
    [
        ("0.32.0", ">=0.32,<0.33", True),
        ("0.32.0+cpu", ">=0.32,<0.33", True),
        ("0.31.1", ">=0.32,<0.33", False),
        ("0.33.0rc1", "<0.33", False),
        ("0.32.1.dev5+gabc", ">=0.32,<0.33", True),
    ],
)
def test_version_applies(version, spec, ok):
    """A pre-release or dev build counts as its release (0.33.0rc1 is 0.33)."""
    assert hook.version_applies(spec, version) is ok


def _child(tmp_path, cat, pythonpath: list[str], code: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(pythonpath),
        hook.ENV_NAME: "double",
        hook.ENV_LOG: str(tmp_path / "log"),
        hook.ENV_DIR: str(cat),
    }
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_site_hook_patches_a_fresh_interpreter_and_chains_an_existing_sitecustomize(fake):
    tmp_path, cat = fake
    other = tmp_path / "other_site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    # the Triton shim site of V2 workers comes first on PYTHONPATH: the hook is still found
    shim = Path(hook.__file__).parents[1] / "triton_cpu" / "site"
    code = "import os, fakepkg.target; print(fakepkg.target.value, os.environ.get('CHAINED'))"
    done = _child(tmp_path, cat, [str(shim), str(SITE), str(other), str(tmp_path / "src")], code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", "yes"]
    assert "[parity-power] double applied in fakepkg.target" in done.stderr


def test_site_hook_without_mutation_changes_nothing(fake):
    tmp_path, cat = fake
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE), str(tmp_path / "src")])}
    env.pop(hook.ENV_NAME, None)
    done = subprocess.run(
        [sys.executable, "-c", "import fakepkg.target as t; print(t.value)"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert (
        done.returncode == 0 and done.stdout.split() == ["21"] and "parity-power" not in done.stderr
    )
