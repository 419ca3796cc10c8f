"""The command gate's watch on a driving robot: a path the guard keeps refusing, a robot that makes no
progress, and how it recovers. Free of ROS; the gate (:mod:`navdeploy.gate`) applies it to every
driver alike.

**Blocked -> re-plan** (:class:`BlockedWatch`). While the scan map has a path (a goal without a
global path, :mod:`navdeploy.scan_map`), a tick is *refused* when the guard scaled the command
(scale < 1) to a planar speed under ``blocked_speed`` while the driver's clamped command asked for at
least ``blocked_speed`` toward the current sub-goal (a positive component along the direction to
it); or, when the driver makes no way toward the sub-goal (a planner that stops itself short of what
the guard would still allow, a policy turning away), when the guard would stop a motion straight
toward the sub-goal short of it (:data:`navcontract.subgoal.OPEN_SLACK`). After ``blocked_time`` of
refused ticks in a row the gate marks the path blocked: the return the
guard stopped the robot before (:func:`navcontract.guard.blocking_beam`) is raised in the map
(:meth:`navdeploy.scan_map.ScanPlanner.block`) and the map plans again at its next update; that tick's
status reason starts with ``replanning``. A robot the guard holds stands about its passing clearance
from that return, where it may move only away from it, so it first backs off as a recovery does (state
``recovering``, below; not counted among the recoveries), then the map plans again from where it got
to. The watch then starts over.

**Stuck -> recovery** (:class:`ProgressChecker`), as Nav2's progress checker and recovery behaviours:
the robot makes progress when its distance to the goal drops ``progress_distance`` below the least it
has had (toward the goal), or its progress along the path in use (a global path or the scan map's)
grows ``progress_distance`` beyond the most it has had on that path (along the path: a detour round
an obstacle counts). Only the ticks in state ``driving`` count; a fault, no goal or the goal reached
restart the clock, and so does the end of a back-off.
With no progress for ``progress_time`` the tick's state is ``stuck`` with a zero command, and the
gate recovers: the return that holds a motion straight toward the sub-goal (if one does) is raised
in the map as a blocked path's is, so that the next plan goes round it; for ``recovery_time`` (state ``recovering``) it sends :func:`recovery_command`, a
planar motion at ``recovery_speed`` away from the returns the scan saw within :data:`BACKOFF_REACH`
(each weighted by the inverse square of its range: away from the nearest, and out between two that
stand on either side; a diff-drive base backs when that direction lies behind, else drives forward),
smoothed and guarded like every driving command (a back-off the guard would hold at zero, into a
blind sector it counts as occupied, boxed in, or by rule step 5 on the base's measured twist, turns
to the direction it lets out: :func:`open_backoff`); then it asks the map for a new plan at once,
resets the driver and drives again (a diff-drive base first turns in place toward the new
sub-goal: :mod:`navdeploy.gate`). Backing off does not count as progress: the least distance to the goal is kept, so a robot that only
moves back and forth stays stuck. After ``max_recoveries`` recoveries without getting
``progress_distance`` closer to the goal, the state stays ``stuck`` with a zero command until a new
goal or path comes: a robot does not dither forever. Getting ``progress_distance`` closer to the goal
than ever before gives it ``max_recoveries`` again.

``blocked_time`` 0 turns the blocked watch off, ``progress_time`` 0 the progress checker (and the
recovery); the node's parameters of the same names set them (:mod:`navdeploy.node_params`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from navcontract.guard import GuardRule, apply_guard
from navcontract.scan import TRAINING_ANGLE_MIN

BACKOFF_REACH = 1.0
"""[m] The returns a back-off moves away from lie within this range of the robot."""
BACKOFF_DIRECTIONS = 36
"""The directions (10 degrees apart) a holonomic back-off the guard holds may turn to (:func:`open_backoff`)."""


@dataclass(frozen=True)
class ProgressRule:
    """The watch's parameters (module doc); times in seconds, distances in metres, speeds in m/s."""

    blocked_time: float = 1.0  # refused this long in a row: the path is blocked (0: off)
    blocked_speed: float = 0.05  # a guarded planar speed under this is "held"; the driver must ask at least this
    progress_time: float = 5.0  # no progress this long: stuck (0: off)
    progress_distance: float = 0.2  # what counts as progress, toward the goal or along the path
    recovery_speed: float = 0.1  # the back-off's planar speed
    recovery_time: float = 1.0  # how long one back-off lasts
    max_recoveries: int = 3  # back-offs without getting closer to the goal before the robot stays stuck

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"progress rule: {f.name} must be a finite number >= 0, got {v!r}")
        for name in ("blocked_speed", "progress_distance", "recovery_speed", "recovery_time"):
            if getattr(self, name) <= 0:
                raise ValueError(f"progress rule: {name} must be > 0, got {getattr(self, name)}")
        if int(self.max_recoveries) != self.max_recoveries:
            raise ValueError(f"progress rule: max_recoveries must be a whole number, got {self.max_recoveries}")

    def describe(self) -> str:
        """One line for the log."""
        blocked = (
            f"path blocked after {self.blocked_time:g} s of the guard holding the command toward the sub-goal "
            f"under {self.blocked_speed:g} m/s (the return raised in the map, a back-off, a new plan round it)"
            if self.blocked_time > 0
            else "blocked watch off (blocked_time 0)"
        )
        if self.progress_time <= 0:
            return f"{blocked}; progress checker off (progress_time 0)"
        return (
            f"{blocked}; stuck after {self.progress_time:g} s without {self.progress_distance:g} m of progress "
            f"toward the goal or along the path, then a back-off at {self.recovery_speed:g} m/s for "
            f"{self.recovery_time:g} s and a new plan, at most {int(self.max_recoveries)} times before staying "
            "stuck with zero"
        )


@dataclass
class BlockedWatch:
    """How long the guard has refused the path (module doc)."""

    rule: ProgressRule
    since: float | None = None  # the first refused tick of the current run

    def clear(self) -> None:
        self.since = None

    def update(self, refused: bool, now: float) -> bool:
        """Fold one tick; True when it ends ``blocked_time`` of refused ticks (the watch starts over)."""
        if not refused or self.rule.blocked_time <= 0:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        if now - self.since >= self.rule.blocked_time - 1e-9:
            self.since = None
            return True
        return False


def refused(target: np.ndarray, sent: np.ndarray, scale: float | None, toward: np.ndarray | None, speed: float) -> bool:
    """Did the guard hold the driver's planar command toward the sub-goal? ``target``: the clamped
    driver command, ``sent``: what went out, ``scale``: the guard's factor, ``toward``: the body-frame
    direction to the sub-goal (None: none), ``speed``: ``blocked_speed``."""
    if scale is None or toward is None or scale >= 1.0:
        return False
    asked = float(np.dot(target[:2], toward))
    return asked >= speed and math.hypot(float(sent[0]), float(sent[1])) < speed


@dataclass
class ProgressChecker:
    """No progress toward the goal or along the path, and the recoveries it led to (module doc)."""

    rule: ProgressRule

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A new goal or path: nothing seen yet, every recovery available."""
        self.best = math.inf  # [m] the least distance to the goal
        self.path_key: Any = None  # which path the progress along it is measured on
        self.path_best = -math.inf  # [m] the most progress along that path
        self.since: float | None = None  # the last progress (None: the clock is not running)
        self.recoveries = 0  # back-offs since the robot last came progress_distance closer to the goal
        self.gave_up = False  # max_recoveries spent: stuck with zero until a new goal or path

    @property
    def active(self) -> bool:
        return self.rule.progress_time > 0

    def pause(self) -> None:
        """A tick in another state than driving: the clock starts again at the next driving tick."""
        self.since = None

    def update(self, now: float, distance: float, path_key: Any, along: float) -> bool:
        """Fold a driving tick at ``distance`` from the goal and ``along`` metres along the path
        ``path_key`` (None: no path); True when there has been no progress for ``progress_time``."""
        d = self.rule.progress_distance
        closer = distance <= self.best - d
        if path_key != self.path_key:  # another path: its progress counts from here
            self.path_key, self.path_best = path_key, along
        further = path_key is not None and along >= self.path_best + d
        if closer:  # the first tick after a reset too: the least distance is then infinite
            self.best, self.recoveries = distance, 0
        if further:
            self.path_best = along
        if closer or further or self.since is None:
            self.since = now
            return False
        return now - self.since >= self.rule.progress_time - 1e-9

    def start_recovery(self) -> bool:
        """The robot is stuck: a recovery may start (True, counted), or ``max_recoveries`` have been
        spent (False: it stays stuck)."""
        self.since = None
        if self.recoveries >= self.rule.max_recoveries:
            self.gave_up = True
            return False
        self.recoveries += 1
        return True


def recovery_command(
    report: Any,
    max_range: float,
    speed: float,
    holonomic: bool,
    guard: GuardRule | None = None,
    motion: np.ndarray | None = None,
    period: float | None = None,
) -> tuple[np.ndarray, str]:
    """The back-off of one tick and what it does, in words: planar motion at ``speed`` away from the
    returns the scan saw within :data:`BACKOFF_REACH` (``report``: the policy's beams and the sectors
    the scan rule filled; a beam at ``max_range`` is no return), the direction ``-sum_j u_j / r_j^2``
    (``u_j`` the unit vector toward return ``j`` at range ``r_j``). A diff-drive base backs when that
    direction lies behind (or abeam), else drives forward. With no return that near (or no report, or
    returns that cancel): straight back. With ``guard`` (the rule the command is then checked by),
    a back-off the guard would hold at zero on this scan (into the lidar's blind sector, which it
    counts as occupied, boxed in, or by rule step 5 on the measured body twist ``motion``, over the
    control ``period``) turns to the direction it lets out (:func:`open_backoff`)."""
    cmd, what = _away_from_returns(report, max_range, speed, holonomic)
    if guard is None or report is None:
        return cmd, what
    return open_backoff(report, max_range, speed, holonomic, guard, cmd, what, motion, period)


def open_backoff(
    report: Any,
    max_range: float,
    speed: float,
    holonomic: bool,
    guard: GuardRule,
    cmd: np.ndarray,
    what: str,
    motion: np.ndarray | None = None,
    period: float | None = None,
) -> tuple[np.ndarray, str]:
    """The back-off ``cmd`` as it is when ``guard`` lets it out at all (:func:`guard_lets_out`: the
    whole rule on the report's beams, the filled sectors unseen, and with ``motion`` rule step 5 on
    it); else, of :data:`BACKOFF_DIRECTIONS` directions around the robot (a diff drive: ahead and
    back), the one the guard lets out most speed along ``cmd``'s direction, or, when none makes way
    along it, the one it lets out fastest (then the nearest to ``cmd``'s direction); ``cmd`` itself
    when the guard holds every direction."""
    ranges = np.asarray(report.ranges, dtype=np.float64)
    seen = ~np.asarray(report.filled, dtype=bool)
    if float(guard_lets_out(ranges, seen, cmd[None], guard, max_range, motion, period)[0]) > 0.0:
        return cmd, what
    if holonomic:
        angles = np.arange(BACKOFF_DIRECTIONS) * (2.0 * math.pi / BACKOFF_DIRECTIONS)
    else:
        angles = np.array([0.0, math.pi])
    options = np.stack([speed * np.cos(angles), speed * np.sin(angles), np.zeros_like(angles)], axis=-1)
    scales = guard_lets_out(ranges, seen, options, guard, max_range, motion, period)
    if scales.max() <= 0.0:
        return cmd, f"{what}; the guard holds every direction"
    asked = math.atan2(float(cmd[1]), float(cmd[0]))
    align = np.cos(angles - asked)
    gain = scales * align
    best = int(np.argmax(gain)) if gain.max() > 0.0 else int(np.argmax(scales + 1e-3 * align))
    bearing = math.degrees(math.atan2(float(options[best, 1]), float(options[best, 0])))
    reason = f"{what}, which the guard holds; toward {bearing:.0f} deg instead, where it lets the robot out"
    return options[best], reason


def guard_lets_out(
    ranges: np.ndarray,
    seen: np.ndarray,
    commands: np.ndarray,
    guard: GuardRule,
    max_range: float,
    motion: np.ndarray | None,
    period: float | None,
) -> np.ndarray:
    """(K,) the share of each planar command ``commands`` (K, 3) the guard lets out on one scan
    (:func:`navcontract.guard.apply_guard`'s scale: 0 where it holds it, by steps 0-4 or, given the
    measured body twist ``motion`` (3,), by rule step 5)."""
    k = len(commands)
    _, scale = apply_guard(
        np.broadcast_to(ranges, (k, len(ranges))),
        commands,
        guard,
        max_range,
        np.broadcast_to(seen, (k, len(seen))),
        motion=None if motion is None else np.broadcast_to(np.asarray(motion, dtype=np.float64), (k, 3)),
        period=period,
    )
    return np.asarray(scale, dtype=np.float64).reshape(k)


def _away_from_returns(report: Any, max_range: float, speed: float, holonomic: bool) -> tuple[np.ndarray, str]:
    back = np.array([-speed, 0.0, 0.0])
    if report is None:
        return back, "backing off (no scan report)"
    ranges = np.asarray(report.ranges, dtype=np.float64)
    near = ~np.asarray(report.filled, dtype=bool) & (ranges < min(max_range, BACKOFF_REACH))
    theta = TRAINING_ANGLE_MIN + np.arange(len(ranges)) * 2.0 * math.pi / len(ranges)
    r = np.maximum(ranges[near], 1e-3)
    away = -np.array([np.sum(np.cos(theta[near]) / r**2), np.sum(np.sin(theta[near]) / r**2)])
    norm = float(np.hypot(*away))
    if norm < 1e-9:
        return back, f"backing off (no return within {BACKOFF_REACH:g} m pushes any way)"
    nearest = f"nearest return {float(r.min()):.2f} m"
    if not holonomic:
        forward = away[0] > 1e-9
        what = "driving forward" if forward else "backing"
        return np.array([speed if forward else -speed, 0.0, 0.0]), f"{what} away from the returns ({nearest})"
    bearing = math.degrees(math.atan2(away[1], away[0]))
    cmd = np.array([speed * away[0] / norm, speed * away[1] / norm, 0.0])
    return cmd, f"moving away from the returns toward {bearing:.0f} deg ({nearest})"
