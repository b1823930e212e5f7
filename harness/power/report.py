"""The power report: mutation | bug class | replays | applied in | caught by; what was missed."""

from __future__ import annotations

import html
import json
from pathlib import Path

from harness.power.catalogue import Mutation
from harness.power.runner import Outcome
from harness.shards import ShardError, check_parts

FAILING = (
    "missed",
    "baseline not green",  # no row it ran was green without it: nothing could go red
    "not applied",
    "no rows",
    "error",
    "inconclusive",
    "interrupted",  # a signal stopped the run before it was judged
)  # an applicable mutation the gate did not catch (or could not show it caught)


def _caught_by(o: Outcome, limit: int = 6) -> list[str]:
    rows = [
        f"{c['case']} · {c['runner']} ({c['status']}): {c['message']}" for c in o.caught[:limit]
    ]
    if len(o.caught) > limit:
        rows.append(f"... and {len(o.caught) - limit} more row(s)")
    return rows


def to_json(outcomes: list[Outcome], meta: dict) -> dict:
    return {
        **meta,
        "mutations": [
            {
                "name": o.mutation.name,
                "doc": o.mutation.doc,
                "bug_class": o.mutation.bug_class,
                "replays": o.mutation.replays,
                "targets": o.mutation.targets,
                "module": o.mutation.module,
                "files": list(o.mutation.files),
                "needs": o.mutation.needs,
                "status": o.status,
                "reason": o.reason,
                "rows_selected": len(o.rows),
                "rows": [list(r) for r in o.rows],
                "left_out": o.left_out,
                "processes": o.processes,
                "applied_in": o.applied_in,
                "caught": o.caught,
                "inconclusive": o.inconclusive,
                "seconds": round(o.seconds, 1),
                "run_dir": o.run_dir,
            }
            for o in outcomes
        ],
    }


def to_markdown(outcomes: list[Outcome], meta: dict) -> str:
    lines = [
        f"# Detection power · {meta['matrix']}",
        "",
        *([f"**Partial: {meta['partial_reason']}**", ""] if meta.get("partial_reason") else []),
        f"{sum(o.status == 'caught' for o in outcomes)} caught, "
        f"{sum(o.status in FAILING for o in outcomes)} not caught (listed below), "
        f"{sum(o.status == 'not applicable' for o in outcomes)} not applicable, "
        f"{sum(o.status == 'needs gpu' for o in outcomes)} need a GPU · "
        f"{meta.get('wall_seconds', 0):.0f} s",
        "",
        f"HF reference: {meta.get('reference', 'live')} · server rows: "
        f"{meta.get('server_rows', 'all')}",
        "",
        "| mutation | bug class | replays | applied in | caught by (rows red, first message) |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        cell = "<br>".join(_caught_by(o)) if o.caught else f"**{o.status}**: {o.reason}"
        cell = cell.replace("|", "\\|")
        lines.append(
            f"| `{o.mutation.name}` {o.mutation.doc} | {o.mutation.bug_class} | "
            f"{o.mutation.replays or '-'} | {o.processes} process(es) | "
            f"{len(o.caught)} red of {len(o.rows)}"
            + (f" ({o.left_out})" if o.left_out else "")
            + f": {cell} |"
        )
    missed = [o for o in outcomes if o.status in FAILING]
    lines += ["", "## Not caught", ""]
    lines += [f"- `{o.mutation.name}` ({o.status}): {o.reason}" for o in missed] or ["(none)"]
    return "\n".join(lines) + "\n"


def to_html(outcomes: list[Outcome], meta: dict) -> str:
    e = html.escape
    colour = {"caught": "#d4f4d4", "not applicable": "#eee", "needs gpu": "#eee"}
    rows = []
    for o in outcomes:
        caught = (
            "<br>".join(e(r) for r in _caught_by(o))
            if o.caught
            else f"<b>{e(o.status)}</b>: {e(o.reason)}"
        )
        rows.append(
            f"<tr style='background:{colour.get(o.status, '#f8d0d0')}'>"
            f"<td><code>{e(o.mutation.name)}"
            f"</code><br>{e(o.mutation.doc)}</td><td>{e(o.mutation.bug_class)}</td>"
            f"<td>{e(o.mutation.replays or '-')}</td><td>{o.processes}</td>"
            f"<td>{len(o.caught)} of {len(o.rows)}</td><td>{caught}</td></tr>"
        )
    missed = (
        "".join(
            f"<li><code>{e(o.mutation.name)}</code> ({e(o.status)}): {e(o.reason)}</li>"
            for o in outcomes
            if o.status in FAILING
        )
        or "<li>(none)</li>"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>parity power</title><style>"
        "body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #999;"
        "padding:4px;vertical-align:top;font-size:13px}</style></head><body>"
        f"<h1>Detection power · {e(meta['matrix'])}</h1><p>{e(json.dumps(meta))}</p><table>"
        "<tr><th>mutation</th><th>bug class</th><th>replays</th><th>applied in (processes)</th>"
        "<th>rows red</th><th>caught by (first message)</th></tr>"
        f"{''.join(rows)}</table><h2>Not caught</h2><ul>{missed}</ul></body></html>\n"
    )


def write(outcomes: list[Outcome], meta: dict, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "power.json", "markdown": out / "power.md", "html": out / "power.html"}
    paths["json"].write_text(json.dumps(to_json(outcomes, meta), indent=2) + "\n")
    paths["markdown"].write_text(to_markdown(outcomes, meta))
    paths["html"].write_text(to_html(outcomes, meta))
    return paths


def exit_code(outcomes: list[Outcome]) -> int:
    """1 when an applicable mutation went uncaught (missed, applied nowhere, or no row to run)."""
    return 1 if any(o.status in FAILING for o in outcomes) else 0


def from_json(entry: dict) -> Outcome:
    """An Outcome again from its power.json entry (to_json), to render a merged report."""
    mutation = Mutation(
        name=entry["name"],
        path=Path(entry["module"]),
        doc=entry["doc"],
        targets=entry["targets"],
        bug_class=entry["bug_class"],
        replays=entry["replays"],
        module=entry["module"],
        files=tuple(entry["files"]),
        needs=entry["needs"],
    )
    return Outcome(
        mutation,
        status=entry["status"],
        reason=entry["reason"],
        rows=[(c, r) for c, r in entry["rows"]],
        caught=entry["caught"],
        inconclusive=entry["inconclusive"],
        applied_in=entry["applied_in"],
        seconds=entry["seconds"],
        run_dir=entry["run_dir"],
        left_out=entry["left_out"],
    )


# what every shard of one catalogue run agrees on (the rest, seconds, is each agent's)
SHARED_META = ("matrix", "device", "only", "reference", "server_rows", "catalogue")


def merge(parts: list[dict]) -> tuple[list[Outcome], dict]:
    """The outcomes and meta of one catalogue run from the power.json of each of its shards, in
    the catalogue's order; refused unless they are every shard of one run (one matrix, options
    and catalogue) and each mutation is judged in exactly one of them."""
    check_parts([p.get("shard") for p in parts], "power reports")
    if len({json.dumps([p.get(k) for k in SHARED_META]) for p in parts}) > 1:
        raise ShardError(
            "foreign shard: the power reports come from different runs (matrix, device, "
            f"reference, server rows or catalogue): {sorted(p['shard'] for p in parts)}"
        )
    judged: dict[str, dict] = {}
    for p in parts:
        for entry in p["mutations"]:
            if entry["name"] in judged:
                raise ShardError(f"mutation {entry['name']} is in two shards")
            judged[entry["name"]] = entry
    catalogue = parts[0]["catalogue"]
    if set(judged) != set(catalogue):
        lost = sorted(set(catalogue) - set(judged))
        extra = sorted(set(judged) - set(catalogue))
        raise ShardError(f"the shards do not hold their catalogue: missing {lost}, extra {extra}")
    meta = {k: parts[0].get(k) for k in SHARED_META}
    meta["wall_seconds"] = max(p.get("wall_seconds", 0) for p in parts)
    meta["agent_seconds"] = sum(p.get("wall_seconds", 0) for p in parts)
    meta["shards"] = len(parts)
    return [from_json(judged[name]) for name in catalogue], meta
