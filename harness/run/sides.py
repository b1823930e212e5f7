"""Each side of a comparison read from disk once: a runner's (or a golden's) outputs and what it
recorded beside them per item (harness.judge.side.Side)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.judge.side import Side
from harness.run.execute import RunOutcome
from harness.runners.outputs import load_items


def load_side(outcome: RunOutcome) -> Side:
    """The one reader of what a runner left on disk: its outputs, and the per-item records
    (prompt token ids, a server's answers, refusals) in `<out>.requests.json`, or a golden's
    token ids where its outcome names them (`requests_file`). Outputs are read only when their
    file exists (a refused request may leave records alone)."""
    if outcome.info.get("requests_file"):  # a golden's token ids
        path: Path | None = Path(outcome.info["requests_file"])
    else:
        path = Path(f"{outcome.output}.requests.json") if outcome.output else None
    meta = json.loads(path.read_text()) if path is not None and path.is_file() else None
    has_outputs = outcome.output is not None and Path(outcome.output).is_file()
    outputs = load_items(Path(outcome.output))[0] if has_outputs else None  # type: ignore[arg-type]
    return Side.of(outputs, meta)  # type: ignore[arg-type]


class Sides:
    """Sides loaded once per (case, runner) and handed to every check that reads them."""

    def __init__(self) -> None:
        self._loaded: dict[tuple, Side] = {}

    def __call__(self, outcome: RunOutcome) -> Side:
        key = (outcome.case_id, outcome.runner, outcome.output, outcome.info.get("requests_file"))
        if key not in self._loaded:
            self._loaded[key] = load_side(outcome)
        return self._loaded[key]
