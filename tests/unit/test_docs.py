"""The docs stay true to the code: every PARITY_* variable is in the table, the generated pages
cover the parser and the schema, the README keeps CI's commands and its links, and the site
builds strictly (a broken link or a page left out of nav fails; run where mkdocs is importable,
i.e. by `nox -s docs`)."""

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT

NAME = re.compile(r"\bPARITY_[A-Z0-9_]*[A-Z0-9]\b")


def _gen():
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "docs" / "gen.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_gen"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _names_read() -> dict[str, str]:
    """Each PARITY_* name in harness/, ci/ and noxfile.py, with one file that names it."""
    files = [ROOT / "noxfile.py", *sorted((ROOT / "ci").iterdir())]
    files += sorted(p for p in (ROOT / "harness").rglob("*.py") if "data" not in p.parts)
    found: dict[str, str] = {}
    for path in files:
        if path.is_file():
            for name in NAME.findall(path.read_text(errors="replace")):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_every_parity_variable_is_in_the_table_and_every_row_is_read():
    documented = {v.name for v in _gen().env_vars() if v.name.startswith("PARITY_")}
    read = _names_read()
    missing = {n: where for n, where in read.items() if n not in documented}
    assert not missing, f"PARITY_* names read but not in docs/gen.py's table: {missing}"
    stale = documented - set(read)
    assert not stale, f"documented but read nowhere in harness/, ci/, noxfile.py: {stale}"


def test_the_variable_table_keeps_user_and_internal_apart():
    page = _gen().environment_md()
    user, internal = page.split("## Internal")[0], page.split("## Internal")[1]
    assert "`PARITY_VLLM`" in user and "`PARITY_VLLM`" not in internal
    assert "`PARITY_MUTATION`" in internal and "`PARITY_MUTATION`" not in user


def test_the_cli_page_has_every_subcommand_and_option():
    from harness.cli import build_parser

    page = _gen().cli_md()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, subparser in sub.choices.items():
        assert f"`parity {name}`" in page, name
        for action in subparser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in page, (name, flag)


def test_the_schema_page_has_every_key_of_a_case():
    from harness.matrix.schema import Case

    page = _gen().schema_md()
    for name, field in Case.model_fields.items():
        if not field.exclude and name != "where":
            assert f"| `{name}` |" in page, name


def test_field_comments_are_read_from_the_source():
    from harness.matrix.schema import Case

    comments = _gen()._field_comments(Case)
    assert "real model" in comments["hub_id"]  # `hub_id: ...  # the real model this case ...`


def test_readme_is_short_keeps_ci_commands_and_its_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for command in (
        "python3 -m pip install nox && nox -s parity",
        "python3 -m pip install nox && nox -s tests",
    ):
        assert command in text
    assert "nox -s tests" in (ROOT / ".ci" / "run").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert local and all((ROOT / link).is_file() for link in local), [
        link for link in local if not (ROOT / link).is_file()
    ]


def _nav_pages(nav) -> list[str]:
    out = []
    for item in nav:
        for value in item.values() if isinstance(item, dict) else [item]:
            out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_every_page_is_in_nav_and_every_nav_page_exists():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = set(_nav_pages(config["nav"]))
    docs = ROOT / "docs"
    pages = {str(p.relative_to(docs)) for p in docs.rglob("*.md")}
    generated = set(_gen().PAGES)
    assert pages - nav == set(), "pages left out of mkdocs.yml's nav"
    assert nav - pages - generated == set(), "nav names pages that do not exist"


def _build(tmp_path, edit=None) -> subprocess.CompletedProcess:
    pytest.importorskip("mkdocs", reason="mkdocs is installed by `nox -s docs`")
    site = tmp_path / "src"
    shutil.copytree(ROOT / "docs", site / "docs")
    shutil.copy(ROOT / "mkdocs.yml", site / "mkdocs.yml")
    if edit:
        edit(site / "docs")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
    )


def test_the_site_builds_strictly(tmp_path):
    done = _build(tmp_path)
    assert done.returncode == 0, done.stderr
    for page in (
        "reference/cli.html",
        "reference/environment.html",
        "reference/matrix-schema.html",
    ):
        assert (tmp_path / "site" / page).is_file(), page


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda d: (d / "guides" / "ci.md").open("a").write("\n[x](nope.md)\n"), "nope.md"),
        (
            lambda d: (d / "guides" / "ci.md").open("a").write("\n[x](gpu.md#no-such-part)\n"),
            "no-such-part",
        ),
        (lambda d: (d / "orphan.md").write_text("# Orphan\n"), "orphan.md"),
    ],
    ids=["broken-link", "broken-anchor", "page-not-in-nav"],
)
def test_a_broken_link_or_a_page_out_of_nav_fails_the_build(tmp_path, edit, says):
    done = _build(tmp_path, edit)
    assert done.returncode != 0
    assert says in done.stdout + done.stderr
