"""The real-bug table (issue #42): the YAML validates, docs/measurements/power.md shows exactly its rendering,
and every REPLAYS of the catalogue names a bug in it (and every replay it names replays it)."""

from pathlib import Path

import pytest

from harness.power import catalogue, real_bugs

DOCS = Path(__file__).resolve().parents[3] / "docs" / "measurements" / "power.md"


def _write(tmp_path, text: str) -> Path:
    p = tmp_path / "bugs.yaml"
    p.write_text(text, encoding="utf-8")
    return p


GOOD = """
bugs:
  - refs: [vllm#1, vllm#2]
    title: t
    cls: family
    status: fixed
    releases: r
    cpu: true
    why_not: no row
"""


def test_the_shipped_table_loads_and_counts():
    table = real_bugs.load()
    c = real_bugs.counts(table)
    assert c["found"] == sum(1 for b in table.bugs if b.status != "unconfirmed")
    assert 0 < c["caught"] <= c["cpu_visible"] <= c["found"]
    assert c["replayed"] == sum(1 for b in table.bugs if b.counted and b.replay)


def test_docs_table_is_the_rendering_of_the_yaml():
    section = real_bugs.docs_section(DOCS.read_text(encoding="utf-8"))
    assert section is not None, f"{DOCS} has no real-bugs table between the markers"
    assert section == real_bugs.render_table(real_bugs.load()), (
        "docs/measurements/power.md's real-bugs table is not the YAML's: "
        "python -m harness.power.real_bugs --table, and paste it between the markers"
    )


def test_every_replays_of_the_catalogue_names_a_bug_of_the_table():
    refs = real_bugs.load().all_refs()
    missing = [(m.name, m.replays) for m in catalogue.load() if m.replays and m.replays not in refs]
    assert not missing, f"REPLAYS naming no bug of harness/power/real_bugs.yaml: {missing}"


def test_every_replay_the_table_names_is_a_mutation_that_replays_that_bug():
    by_name = {m.name: m for m in catalogue.load()}
    for bug in real_bugs.load().bugs:
        if bug.replay is None:
            continue
        assert bug.replay in by_name, f"{bug.refs}: no mutation {bug.replay!r}"
        assert by_name[bug.replay].replays in bug.refs, (
            f"{bug.replay} REPLAYS {by_name[bug.replay].replays}, not one of {bug.refs}"
        )


def test_a_minimal_entry_loads(tmp_path):
    table = real_bugs.load(_write(tmp_path, GOOD))
    assert real_bugs.counts(table)["found"] == 1


@pytest.mark.parametrize(
    "edit, message",
    [
        (("vllm#1, vllm#2", "vllm#1, gh-1234"), "must be 'vllm#NUMBER'"),
        (("    why_not: no row\n", ""), "why_not must say why"),
        (("cls: family", "cls: families"), "bugs.0.cls"),
        (
            ("    why_not: no row\n", "    caught: {row: r, evidence: replay}\n"),
            "needs the replay mutation named",
        ),
        (
            (
                "cpu: true\n    why_not: no row\n",
                "cpu: false\n    caught: {row: r, evidence: release}\n",
            ),
            "GPU-only bug belongs in why_not",
        ),
        (("status: fixed", "status: maybe"), "bugs.0.status"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_entry_and_field(tmp_path, edit, message):
    path = _write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(real_bugs.RealBugsError, match=message) as e:
        real_bugs.load(path)
    assert str(path) in str(e.value)


def test_a_ref_in_two_entries_is_refused(tmp_path):
    text = GOOD + GOOD.split("bugs:\n", 1)[1].replace("vllm#1, vllm#2", "vllm#2")
    with pytest.raises(real_bugs.RealBugsError, match=r"vllm#2 is in bugs\[0\] and bugs\[1\]"):
        real_bugs.load(_write(tmp_path, text))


def test_unconfirmed_reports_are_listed_not_counted(tmp_path):
    table = real_bugs.load(_write(tmp_path, GOOD.replace("status: fixed", "status: unconfirmed")))
    assert real_bugs.counts(table)["found"] == 0
    assert real_bugs.counts(table)["unconfirmed"] == 1
    assert "vllm#1" in real_bugs.render_table(table)
