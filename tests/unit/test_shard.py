import pytest

from harness.matrix import load_matrix, model_group, parse_shard, shard_cases
from harness.report import Report, Result, merge
from tests.conftest import ROOT


def test_shards_partition_cases_and_keep_models_together():
    cases = load_matrix(ROOT / "matrices" / "pooling.yaml").cases
    shards = [shard_cases(cases, k, 3) for k in (1, 2, 3)]
    ids = [c.id for s in shards for c in s]
    assert sorted(ids) == sorted(c.id for c in cases) and len(ids) == len(set(ids))
    for a in range(3):
        for b in range(a + 1, 3):
            assert not {model_group(c) for c in shards[a]} & {model_group(c) for c in shards[b]}
    assert [c.id for c in shard_cases(list(reversed(cases)), 2, 3)] == [c.id for c in shards[1]]


def test_parse_shard_errors():
    assert parse_shard("2/5") == (2, 5)
    for bad in ("0/2", "3/2", "x", "1-2"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


def _rep(*ids, sha="m"):
    return Report(harness_version="0", matrix="m.yaml", matrix_sha256=sha, device="cpu", started="t",
                  results=[Result(case_id=i, family="f", task="embed", runner="vllm-v1", runner_label="l",
                                  status="pass") for i in ids])


def test_merge_combines_and_refuses_overlap_or_other_matrix():
    merged = merge([_rep("b"), _rep("a", "c")])
    assert [r.case_id for r in merged.results] == ["a", "b", "c"] and merged.exit_code() == 0
    with pytest.raises(ValueError, match="appears in two shard reports"):
        merge([_rep("a"), _rep("a")])
    with pytest.raises(ValueError, match="different matrices"):
        merge([_rep("a"), _rep("b", sha="other")])
