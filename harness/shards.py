"""Work split across CI agents (`--shard K/N`) and the parts joined again.

One rule per kind of work, so every agent computes the same split from the same list:
`deal_round_robin` (the catalogue's mutations: neighbours by name are often alike in cost, so
dealing them spreads the cost) and `deal_blocks` (the release table's (release, matrix) runs: a
release stays on as few agents as possible, each agent installing few environments). A merge
checks the parts with `check_parts` before it claims anything: a missing, duplicate or foreign
part is refused, never joined into a table that looks complete.
Standard library only (the release table's parent process has no engine).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


class ShardError(ValueError):
    """A shard argument or a set of parts that cannot be joined (says which and why)."""


def parse_shard(text: str) -> tuple[int, int]:
    """'K/N' -> (K, N), 1 <= K <= N."""
    try:
        k, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise ShardError(f"--shard {text!r}: expected K/N, e.g. 1/2") from None
    if not 1 <= k <= n:
        raise ShardError(f"--shard {text!r}: need 1 <= K <= N")
    return k, n


def deal_round_robin(units: Sequence[T], k: int, n: int) -> list[T]:
    """Shard K of N: units K, K+N, K+2N, ... of the list as given (1-based)."""
    return [u for i, u in enumerate(units) if i % n == k - 1]


def deal_blocks(units: Sequence[T], k: int, n: int) -> list[T]:
    """Shard K of N: the K-th of N contiguous blocks whose sizes differ by at most one."""
    return [u for i, u in enumerate(units) if i * n // len(units) == k - 1]


def check_parts(labels: Sequence[str | None], what: str) -> int:
    """The N of a complete set of parts `K/N`; refuses an unsharded part, parts of different
    splits, a duplicate or a missing one (`what` names the parts in the message)."""
    if not labels:
        raise ShardError(f"no {what} to merge")
    if any(lab is None for lab in labels):
        raise ShardError(
            f"{sum(lab is None for lab in labels)} {what} are not shards (run with --shard K/N): "
            "only the shards of one run merge"
        )
    parsed = [parse_shard(str(lab)) for lab in labels]
    splits = sorted({n for _, n in parsed})
    if len(splits) > 1:
        raise ShardError(f"foreign shard: the {what} split the work differently: {sorted(labels)}")
    n = splits[0]
    ks = [k for k, _ in parsed]
    dup = sorted({k for k in ks if ks.count(k) > 1})
    if dup:
        raise ShardError(
            f"duplicate shard(s) among the {what}: {', '.join(f'{k}/{n}' for k in dup)}"
        )
    missing = sorted(set(range(1, n + 1)) - set(ks))
    if missing:
        raise ShardError(
            f"missing shard(s) among the {what}: {', '.join(f'{k}/{n}' for k in missing)}; "
            "the work they hold was not measured"
        )
    return n
