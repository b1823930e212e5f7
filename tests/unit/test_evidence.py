"""A run's evidence is a typed contract: the worker's summary keys are fields, an undeclared one
is refused where it is read, and the JSON object on the wire (and in report.json) is unchanged."""

import json

import pytest

from harness.judge.verdict import check_not_in_effect
from harness.matrix.checks import expand_checks
from harness.matrix.evidence import RequestsEvidence, RunEvidence
from tests.unit.test_compare import make_case

# a summary as the worker has always written it (vLLM offline, traced, async scheduling off)
OFFLINE = {
    "count": 3,
    "max_prompt_tokens": 9,
    "min_prompt_tokens": 4,
    "cached_tokens": None,
    "requests_with_cache_hits": None,
    "peak_in_flight": None,
    "server_restarts": None,
    "arrival_order": [2, 0, 1],
    "peak_batch": 3,
    "engine_steps": 1,
    "split_prompts": 0,
    "tokens_scheduled": 19,
    "longest_prompt_steps": 1,
    "shared_long_short_steps": 1,
    "waited": 0,
    "batch_queue_size": None,
    "queued_steps": 0,
    "peak_batch_queue": 0,
}
SERVED = {
    "count": 2,
    "peak_in_flight": 2,
    "server_restarts": 0,
    "server_metrics": {"engine_steps": 1, "requests_finished": 2, "peak_batch_at_least": 2},
    "batching": {
        "endpoint": "/v1/embeddings",
        "items_per_request": [2],
        "http_requests": 1,
        "server_log_requests": 1,
    },
}


@pytest.mark.parametrize("summary", [OFFLINE, SERVED, {}], ids=["offline", "served", "none"])
def test_the_wire_object_is_the_summary_as_written_keys_order_and_nones(summary):
    wire = RequestsEvidence.read(summary).wire()
    assert json.dumps(wire) == json.dumps(summary)


def test_a_key_no_field_declares_is_refused_naming_it_and_where():
    # a misspelt key used to read as absent, so a check called its run untraced
    with pytest.raises(ValueError, match=r"shuffle: info\.requests.*split_prompt"):
        RequestsEvidence.read({**OFFLINE, "split_prompt": 2}, "shuffle: info.requests")
    with pytest.raises(ValueError, match="batching.items_per_req"):
        RequestsEvidence.read({"batching": {"items_per_req": [2]}})


def test_a_check_reads_the_fields_of_the_evidence():
    (derived,) = expand_checks([make_case(runners=["hf", "vllm-v1"], checks=["shuffle"])])[1:]
    in_order = {**OFFLINE, "arrival_order": [0, 1, 2]}
    assert check_not_in_effect(derived, {"requests": OFFLINE}) is None
    assert "input order" in check_not_in_effect(derived, {"requests": in_order})
    with pytest.raises(ValueError, match="arrival_ordre"):
        check_not_in_effect(derived, {"requests": {"arrival_ordre": [2, 0, 1]}})


def test_a_runners_evidence_merges_into_the_workers_summary(tmp_path):
    from harness.runners.worker import _requests

    records = [{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [3]}]
    run = RequestsEvidence(batch_queue_size=2, queued_steps=4, peak_batch_queue=2)
    got = _requests(RunEvidence(records=records, run=run), str(tmp_path / "out"))
    assert got["count"] == 2 and got["max_prompt_tokens"] == 2 and got["queued_steps"] == 4
    assert list(got)[-3:] == ["batch_queue_size", "queued_steps", "peak_batch_queue"]
    assert json.loads((tmp_path / "out.requests.json").read_text()) == records
    assert _requests(RunEvidence(), str(tmp_path / "none")) is None
