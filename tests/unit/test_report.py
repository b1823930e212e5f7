import xml.etree.ElementTree as ET

from harness.report.junit import to_junit
from harness.report.markdown import to_markdown
from harness.report.model import MetricOut, Report, Result


def _report(*statuses):
    results = [
        Result(
            case_id=f"case-{i}",
            family="fam",
            task="embed",
            runner="vllm-v2",
            runner_label="vLLM V2 on CPU, interpreted Triton kernels",
            status=s,
            reason="" if s == "pass" else f"why {s}",
            metrics=[
                MetricOut(
                    name="max_abs", value=1e-7 if s == "pass" else 0.3, bound=1e-5, ok=s == "pass"
                )
            ],
        )
        for i, s in enumerate(statuses)
    ]
    return Report(
        harness_version="0",
        matrix="m.yaml",
        matrix_sha256="0",
        device="cpu",
        started="now",
        results=results,
    )


def test_exit_code_follows_verdicts():
    assert _report("pass", "skip", "xfail").exit_code() == 0
    for bad in ("fail", "error", "xpass"):
        assert _report("pass", bad).exit_code() == 1
    partial = _report("pass")
    partial.partial = True
    assert partial.exit_code() == 1


def test_junit_is_valid_and_counts():
    root = ET.fromstring(to_junit(_report("pass", "fail", "error", "skip", "xfail")))
    suite = root.find("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "1" and suite.get("errors") == "1"
    assert suite.get("skipped") == "2"
    failure = suite.find("testcase[@name='case-1[vllm-v2]']/failure")
    assert failure is not None and failure.get("message") == "why fail"


def test_markdown_lists_failures_first_with_metric_and_bound():
    md = to_markdown(_report("pass", "fail"))
    rows = [ln for ln in md.splitlines() if ln.startswith("| `case")]
    assert rows[0].startswith("| `case-1`") and "**fail**" in rows[0]
    assert "max_abs 3.00e-01 > 1.00e-05" in rows[0] and "interpreted Triton kernels" in rows[0]
    assert md.startswith("## ❌ parity FAILED")


def test_expected_divergences_are_listed_apart_with_numbers():
    md = to_markdown(_report("pass", "xfail"))
    table, apart = md.split("### Expected divergences", 1)
    assert "case-1" not in table and "case-1" in apart and "3.00e-01" in apart
    assert md.startswith("## ✅ parity passed")


def test_markdown_folds_passes_per_family_and_stays_under_the_comment_limit():
    import random

    random.seed(0)
    big = _report(*(["pass"] * 4000 + ["fail"] * 1500 + ["error"] * 500))
    for r in big.results:
        r.reason = r.reason * 40  # long reasons
    md = to_markdown(big)
    assert len(md) < 60_000
    # errors first, then what the limit cut, then the passes folded
    assert md.index("**error**") < md.index("more rows not shown") < md.index("4000 passes")
    assert "report.json" in md
    small = to_markdown(_report("pass", "pass", "fail"))
    assert (
        "<details><summary>2 passes" in small
        and "| fam | 2 | vllm-v2 | `case-0` on vllm-v2: 0.01 of its bound |" in small
    )
    assert "`case-0` | vLLM" not in small  # a pass is not a row of its own


def test_a_run_where_everything_skipped_does_not_pass():
    skipped = _report("skip", "skip")
    assert skipped.ok and skipped.nothing_compared and skipped.exit_code() == 4
    assert to_markdown(skipped).startswith("## ⚠️ NOTHING COMPARED")
    assert _report("skip", "pass").exit_code() == 0


def test_a_reason_the_table_cuts_is_given_whole_below_it():
    # a served failure's reason: the server log's first error (the root cause) after 300 chars
    report = _report("pass", "error", "fail")
    root = "ValueError: vLLM only supports modules_to_save being None."
    report.results[1].reason = (
        "engine/model failed to load: ServerFailure: vllm serve exited with code 1\n"
        + "--- server log, first error (line 60 of 178) ---\n"
        + "x" * 400
        + f"\n{root}\n--- server log tail ---\n~~~ end"
    )
    md = to_markdown(report)
    table, details = md.split("### Why, in full", 1)
    assert root not in table  # cut at 300 characters there
    assert root in details and "<code>case-1</code>" in details
    assert "~~~text" in details and "~ ~ ~ end" in details  # the fence cannot be closed early
    assert "case-2" not in details  # a short one-line reason is whole in the table already
    assert "### Why, in full" not in to_markdown(_report("pass", "fail"))
