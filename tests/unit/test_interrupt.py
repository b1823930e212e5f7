"""The run's signal handling (harness.run.interrupt), in this process: a first SIGTERM or SIGINT
raises Interrupted naming it; once every result is in, a first signal lets the report finish."""

import os
import signal

import pytest

from harness.run import interrupt
from harness.runners import pool


def _wait_for_handler() -> None:
    # a handler runs between bytecodes of the main thread: a call gives it its turn
    for _ in range(1000):
        pass


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_first_signal_interrupts_and_names_itself(sig):
    name = signal.Signals(sig).name
    before = signal.getsignal(sig)
    with pytest.raises(interrupt.Interrupted) as caught:
        with interrupt.handling():
            os.kill(os.getpid(), sig)
            _wait_for_handler()
    assert caught.value.signame == name and name in interrupt.reason(caught.value)
    assert isinstance(caught.value, KeyboardInterrupt)  # every Ctrl-C path keeps results
    # handling() ended: the previous handlers are back, and workers may start again
    assert signal.getsignal(sig) == before and not pool.stopping()


def test_once_every_result_is_in_a_first_signal_lets_the_report_finish():
    with interrupt.handling():
        interrupt.finishing()
        os.kill(os.getpid(), signal.SIGTERM)
        _wait_for_handler()
        assert interrupt.received() == ["SIGTERM"]  # noted, not raised
    assert interrupt.received() == []


def test_a_signal_while_planning_says_nothing_ran():
    with interrupt.handling():  # its end clears the finishing state while_planning sets
        why = interrupt.while_planning(interrupt.Interrupted("SIGTERM"))
    assert why == "interrupted (SIGTERM) while planning: no case ran"
