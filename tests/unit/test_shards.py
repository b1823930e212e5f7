"""harness.shards: the N parts partition the work (none lost, none twice); parts join only whole."""

import pytest

from harness.shards import ShardError, check_parts, deal_blocks, deal_round_robin, parse_shard


@pytest.mark.parametrize("deal", [deal_blocks, deal_round_robin])
@pytest.mark.parametrize("size", [0, 1, 5, 15, 25])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 30])
def test_the_parts_partition_the_units(deal, size, n):
    units = [f"u{i:02d}" for i in range(size)]
    parts = [deal(units, k, n) for k in range(1, n + 1)]
    flat = [u for p in parts for u in p]
    assert sorted(flat) == units  # none lost, none twice
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1  # balanced by count


def test_blocks_are_contiguous_and_keep_neighbours_together():
    units = [(rel, m) for rel in ("0.28.0", "0.29.0", "0.30.0") for m in ("a", "b")]
    assert deal_blocks(units, 1, 3) == units[:2]
    assert deal_blocks(units, 2, 2) == units[3:]
    assert deal_round_robin(units, 2, 4) == [units[1], units[5]]


def test_check_parts_refuses_what_cannot_be_joined():
    assert check_parts(["2/3", "1/3", "3/3"], "parts") == 3
    with pytest.raises(ShardError, match="missing shard\\(s\\) among the parts: 2/3"):
        check_parts(["1/3", "3/3"], "parts")
    with pytest.raises(ShardError, match="duplicate shard\\(s\\) among the parts: 1/2"):
        check_parts(["1/2", "1/2", "2/2"], "parts")
    with pytest.raises(ShardError, match="foreign shard"):
        check_parts(["1/2", "2/3"], "parts")
    with pytest.raises(ShardError, match="not shards"):
        check_parts(["1/1", None], "parts")
    with pytest.raises(ShardError, match="no parts"):
        check_parts([], "parts")


def test_parse_shard_names_the_flag_and_what_is_right():
    assert parse_shard("3/4") == (3, 4)
    for bad in ("0/2", "3/2", "x", "1-2", "1/2/3"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)
