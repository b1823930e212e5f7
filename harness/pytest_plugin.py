"""pytest plugin: a matrix becomes test items, one per (case, compared runner).

    pytest --pyargs harness.matrix_tests --parity-matrix matrices/pooling.yaml -n 2 --dist loadgroup
    pytest ... --parity-against golden       # compare to committed goldens, no HF process
    pytest ... --parity-update-golden -k bert        # rewrite goldens of the selected cases first

Every option carries the `--parity-` prefix: the plugin loads into any environment that installs
the harness (a vLLM development environment included), where a bare `--matrix` could clash.

Any test that takes the `parity_result` fixture is parametrised over the matrix, derived check
cases included; ids are `<case>:<runner>`, sorted, so every xdist worker collects the same list.
Cases that share a model carry one `xdist_group`; xdist's loadgroup scheduler reads the group from
a `@group` suffix of the node id, which xdist 3.8 writes to `item._nodeid`, an attribute pytest
9.2 no longer reads: we write the suffix where the installed pytest keeps the node id, so a model
loads on one worker only. Nothing is built or run at collection time: the first item of a
group runs that group's cases on every runner (the same machinery as `parity run`), the rest
reuse the result. At the end the session writes report.json / report.md / junit.xml.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.matrix.loader import model_group
from harness.matrix.runner_names import RUNNER_NAMES
from harness.matrix.schema import Case, Matrix, MatrixError
from harness.run.matrices import load_matrix

DEFAULT_MATRIX = "matrices/ci.yaml"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("parity", "pooling parity matrix")
    g.addoption(
        "--parity-matrix",
        default=None,
        help=f"matrix YAML to expand into tests (default {DEFAULT_MATRIX})",
    )
    g.addoption(
        "--parity-runners",
        nargs="+",
        default=None,
        choices=RUNNER_NAMES,
        metavar="RUNNER",
        help=f"only these compared runners ({', '.join(r for r in RUNNER_NAMES if r != 'fake')})",
    )
    g.addoption("--parity-out", default=None, help="run folder for outputs, logs and the report")
    g.addoption("--parity-device", default=None, choices=("cpu", "cuda"), help="default: detected")
    g.addoption(
        "--parity-against",
        default="hf",
        choices=("hf", "golden"),
        help="reference: run HF live (default) or read the goldens (no HF process)",
    )
    g.addoption(
        "--parity-golden-dir", default=None, help="golden folder (default <rootdir>/golden)"
    )
    g.addoption(
        "--parity-update-golden",
        action="store_true",
        help="rewrite the goldens of the selected cases from a fresh HF run before comparing",
    )


def _group(case: Case) -> str:
    return "parity-" + model_group(case)


def _matrix(config: pytest.Config) -> Matrix:
    path = config.getoption("--parity-matrix") or str(Path(config.rootpath) / DEFAULT_MATRIX)
    try:
        return load_matrix(path)
    except MatrixError as e:
        raise pytest.UsageError(f"--parity-matrix: {e}") from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "parity_result" not in metafunc.fixturenames:
        return
    from harness.matrix.checks import expand_checks

    matrix = _matrix(metafunc.config)
    only = metafunc.config.getoption("--parity-runners")
    params = []
    for case in expand_checks(matrix.cases):
        for runner in case.compared_runners:
            if only and runner not in only:
                continue
            params.append(
                pytest.param(
                    (matrix.path, case.id, runner),
                    id=f"{case.id}:{runner}",
                    marks=[pytest.mark.xdist_group(_group(case))],
                )
            )
    params.sort(key=lambda p: p.id)
    metafunc.parametrize("parity_result", params, indirect=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        loadgroup = bool(config.getvalue("loadgroup"))
    except (AttributeError, ValueError):
        loadgroup = False
    if not loadgroup:
        return
    for item in items:
        marks = [
            m.args[0]
            for m in item.iter_markers("xdist_group")
            if m.args and str(m.args[0]).startswith("parity-")
        ]
        if marks and not item.nodeid.endswith(f"@{marks[0]}"):
            _set_nodeid(item, f"{item.nodeid}@{marks[0]}")


def _set_nodeid(item: pytest.Item, nodeid: str) -> None:
    """pytest >= 9.2 keeps the node id as `_id` (a NodeId); earlier ones as the string `_nodeid`."""
    if hasattr(item, "_id"):
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(nodeid)
    else:
        item._nodeid = nodeid
    if item.nodeid != nodeid:
        raise pytest.UsageError(
            f"cannot group {nodeid!r} for xdist with this pytest: pin pytest<9.2 or run without -n"
        )


class ParitySession:
    """Runs one model group at a time on demand and keeps the results for the session."""

    def __init__(self, config: pytest.Config, out_dir: Path):
        from harness.runners.platform import Platform, detect_device

        self.config = config
        self.out_dir = out_dir
        self.platform = Platform(config.getoption("--parity-device") or detect_device())
        self.results: dict[tuple[str, str], object] = {}
        self.reports = []

    def result(self, matrix_path: str, case_id: str, runner: str):
        key = (case_id, runner)
        if key not in self.results:
            from harness.matrix.checks import expand_checks
            from harness.run.session import run_cases

            matrix = load_matrix(matrix_path)
            item = next(c for c in expand_checks(matrix.cases) if c.id == case_id)
            case = matrix.case(item.variant_of or item.id)  # a derived check runs with its base
            group = [c for c in matrix.cases if _group(c) == _group(case)]
            only = self.config.getoption("--parity-runners")
            golden_dir = Path(
                self.config.getoption("--parity-golden-dir")
                or Path(self.config.rootpath) / "golden"
            )
            run_dir = self.out_dir / _group(case)
            if self.config.getoption("--parity-update-golden"):
                from harness.run.session import golden_session

                updated = golden_session(
                    matrix, group, run_dir / "golden-update", self.platform, golden_dir, "update"
                )
                self.reports.append(updated)
            report = run_cases(
                matrix,
                expand_checks(group),
                run_dir,
                self.platform,
                runners=only,
                against=self.config.getoption("--parity-against"),
                golden_dir=golden_dir,
            )
            self.reports.append(report)
            for r in report.results:
                self.results[(r.case_id, r.runner)] = r
        return self.results.get(key)


def _out_dir(config: pytest.Config) -> Path:
    out = config.getoption("--parity-out")
    return Path(out) if out else Path(config.rootpath) / "runs" / "pytest"


def _worker_id(config: pytest.Config) -> str | None:
    return getattr(config, "workerinput", {}).get("workerid")


@pytest.fixture(scope="session")
def parity_session(request: pytest.FixtureRequest) -> ParitySession:
    session = ParitySession(
        request.config, _out_dir(request.config) / (_worker_id(request.config) or "main")
    )
    request.config._parity_session = session  # type: ignore[attr-defined]
    return session


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Each process writes the part it ran; the controller (or a run without xdist) merges the
    parts into the run's report.json, report.md, junit.xml and report.html, like `parity run`."""
    from harness.report.model import merge, read_json, write_json
    from harness.report.write import write_all

    config = session.config
    mine = getattr(config, "_parity_session", None)
    if mine is not None and mine.reports:
        write_json(merge(mine.reports, shards=False), mine.out_dir / "part.json")
    if _worker_id(config) is not None:
        return
    out = _out_dir(config)
    parts = sorted(out.glob("*/part.json")) if out.is_dir() else []
    if not parts:
        return
    reports, seen = [], set()
    for p in parts:  # without --dist loadgroup two workers may have run one model group: keep one
        r = read_json(p)
        r.results = [x for x in r.results if (x.case_id, x.runner) not in seen]
        r.references = [x for x in r.references if ("ref", x.case_id) not in seen]
        seen |= {(x.case_id, x.runner) for x in r.results} | {
            ("ref", x.case_id) for x in r.references
        }
        reports.append(r)
    report = merge(reports, shards=False)
    for p in parts:
        p.unlink()
    paths = write_all(report, out)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(
            f"parity report: {paths['json']} · {paths['markdown']} · "
            f"{paths['junit']} · {paths['html']}"
        )


@pytest.fixture
def parity_result(request: pytest.FixtureRequest, parity_session: ParitySession):
    matrix_path, case_id, runner = request.param
    result = parity_session.result(matrix_path, case_id, runner)
    if result is None:
        pytest.fail(f"{case_id} on {runner}: no result was produced", pytrace=False)
    return result


def check(result) -> None:
    """pass -> return; skip/xfail -> pytest outcome; fail/error/xpass -> failure naming the case."""
    where = f"{result.case_id} on {result.runner_label} ({result.where})"
    metrics = "; ".join(
        f"{m.name}={m.value:.3g} (bound {m.bound if m.bound is not None else '-'})"
        for m in result.metrics
    )
    if result.status == "pass":
        return
    if result.status == "skip":
        pytest.skip(f"{where}: {result.reason}")
    if result.status == "xfail":
        pytest.xfail(f"{where}: {result.reason}")
    pytest.fail(
        f"{result.status}: {where}: {result.reason}" + (f"\nmetrics: {metrics}" if metrics else ""),
        pytrace=False,
    )
