"""Statuses and modes are enums whose members are the strings reports always spelled."""

from __future__ import annotations

import json

import pytest

from harness.judge.verdict_types import ORDER, Status, Verdict
from harness.report.model import Result
from harness.run.modes import Against, GoldenMode, mode_of


def test_a_verdict_status_is_the_enum_and_spells_as_before():
    v = Verdict("xfail", "recorded")
    assert v.status is Status.XFAIL and v.status == "xfail" and f"{v.status}" == "xfail"
    assert json.dumps({v.status: v.status}) == '{"xfail": "xfail"}'
    assert ORDER.get("error") == 0 and ORDER[Status.PASS] == 5


def test_an_unknown_status_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="unknown verdict status 'passed'; valid: pass, fail"):
        Verdict("passed")


def test_report_json_bytes_are_those_of_the_plain_strings():
    fields = dict(case_id="c", family="f", task="embed", runner="vllm-v1", runner_label="V1")
    as_enum = Result(status=Status.PASS, **fields).model_dump_json()
    assert as_enum == Result(status="pass", **fields).model_dump_json()


@pytest.mark.parametrize(
    "kind, value", [(Against, "hf"), (Against, "golden"), (GoldenMode, "update")]
)
def test_a_mode_is_read_from_its_string(kind, value):
    assert mode_of(kind, value, "x") == value


def test_an_unknown_mode_names_what_and_the_choices():
    with pytest.raises(ValueError, match="against must be 'hf' or 'golden', got 'gold'"):
        mode_of(Against, "gold", "against")
    with pytest.raises(ValueError, match="mode must be 'record' or 'verify' or 'update'"):
        mode_of(GoldenMode, "check", "mode")
