"""Every format of a report, written into a run folder."""

from __future__ import annotations

from pathlib import Path

from harness.report.html import to_html
from harness.report.junit import to_junit
from harness.report.markdown import to_markdown
from harness.report.model import Report, atomic_write, write_json


def write_all(report: Report, out_dir: Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    paths = {
        "json": out_dir / "report.json",
        "junit": out_dir / "junit.xml",
        "markdown": out_dir / "report.md",
        "html": out_dir / "report.html",
    }
    write_json(report, paths["json"])
    atomic_write(paths["junit"], to_junit(report))
    atomic_write(paths["markdown"], to_markdown(report))
    atomic_write(paths["html"], to_html(report))
    return paths
