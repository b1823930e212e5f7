"""`parity power` under a signal: every `parity run` below it is stopped (harness.run.interrupt's
handler), the mutations judged before it are kept and the report is written, marked partial."""

import json
import signal

import pytest

from harness.power import cli
from harness.runners import pool


def _no_handler(signum, frame):
    raise AssertionError("SIGTERM reached the test: parity power installed no handler")


@pytest.fixture
def guarded():
    before = signal.signal(signal.SIGTERM, _no_handler)  # without power's own handler: a fail
    yield
    signal.signal(signal.SIGTERM, before)


def test_a_signal_keeps_what_was_judged_and_writes_a_partial_report(tmp_path, monkeypatch, guarded):
    def fake_run_power(mutations, *args, outcomes, **kw):
        outcomes[0].status, outcomes[0].reason = "caught", "judged before the signal"
        # while the second mutation's run is in flight. raise_signal delivers it to this thread
        # and runs the Python handler before returning; os.kill(getpid) may be taken by another
        # thread of the process, which a loaded host can leave unscheduled past any fixed wait
        signal.raise_signal(signal.SIGTERM)
        raise AssertionError("the signal did not stop the run")

    monkeypatch.setattr(cli, "run_power", fake_run_power)
    names = ["normalize_l1", "mean_pool_segment_overrun"]
    code = cli.main(["--only", *names, "--out", str(tmp_path)])
    assert code == 1  # an interrupted catalogue proves nothing about the rest
    got = json.loads((tmp_path / "power.json").read_text())
    assert got["partial_reason"].startswith("interrupted (SIGTERM)")
    statuses = {m["name"]: (m["status"], m["reason"]) for m in got["mutations"]}
    assert statuses["normalize_l1"] == ("caught", "judged before the signal")
    assert statuses["mean_pool_segment_overrun"][0] == "interrupted"
    assert "**Partial: interrupted (SIGTERM)" in (tmp_path / "power.md").read_text()
    assert not pool.stopping()  # handling() ended: workers may start again in this process


def test_without_a_signal_the_report_is_whole(tmp_path, monkeypatch, guarded):
    def fake_run_power(mutations, *args, outcomes, **kw):
        for o in outcomes:
            o.status = "caught"
        return outcomes

    monkeypatch.setattr(cli, "run_power", fake_run_power)
    assert cli.main(["--only", "normalize_l1", "--out", str(tmp_path)]) == 0
    got = json.loads((tmp_path / "power.json").read_text())
    assert "partial_reason" not in got and got["mutations"][0]["status"] == "caught"
    assert "Partial" not in (tmp_path / "power.md").read_text()


def test_a_stop_state_left_by_an_earlier_command_does_not_swallow_the_signal(
    tmp_path, monkeypatch, guarded
):
    from harness.run import interrupt

    interrupt.finishing()  # what a command run before in this process may leave set
    test_a_signal_keeps_what_was_judged_and_writes_a_partial_report(tmp_path, monkeypatch, None)
