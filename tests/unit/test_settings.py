"""Every PARITY_* setting declared once (harness.settings), read with clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import settings
from harness.settings import SettingError, Settings, current, described

ROOT = Path(__file__).resolve().parents[2]


def names_in_source() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "harness").rglob("*.py"):
        found |= set(re.findall(r"\bPARITY_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    return found


def test_every_parity_name_the_harness_reads_is_declared_once():
    declared = [d.env for d in described()]
    assert len(declared) == len(set(declared))
    missing = sorted(names_in_source() - set(declared))
    assert not missing, f"declare these in harness/settings.py: {missing}"


def test_the_declaration_check_bites_on_an_undeclared_name():
    seeded = names_in_source() | {"PARITY_NOT_DECLARED"}
    assert sorted(seeded - {d.env for d in described()}) == ["PARITY_NOT_DECLARED"]


def test_each_setting_says_its_type_default_doc_and_who_sets_it():
    rows = {d.env: d for d in described()}
    assert rows["PARITY_WORKER_RSS_LIMIT_MB"].default == 4096.0
    assert rows["PARITY_DTYPE"].type == "float32 | bfloat16 | float16"
    assert rows["PARITY_ALLOW_ABSOLUTE_PATHS"].type == "flag" and rows["PARITY_CACHE"].doc
    assert rows["PARITY_MUTATION"].user_facing is False and rows["PARITY_VLLM"].user_facing


@pytest.mark.parametrize(
    "env, match",
    [
        ({"PARITY_WORKER_RSS_LIMIT_MB": "lots"}, "PARITY_WORKER_RSS_LIMIT_MB='lots': expected a"),
        ({"PARITY_BACKEND": "rocm"}, "PARITY_BACKEND='rocm'; valid: cpu, cuda"),
        ({"PARITY_ALLOW_ABSOLUTE_PATHS": "yes"}, "PARITY_ALLOW_ABSOLUTE_PATHS='yes'; valid: 0, 1"),
    ],
)
def test_a_bad_value_names_its_variable_and_the_valid_ones(env, match):
    with pytest.raises(SettingError, match=re.escape(match)):
        Settings.from_env(env)


def test_unset_or_empty_is_the_default_and_values_are_typed():
    assert Settings.from_env({}) == Settings() == Settings.from_env({"PARITY_CACHE": ""})
    s = Settings.from_env({"PARITY_KV_CACHE_MIB": "512", "PARITY_ALLOW_ABSOLUTE_PATHS": "1"})
    assert s.kv_cache_mib == 512.0 and s.allow_absolute_paths is True
    assert Settings.from_env({"PARITY_CACHE": "/c"}).cache_root() == Path("/c")
    assert Settings.from_env({"XDG_CACHE_HOME": "/x"}).cache_root() == Path("/x/parity-harness")


def test_current_reads_once_and_again_when_the_environment_changed(monkeypatch):
    monkeypatch.setenv("PARITY_DTYPE", "float16")
    first = current()
    assert first.dtype == "float16" and current() is first
    monkeypatch.setenv("PARITY_DTYPE", "bfloat16")
    assert current().dtype == "bfloat16"
    assert settings._read is not None


# reading a PARITY_* variable: os.environ.get("PARITY_..."), os.environ["PARITY_..."], getenv
DIRECT_READ = re.compile(r"""(?:environ\.get|getenv)\(\s*["']PARITY_|environ\[\s*["']PARITY_""")
WRITE = re.compile(r"""environ\[\s*["']PARITY_\w+["']\s*\]\s*=(?!=)""")
# the power hook is loaded by path into a mutated vLLM, where the harness may not import
READS_ITS_OWN = {"harness/power/site/sitecustomize.py"}


def direct_reads(sources: dict[str, str]) -> list[str]:
    return sorted(
        f"{name}:{n}"
        for name, text in sources.items()
        if name not in READS_ITS_OWN
        for n, line in enumerate(text.splitlines(), 1)
        if DIRECT_READ.search(line) and not WRITE.search(line)
    )


def test_the_harness_reads_parity_settings_only_through_settings():
    sources = {
        str(p.relative_to(ROOT)): p.read_text()
        for p in (ROOT / "harness").rglob("*.py")
        if p.name != "settings.py"
    }
    assert direct_reads(sources) == []


def test_the_direct_read_check_bites():
    seeded = {
        "harness/runners/x.py": 'a = os.environ.get("PARITY_DTYPE")\nb = os.getenv("PARITY_X")\n',
        "harness/runners/y.py": 'os.environ["PARITY_ALLOW_ABSOLUTE_PATHS"] = "1"\n',  # a write
    }
    assert direct_reads(seeded) == ["harness/runners/x.py:1", "harness/runners/x.py:2"]


def test_a_command_overrides_a_setting_for_itself_and_its_children_not_os_environ(monkeypatch):
    """`parity check` allows absolute paths for the checkpoint the user named: in this process
    and the commands it launches, never by writing os.environ (a side channel every later
    reader in the process would inherit)."""
    import os

    from harness.settings import child_environ, current, overriding

    monkeypatch.delenv("PARITY_ALLOW_ABSOLUTE_PATHS", raising=False)
    assert current().allow_absolute_paths is False and child_environ() == {}
    with overriding(allow_absolute_paths=True):
        assert current().allow_absolute_paths is True
        assert "PARITY_ALLOW_ABSOLUTE_PATHS" not in os.environ
        assert child_environ() == {"PARITY_ALLOW_ABSOLUTE_PATHS": "1"}
    assert current().allow_absolute_paths is False and child_environ() == {}
    with pytest.raises(TypeError, match="no setting allow_everything"):
        with overriding(allow_everything=True):
            pass


def test_parity_check_writes_no_setting_into_os_environ():
    text = (ROOT / "harness" / "cli" / "check.py").read_text()
    assert "os.environ" not in text
