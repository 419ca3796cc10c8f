"""Clocks at the gate's inputs: stamps in another time base than the node's clock (``clock_mismatch``)
and the wall-time clock watchdog's two states (``clock_stalled`` while /clock still has a publisher,
``clock_ended`` once none is left)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import support.ros as h
from navdeploy.gate import CommandGate
from navdeploy.inputs import CLOCK_MISMATCH_S, ClockWatchdog, clock_mismatch
from navdeploy.runtime import PolicyRuntime, ScanInput, ScanUnusable
from navdeploy.settings import Limits
from navdeploy.states import FAULT_STATES, WATCHDOG_STATES, State

WALL = 1_796_280_949.0  # a wall-clock time [s]


@pytest.fixture(scope="module")
def gate(tmp_path_factory) -> CommandGate:
    rt = PolicyRuntime.load(h.write_goal_seeking_bundle(tmp_path_factory.mktemp("bundle")))
    return CommandGate(rt, Limits(1.5, 2.0, True), 0.3, 0.5, scan_errors=(ScanUnusable,))


def _feed(gate: CommandGate, stamp: float) -> None:
    gate.set_scan(ScanInput.training_beams(np.full(72, 3.0), 72, 6.0), stamp)
    gate.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), stamp, "odom")
    gate.set_goal(3.0, 0.0, "odom")


def test_stamps_an_hour_off_the_clock_are_a_mismatch_not_stale(gate: CommandGate) -> None:
    _feed(gate, 12.0)  # simulated time, node on wall time (use_sim_time false beside the sim)
    r = gate.tick(WALL)
    assert r.state == State.CLOCK_MISMATCH and not r.cmd.any() and r.state in FAULT_STATES
    assert "scan stamped 12.000 s" in r.reason and "set use_sim_time true" in r.reason
    _feed(gate, WALL)  # wall time, node on /clock
    r = gate.tick(30.0)
    assert r.state == State.CLOCK_MISMATCH and "set use_sim_time false" in r.reason
    _feed(gate, 12.0)  # an hour is a late message, not another clock
    assert gate.tick(12.0 + CLOCK_MISMATCH_S).state == State.STALE_SCAN
    assert gate.tick(12.0 + 0.2).state == State.DRIVING


def test_clock_mismatch_hints() -> None:
    assert clock_mismatch("scan", 5.0, 5.0 + CLOCK_MISMATCH_S) is None
    assert "wall time and the stamps are simulated" in clock_mismatch("odometry", 3.0, WALL)
    assert "simulated time (use_sim_time true, /clock) and the stamps are wall time" in clock_mismatch(
        "scan", WALL, 3.0
    )
    both_wall = clock_mismatch("scan", WALL - 7200.0, WALL)
    assert both_wall.startswith("scan stamped") and "mixed?" in both_wall


def test_watchdog_says_stalled_while_published_and_ended_once_not() -> None:
    w = ClockWatchdog(0.5)
    assert w.check(0.0, 100.0) is None  # no /clock yet: nothing to cancel
    assert w.check(2.0, 100.0) is None and w.check(2.0, 100.4) is None
    stalled = w.check(2.0, 100.6, lambda: True)
    assert stalled.state == State.CLOCK_STALLED and not stalled.cmd.any() and "clock_timeout" in stalled.reason
    ended = w.check(2.0, 100.7, lambda: False)
    assert ended.state == State.CLOCK_ENDED and not ended.cmd.any() and "no publisher left" in ended.reason
    assert State.CLOCK_ENDED not in FAULT_STATES and WATCHDOG_STATES == {State.CLOCK_STALLED, State.CLOCK_ENDED}
    asked = []
    assert w.check(2.1, 100.8, lambda: asked.append(1) or True) is None and not asked  # advancing: never asked
    assert math.isclose(w.timeout, 0.5)
