"""The MTEB chart plots each runner's |score − hf| and |score − expected| against its bound, on a
log scale, and the page shows it (inline SVG) beside the score table."""

import numpy as np
import pytest

from harness.report.model import MetricOut, Report, Result

pytest.importorskip("matplotlib")

from harness.mteb import report as mteb_report  # noqa: E402

BOUND = 5e-4


def synthetic_report() -> Report:
    rng = np.random.default_rng(3)
    results = []
    for case in ("model-a", "model-b"):
        for task in ("ParitySTS", "ParityRetrieval"):
            hf = float(rng.uniform(0.2, 0.9))
            expected = (
                hf if case == "model-a" else hf + float(rng.normal(scale=1e-4))
            )  # model-a: hf delta exactly 0
            scores = {
                "hf": hf,
                "vllm-v1": hf + float(rng.normal(scale=1e-5)),
                "vllm-v2": hf + float(rng.normal(scale=1e-3)),
            }
            for runner, score in scores.items():
                metrics = [] if runner == "hf" else [("main_score_delta_vs_hf", abs(score - hf))]
                metrics.append(("main_score_delta_vs_expected", abs(score - expected)))
                results.append(
                    Result(
                        case_id=f"{case}:{task}",
                        family="mteb",
                        task="embed",
                        runner=runner,
                        runner_label=runner,
                        status="pass" if all(v <= BOUND for _, v in metrics) else "fail",
                        info={
                            "main_score": score,
                            "main_metric": "m",
                            "hf": hf,
                            "expected": expected,
                        },
                        metrics=[
                            MetricOut(name=n, value=v, bound=BOUND, ok=v <= BOUND)
                            for n, v in metrics
                        ],
                    )
                )
    return Report(
        harness_version="0",
        matrix="mteb.yaml",
        matrix_sha256="0",
        device="cpu",
        started="t",
        results=results,
    )


def _by_gid(fig):
    (ax,) = fig.axes
    return ax, {c.get_gid(): c.get_offsets() for c in ax.collections if c.get_gid()}


def test_the_plotted_points_are_the_deltas_on_a_log_axis():
    report = synthetic_report()
    fig = mteb_report.figure(report)
    ax, pts = _by_gid(fig)
    assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    ys = ax.get_yticks()
    y_of = dict(zip(labels, ys))
    for name, ref in (
        ("main_score_delta_vs_hf", "hf"),
        ("main_score_delta_vs_expected", "expected"),
    ):
        want = {}
        for r in report.results:
            if name == "main_score_delta_vs_hf" and r.runner == "hf":
                continue
            delta = abs(r.info["main_score"] - r.info[ref])
            want[y_of[f"{r.case_id} · {r.runner}"]] = max(delta, mteb_report.FLOOR)
        got = {
            float(round(y)): float(x) for x, y in pts[name]
        }  # each kind is drawn a little off its row
        assert got.keys() == want.keys()
        for y, x in want.items():
            assert got[y] == pytest.approx(x, rel=1e-9)
    # an exact 0 (model-a's hf against the expected score it recorded) sits on the floor
    floor_y = y_of["model-a:ParitySTS · hf"]
    assert {float(round(y)): float(x) for x, y in pts["main_score_delta_vs_expected"]}[
        floor_y
    ] == mteb_report.FLOOR
    # one bound tick per row, at the bound
    assert sorted(float(y) for _, y in pts["bound"]) == sorted(float(y) for y in ys)
    assert {float(x) for x, _ in pts["bound"]} == {BOUND}
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_the_page_puts_the_svg_chart_beside_the_score_table(tmp_path):
    report = synthetic_report()
    paths = mteb_report.write(report, tmp_path)
    page = paths["html"].read_text()
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.index("<table") < page.index("<svg") and "data:image" not in page
    scores = {f"{r.info['main_score']:.6f}" for r in report.results}
    assert all(s in page for s in scores)
