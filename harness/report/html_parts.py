"""The HTML building blocks of every page the harness writes (report.html: harness.report.html;
diff.html: harness.report.diff; the MTEB page: harness.mteb.report): one self-contained document
with inline CSS, no script and no network. Every text placed in a page is escaped."""

from __future__ import annotations

import html
from collections.abc import Iterable

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"DejaVu Sans",sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
main{max-width:1240px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:24px;margin:8px 0 6px}h2{font-size:18px;margin:0 0
10px;padding-bottom:4px;border-bottom:1px solid #dde1e7}
h3{font-size:15px;margin:14px 0 6px}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:14px 18px;margin:14px 0}
nav{font-size:13px;color:#555}nav a{margin-right:12px;color:#2456a6;text-decoration:none}
table{border-collapse:collapse;font-size:12.5px;width:100%}
th,td{border-bottom:1px solid #e6e9ee;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
table.facts th{background:none;width:230px;color:#555;font-weight:500}
td code{white-space:nowrap}td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
code,pre,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px}
pre{background:#f3f4f6;border:1px solid
#e3e6ea;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap;word-break:break-word}
details{margin:4px 0}summary{cursor:pointer;color:#2456a6}
.st{display:inline-block;border-radius:3px;padding:0
6px;font-size:12px;font-weight:600;color:#fff;background:#6b7280}
.st-pass{background:#1f8a4c}.st-fail,.st-error,.st-xpass{background:#c62828}.st-xfail{background:#d9822b}.st-skip{background:#8a94a3}
.counts .st{font-size:13px;padding:2px 8px;margin-right:6px}
.card{border-left:4px solid #c62828;padding:6px 12px;margin:10px 0;background:#fdf6f6}
.muted{color:#667085}.bad{color:#c62828;font-weight:600}
.chart{overflow-x:auto}
table.inner{width:auto;font-size:12px}table.inner th{background:#f7f8fa}
table.divergences td:nth-child(4){width:42%}
svg text{font-family:system-ui,"DejaVu Sans",sans-serif}
"""


class Raw(str):
    """Markup built by these helpers; any other text placed in a page is escaped."""


def esc(x: object) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def cell(x: object) -> str:
    return x if isinstance(x, Raw) else esc(x)


def table(headers: Iterable[str] | None, rows: Iterable[Iterable[object]], cls: str = "") -> Raw:
    """`headers` None: a table of facts, the first cell of each row its name."""
    head = (
        ""
        if headers is None
        else "<thead><tr>" + "".join(f"<th>{cell(h)}</th>" for h in headers) + "</tr></thead>"
    )
    tag = "td" if headers is not None else "th"
    body = "".join(
        "<tr>"
        + "".join(
            f"<{tag if i == 0 else 'td'}>{cell(c)}</{tag if i == 0 else 'td'}>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return Raw(f'<table class="{esc(cls)}">{head}<tbody>{body}</tbody></table>')


def num(v: float | None, fmt: str = ".3g") -> Raw:
    return Raw('<span class="num">' + ("-" if v is None else esc(format(v, fmt))) + "</span>")


def details(summary: object, body: str, open_: bool = False) -> Raw:
    return Raw(
        f"<details{' open' if open_ else ''}><summary>{cell(summary)}</summary>{body}</details>"
    )


def pre(text: str) -> Raw:
    return Raw(f"<pre>{esc(text)}</pre>")


def badge(status: str, text: str | None = None) -> Raw:
    return Raw(f'<span class="st st-{esc(status)}">{esc(status if text is None else text)}</span>')


def section(id_: str, title: str, body: str) -> Raw:
    return Raw(f'<section id="{esc(id_)}"><h2>{esc(title)}</h2>{body}</section>')


def page(title: str, heading: str, sections: list[tuple[str, str, str]], lead: str = "") -> str:
    """A whole document: (id, title, body) sections behind a navigation line; inline CSS only."""
    nav = "".join(f'<a href="#{esc(i)}">{esc(t)}</a>' for i, t, _ in sections)
    body = "".join(section(i, t, b) for i, t, b in sections)
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" '
        f'content="width=device-width,initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{CSS}</style></head><body><main><h1>{esc(heading)}</h1>{lead}<nav>{nav}</nav>{body}"
        f"</main></body></html>\n"
    )
