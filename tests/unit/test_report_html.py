"""report.html: self-contained, every section present, one chart mark per bounded metric placed by
value / bound against the bound line, failures before passes, log tails folded, text escaped."""

import math
import re
from html.parser import HTMLParser

from harness.report.html import to_html
from harness.report.margin_chart import FLOOR
from harness.report.model import AuditRow, MetricOut, Report, Result
from harness.report.write import write_all

SECTIONS = ("summary", "failures", "margins", "divergences", "audit", "results", "provenance")
TAIL = "Traceback: worker exploded at line 7"


def _m(name, value, bound):
    return MetricOut(name=name, value=value, bound=bound, ok=bound is None or value <= bound)


def _res(case, status, metrics, family="fam-a", reason="", runner="vllm-v2", **kw):
    return Result(
        case_id=case,
        family=family,
        task="embed",
        runner=runner,
        runner_label=f"{runner} label",
        status=status,
        reason=reason,
        metrics=metrics,
        **kw,
    )


def sample_report() -> Report:
    results = [
        _res("a-pass", "pass", [_m("max_abs", 1e-7, 1e-5), _m("cosine_distance", 0.0, 1e-6)]),
        _res(
            "b-close",
            "pass",
            [_m("max_abs", 9e-6, 1e-5), _m("rank_disagreement", 0.0, 0.0)],
            family="fam-b",
        ),
        _res(
            "c-fail",
            "fail",
            [_m("max_abs", 3e-3, 1e-5), _m("info_only", 5.0, None)],
            family="fam-b",
            reason="max_abs 0.003 > 1e-05",
        ),
        _res(
            "d-error",
            "error",
            [],
            reason=f"worker died <script>alert(1)</script>\n--- worker log tail ---\n{TAIL}",
        ),
        _res(
            "e-xfail",
            "xfail",
            [_m("max_abs", 0.5, 1e-5)],
            reason="expected divergence: known",
            envelope={"max_abs": 0.6},
        ),
        _res("f-skip", "skip", [], reason="no model here"),
    ]
    return Report(
        harness_version="0",
        matrix="m.yaml",
        matrix_sha256="abc123",
        device="cpu",
        started="t0",
        git_commit="deadbeef",
        command=["parity", "run", "-k", "a & b"],
        results=results,
        audit=[
            AuditRow(
                family="fam-a", case_id="a-pass", expected="v2", actual="v1", why="<no triton>"
            )
        ],
    )


class Page(HTMLParser):
    """What the tests look at: ids, chart marks, the bound line, text in order, text inside <details>."""

    def __init__(self):
        super().__init__()
        self.ids, self.marks, self.bound, self.texts, self.in_details = set(), [], None, [], 0
        self.details_text, self.outside_details, self.tags, self.urls = [], [], [], []
        self.section, self.by_section = None, {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        self.ids.add(a.get("id"))
        self.urls += [v for k, v in attrs if k in ("src", "href") and v and not v.startswith("#")]
        if "mark" in (a.get("class") or "").split():
            if tag == "circle":
                x = float(a["cx"])
            else:
                xs = [float(p.split(",")[0]) for p in a["points"].split()]
                x = (min(xs) + max(xs)) / 2
            self.marks.append({**a, "x": x})
        if a.get("id") == "bound-line":
            self.bound = float(a["x1"])
        if tag == "details":
            self.in_details += 1
        if tag == "section":
            self.section = a.get("id")

    def handle_endtag(self, tag):
        if tag == "details":
            self.in_details -= 1
        if tag == "section":
            self.section = None

    def handle_data(self, data):
        self.texts.append(data)
        (self.details_text if self.in_details else self.outside_details).append(data)
        if self.section:
            self.by_section[self.section] = self.by_section.get(self.section, "") + data


def parse(text: str) -> Page:
    p = Page()
    p.feed(text)
    return p


def test_every_section_and_one_mark_per_bounded_metric_against_the_bound_line():
    report = sample_report()
    page = parse(to_html(report))
    assert set(SECTIONS) <= page.ids and page.bound is not None
    bounded = [(r.case_id, m) for r in report.results for m in r.metrics if m.bound is not None]
    assert len(page.marks) == len(bounded)
    marks = {(k["data-case"], k["data-metric"]): k for k in page.marks}
    for case, m in bounded:
        mark = marks[(case, m.name)]
        ratio = float(mark["data-ratio"])
        if m.value == 0:  # a log axis has no 0: drawn at the floor, hollow, and said so
            assert ratio == FLOOR and "floored" in mark["class"] and mark["x"] < page.bound
            continue
        assert math.isclose(ratio, m.value / m.bound, rel_tol=1e-5)
        assert (mark["x"] > page.bound) == (
            m.value > m.bound
        )  # right of the line = outside the bound
    # the 0.9-of-bound pass sits visibly closer to the line than the 1e-2 one
    near, far = marks[("b-close", "max_abs")]["x"], marks[("a-pass", "max_abs")]["x"]
    assert far < near < page.bound and page.bound - near < (page.bound - far) / 10
    states = {
        k["data-case"]: k["class"].split()[1] for k in page.marks if k["data-metric"] == "max_abs"
    }
    assert states == {"a-pass": "ok", "b-close": "ok", "c-fail": "over", "e-xfail": "expected"}


def test_failures_come_first_with_reasons_and_log_tails_folded():
    page = parse(to_html(sample_report()))
    text = "".join(page.texts)
    assert text.index("c-fail") < text.index("a-pass") and text.index("d-error") < text.index(
        "a-pass"
    )
    assert TAIL in "".join(page.details_text) and TAIL not in "".join(
        page.outside_details
    )  # folded
    assert "worker died <script>alert(1)</script>" in "".join(
        page.outside_details
    )  # the reason itself is not
    assert "max_abs 0.003 > 1e-05" in page.by_section["failures"]


def test_text_is_escaped_and_nothing_is_fetched():
    doc = to_html(sample_report())
    page = parse(doc)
    assert "script" not in page.tags and "<script>" not in doc and "&lt;script&gt;" in doc
    assert "&lt;no triton&gt;" in doc and "a &amp; b" in doc
    assert page.urls == [] and not re.search(r"@import|url\(", doc)


def test_envelope_provenance_and_audit_are_shown():
    report = sample_report()
    sections = parse(to_html(report)).by_section
    (xf,) = [r for r in report.results if r.status == "xfail"]
    env = xf.envelope["max_abs"]
    assert "e-xfail" in sections["divergences"] and f"{env:.3g}" in sections["divergences"]
    assert (
        f"{xf.metrics[0].value / env:.2g}" in sections["divergences"]
    )  # how much of its envelope it uses
    for fact in (report.git_commit, report.matrix_sha256, report.device, "parity run -k 'a & b'"):
        assert fact in sections["provenance"]
    assert (
        "a-pass" in sections["audit"]
        and "V1" in sections["audit"]
        and "<no triton>" in sections["audit"]
    )


def test_write_all_writes_the_page(tmp_path):
    paths = write_all(sample_report(), tmp_path)
    assert paths["html"] == tmp_path / "report.html"
    assert set(SECTIONS) <= parse(paths["html"].read_text()).ids


def test_a_skipped_reference_is_not_listed_as_a_reference_problem():
    """A reference the plan left out (no row judged against it: each a platform skip) or one that
    skipped is no problem: its rows say why they did not run. An errored one is listed."""
    from harness.report.markdown import to_markdown
    from harness.report.model import ReferenceResult

    report = sample_report()
    report.references = [
        ReferenceResult(case_id="idle-case", status="skip", reason="not run: no row is judged"),
        ReferenceResult(case_id="broken-case", status="error", reason="recipe crashed"),
    ]
    for text in (to_markdown(report), to_html(report)):
        assert "Reference (hf) problems" in text and "broken-case" in text
        assert "idle-case" not in text
    report.references = report.references[:1]
    assert "Reference (hf) problems" not in to_markdown(report)
    assert "Reference (hf) problems" not in to_html(report)
