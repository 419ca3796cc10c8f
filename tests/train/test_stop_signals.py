"""StopSignals: a stop request reaches the run even when the first KeyboardInterrupt is lost.

Python drops an exception raised inside a finaliser (``__del__``), which is where a signal lands
when it arrives while a warp array is being freed; the run must still stop at its next iteration
boundary, and once the interrupt reached its handler, further signals wait for the save.
"""

from __future__ import annotations

import gc
import signal

import pytest

from navtrain.runner import StopSignals

# the dropped KeyboardInterrupt is what these tests make happen
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class _RaisesInFinaliser:
    """Delivers a signal to ``stop`` while being freed, as a signal during a warp array's __del__."""

    def __init__(self, stop: StopSignals) -> None:
        self.stop = stop

    def __del__(self) -> None:
        self.stop._handle(signal.SIGINT, None)


def test_an_interrupt_lost_in_a_finaliser_is_raised_again_at_the_next_check() -> None:
    stop = StopSignals()
    _RaisesInFinaliser(stop)  # freed at once; its KeyboardInterrupt is printed and dropped
    gc.collect()
    assert stop.requested == signal.SIGINT
    with pytest.raises(KeyboardInterrupt):
        stop.check()


def test_a_second_signal_raises_while_the_first_was_not_acknowledged() -> None:
    stop = StopSignals()
    _RaisesInFinaliser(stop)
    gc.collect()
    with pytest.raises(KeyboardInterrupt):
        stop._handle(signal.SIGTERM, None)


def test_after_acknowledge_signals_wait_and_check_is_quiet(capsys) -> None:
    stop = StopSignals()
    with pytest.raises(KeyboardInterrupt):
        stop._handle(signal.SIGINT, None)
    stop.acknowledge()
    stop._handle(signal.SIGTERM, None)  # does not raise: the save in progress finishes
    stop.check()
    assert "still saving" in capsys.readouterr().err


def test_a_signal_inside_a_deferred_block_is_raised_when_the_outermost_block_ends() -> None:
    stop = StopSignals()
    reached_end_of_inner = False
    with pytest.raises(KeyboardInterrupt):
        with stop.deferred():
            with stop.deferred():
                stop._handle(signal.SIGINT, None)
            reached_end_of_inner = True
    assert reached_end_of_inner
    assert stop.requested == signal.SIGINT


def test_no_request_no_interrupt() -> None:
    stop = StopSignals()
    with stop.deferred():
        pass
    stop.check()
    assert stop.requested is None


def test_a_recipe_stops_on_sigint_even_when_started_with_sigint_ignored() -> None:
    """A script's ``nohup nav-recipe run ... &`` starts it with SIGINT ignored; outside nav-train the
    recipe still turns SIGINT (and SIGTERM) into KeyboardInterrupt, and puts the old handlers back."""
    import os
    import time

    from navtrain.recipe_run import Interrupts

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with Interrupts():
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1.0)  # the handler raises before this sleep ends
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
