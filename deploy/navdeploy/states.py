"""What a control tick decides: the command gate's states and the result of one tick."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from navcontract.scan import ScanReport


class State(StrEnum):
    WAITING_INPUT = "waiting_input"  # no scan or odometry received yet
    NO_GOAL = "no_goal"  # no goal pose and no path
    DRIVING = "driving"
    GOAL_REACHED = "goal_reached"
    STALE_SCAN = "stale_scan"
    STALE_ODOM = "stale_odom"
    BAD_SCAN = "bad_scan"  # unreadable or malformed scan, or no valid reading at all
    BLIND_SCAN = "blind_scan"  # too few valid readings, or a blind gap in front: the fill would invent it
    LOW_COVERAGE = "low_coverage"  # the scan covers too little of the trained field of view
    BAD_ODOM = "bad_odom"
    CLOCK_STALLED = "clock_stalled"  # use_sim_time and /clock stopped advancing (wall-time watchdog)
    CLOCK_ENDED = "clock_ended"  # use_sim_time and /clock stopped with no publisher left: the sim or bag ended
    CLOCK_MISMATCH = "clock_mismatch"  # stamps and the node's clock over an hour apart: sim and wall time mixed
    STUCK = "stuck"  # no progress toward the goal for progress_time: zero, then a recovery (or none left)
    RECOVERING = "recovering"  # backing off from the nearest return after stuck (a guarded command)
    ERROR = "error"


FAULT_STATES = {
    State.STALE_SCAN,
    State.STALE_ODOM,
    State.BAD_SCAN,
    State.BLIND_SCAN,
    State.LOW_COVERAGE,
    State.BAD_ODOM,
    State.CLOCK_STALLED,
    State.CLOCK_MISMATCH,
    State.ERROR,
}
"""States the node reports as a fault (a warning in its log). ``clock_ended`` is none: a simulation
or bag that ends is a normal end (an info line), though the command is zero all the same."""

MOVING_STATES = {State.DRIVING, State.RECOVERING}
"""States whose command is not a zero: it goes through the velocity smoother and the guard
(:meth:`navdeploy.gate.CommandGate.tick`); every other state sends an exact zero. ``stuck`` is no
fault (the node logs it as a warning, once each time it is entered; :mod:`navdeploy.progress`)."""

WATCHDOG_STATES = {State.CLOCK_STALLED, State.CLOCK_ENDED}
"""States of the wall-time clock watchdog (:class:`navdeploy.inputs.ClockWatchdog`): published between
control ticks while /clock does not advance, never by a control tick."""

SCAN_FAULT_STATE = {
    "too_few_valid": State.BLIND_SCAN,
    "blind_front": State.BLIND_SCAN,
    "low_coverage": State.LOW_COVERAGE,
}
"""The state of a scan refused for a named reason (``ScanUnusable.code``); any other reason: BAD_SCAN."""


@dataclass
class TickResult:
    cmd: np.ndarray
    state: State
    reason: str
    distance: float | None  # to the goal, when pose and goal are known
    inference_ms: float | None  # of this tick, when the policy ran
    scan_fault: str | None = None  # ScanUnusable.code when the scan was refused
    scan_report: ScanReport | None = None  # what the policy saw of this tick's scan (when resampled)
    path_in_use: bool = False  # a path is set: the policy's goal is its sub-goal
    subgoal: tuple[float, float] | None = None  # the path's sub-goal of this tick (odometry frame)
    path_remaining: float | None = None  # [m] path distance still to go, with the sub-goal
    guard_scale: float | None = None  # the guard's factor on (vx, vy) this tick (1: not slowed); None: not run
