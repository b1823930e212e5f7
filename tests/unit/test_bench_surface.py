"""The benchmark's whole-surface mode (benchmarks/bench.py, --modes d_surface): the four
matrices' runs, one after another, are one figure set whose times and counts add up."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "benchmarks" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _part(wall, exit_code, rows, green, forward, rss):
    phases = {"worker_start_s": 1.0, "forward_s": forward, "compare_and_report_s": None}
    return {
        "exit_code": exit_code,
        "wall_seconds": wall,
        "comparisons": rows,
        "passed_or_expected": green,
        "phases": phases,
        "peak_rss_mb": rss,
        "report": f"/runs/{wall}/report.json",
    }


def test_the_surface_is_every_nightly_matrix_and_only_run_when_asked():
    bench = _bench()
    assert [Path(m).stem for m in bench.SURFACE] == ["pooling", "extended", "serve", "multimodal"]
    assert all((ROOT / m).is_file() for m in bench.SURFACE)
    assert bench.SURFACE_MODE not in bench.MODES  # the default modes leave it out
    assert bench.SURFACE_MODE in bench.ONCE


def test_the_surface_figures_add_up_and_keep_the_worst_exit():
    bench = _bench()
    parts = {
        "pooling": _part(100.0, 0, 180, 180, 40.0, {"harness": 300, "largest_worker": 900}),
        "serve": _part(400.0, 1, 120, 119, 60.0, {"harness": 350}),
        "multimodal": _part(50.0, 0, 30, 30, 10.0, {"largest_worker": 2000}),
    }
    got = bench.combined(parts)
    assert got["wall_seconds"] == 550.0
    assert (got["comparisons"], got["passed_or_expected"]) == (330, 329)
    assert got["exit_code"] == 1  # one matrix failing fails the surface
    assert got["phases"]["forward_s"] == 110.0 and got["phases"]["worker_start_s"] == 3.0
    assert got["phases"]["compare_and_report_s"] == 0  # a missing figure counts as none
    assert got["peak_rss_mb"] == {"harness": 350, "largest_worker": 2000}
    assert got["parts"] is parts
    crashed = {**parts, "extended": _part(5.0, -9, 0, 0, 0.0, {})}
    assert bench.combined(crashed)["exit_code"] == -9  # a signal death is worse than a fail
