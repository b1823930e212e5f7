import pytest

from harness.matrix.loader import model_group, parse_shard, shard_cases
from harness.report.model import Report, Result, merge
from harness.run.matrices import load_matrix
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


def _rep(*ids, sha="m", shard=None, selection=None):
    return Report(
        harness_version="0",
        matrix="m.yaml",
        matrix_sha256=sha,
        device="cpu",
        started="t",
        shard=shard,
        selection=selection or {},
        results=[
            Result(
                case_id=i,
                family="f",
                task="embed",
                runner="vllm-v1",
                runner_label="l",
                status="pass",
            )
            for i in ids
        ],
    )


def test_merge_combines_and_refuses_overlap_or_other_matrix():
    merged = merge([_rep("b", shard="1/2"), _rep("a", "c", shard="2/2")])
    assert [r.case_id for r in merged.results] == ["a", "b", "c"] and merged.exit_code() == 0
    with pytest.raises(ValueError, match="appears in two shard reports"):
        merge([_rep("a", shard="1/2"), _rep("a", shard="2/2")])
    with pytest.raises(ValueError, match="different matrices"):
        merge([_rep("a", shard="1/2"), _rep("b", sha="other", shard="2/2")])


def test_merge_refuses_a_missing_duplicate_or_foreign_shard():
    with pytest.raises(ValueError, match="missing shard.*3/3"):
        merge([_rep("a", shard="1/3"), _rep("b", shard="2/3")])
    with pytest.raises(ValueError, match="duplicate shard.*2/3"):
        merge([_rep("a", shard="1/3"), _rep("b", shard="2/3"), _rep("c", shard="2/3")])
    with pytest.raises(ValueError, match="split the run differently"):
        merge([_rep("a", shard="1/2"), _rep("b", shard="2/3")])
    with pytest.raises(ValueError, match="not shard reports"):
        merge([_rep("a"), _rep("b", shard="2/2")])
    with pytest.raises(ValueError, match="select different cases"):
        merge([_rep("a", shard="1/2", selection={"cases": ["x*"]}), _rep("b", shard="2/2")])
    assert merge([_rep("a")]).results[0].case_id == "a"  # one unsharded report: nothing to check


def test_matrix_hash_covers_included_files(write_matrix):
    base = write_matrix(
        """
families:
  f: {task: embed, inputs: short-texts, runners: [hf, vllm-v1], model: {source: local, path: x},
      tolerances: {float32: {cosine_distance: 1.0e-6, max_abs: 1.0e-5}}}
cases:
  - {id: a, family: f}
""",
        "base.yaml",
    )
    top = write_matrix("include: [base.yaml]\n", "top.yaml")
    before = load_matrix(top).sha256
    base.write_text(
        base.read_text().replace("1.0e-5", "1.0e-1")
    )  # loosen a bound in the included file only
    assert load_matrix(top).sha256 != before
