"""The pooling task kinds, what each returns per input item, and its default metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

TaskName = Literal[
    "embed",
    "classify",
    "score",
    "token_embed",
    "token_classify",
    "reward",
    "step_reward",
    "embed&token_classify",
]
TASKS: tuple[str, ...] = get_args(TaskName)


@dataclass(frozen=True)
class TaskKind:
    name: str
    item_shape: str  # human-readable shape of one item's output
    pairs: bool  # inputs are (query, document) pairs
    metrics: tuple[str, ...]  # metric names `compare` computes for this task
    # metrics a matrix must bound, each group "one of these": cosine alone cannot see a lost L2
    # normalisation (same direction, other length), so vectors gate cosine and max_abs
    required: tuple[tuple[str, ...], ...]


_VALUES = (("max_abs", "max_rel"),)
_VECTORS = (("cosine_distance",), ("max_abs",))
TASK_KINDS: dict[str, TaskKind] = {
    "embed": TaskKind(
        "embed", "[dim]", False, ("cosine_distance", "max_abs", "norm_rel"), _VECTORS
    ),
    "classify": TaskKind("classify", "[num_labels]", False, ("max_abs", "max_rel"), _VALUES),
    "score": TaskKind(
        "score",
        "[] (one score per pair)",
        True,
        ("max_abs", "max_rel", "rank_disagreement"),
        _VALUES,
    ),
    "token_embed": TaskKind(
        "token_embed", "[tokens, dim]", False, ("cosine_distance", "max_abs", "norm_rel"), _VECTORS
    ),
    "token_classify": TaskKind(
        "token_classify", "[tokens, num_labels]", False, ("max_abs",), (("max_abs",),)
    ),
    "reward": TaskKind(
        "reward", "[tokens, num_labels] or [num_labels]", False, ("max_abs",), (("max_abs",),)
    ),
    "step_reward": TaskKind(
        "step_reward", "[steps, num_labels]", False, ("max_abs",), (("max_abs",),)
    ),
    # BGE-M3's combined task (vLLM selects it by default): the dense vector, then the sparse
    # weight of each token, in one flat array
    "embed&token_classify": TaskKind(
        "embed&token_classify", "[dim + tokens]", False, ("max_abs",), (("max_abs",),)
    ),
}


def task_kind(name: str) -> TaskKind:
    try:
        return TASK_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(TASKS)}") from None
