"""The command gate: the safety layer between the driver and ``/cmd_vel``, free of ROS.

:class:`CommandGate` keeps the latest scan, odometry and goal (or path) with the time each was taken,
and on every control tick decides between a zero command (no goal, goal reached, stale or unusable
input, any error) and the driver's command, clamped to the limits, acceleration-limited by the
velocity smoother (``navdeploy.smoother``; never applied to a zero: a stop goes out at once) and
checked last by the collision guard; for a diff-drive base (``Limits.drive``) every command that
leaves the gate has ``vy`` exactly 0.0. The driver is what the node's ``controller`` parameter names: the bundle's
policy (``navdeploy.runtime``, which owns the observation and the action scaling) or the DWA
baseline (``navdeploy.dwa``); the gate is the same for both. Times are ROS times in seconds
(simulated time under ``use_sim_time``).

This is the one implementation of those rules. The ROS node (``nav_policy.policy_node``) wires it
to topics, and the bag replay's offline reference (``navbags.reference``) drives it with messages
decoded from a bag. Both hand their messages to the same duck-typed adapters
(:meth:`CommandGate.scan_message`, :meth:`~CommandGate.odom_message`,
:meth:`~CommandGate.goal_message`, :meth:`~CommandGate.path_message`, reading them with
:mod:`navdeploy.inputs`), so how a message is folded into the gate's state also exists once. Both
build the gate from the node's parameters with :func:`navdeploy.settings.resolve_settings`.

Path following: with a path set (:meth:`CommandGate.set_path`), the final goal is the path's last
point, and each tick the driver is given the sub-goal of the lookahead rule
(:func:`navcontract.subgoal.follow_path`, the same code training runs) instead of the goal pose.
With the guard on, a sub-goal whose straight line the guard would cut short on this tick's scan (a
robot drifted off the path beside a post or a wall's end) is turned toward the furthest point of the
path before it whose straight line the guard leaves open, at the same distance from the robot
(:func:`navcontract.subgoal.open_subgoal`, which training applies too): the driver sees a goal at
the distance it was trained with, in a direction it can go. A new goal pose,
or an empty path, ends path following. Whatever the mode, a sub-goal is never within the goal
tolerance plus :data:`SUBGOAL_REACH` of the robot (:func:`beyond_tolerance`).

Scan map: with a goal and no path, the gate folds each new scan into the robot's own map and gives
the driver the sub-goal along the path planned on it (:mod:`navdeploy.scan_map`), or the goal
itself when the map has none. Synchronously (``scan_map_worker`` false; the evaluation and the bag
tools), the tick updates the map and plans inline; on a worker (:mod:`navdeploy.scan_worker`, the
node's default) the tick hands the new scan over without waiting and follows the newest plan that
came back. :meth:`CommandGate.start` starts the worker, :meth:`CommandGate.close` stops it.

Collision guard, the last stage: when the bundle carries a ``guard`` section (the guard the policy
was trained driving through, :mod:`navcontract.guard`), the command that will be sent (clamped to
the limits, then acceleration-limited by the smoother) has its planar part scaled by
:func:`navcontract.guard.apply_guard` on the very ranges the driver read this tick
(``last_scan_report.ranges``: the contract's beams, metres), with the sectors the scan rule filled
(``last_scan_report.filled``: outside the lidar's field of view, or without a valid reading) counted
as unseen, and the contract's max range, as training's command stages do with the scan its policy
observed. A cut by the guard goes out as it is, even when it is a bigger change than the smoother
allows, and the smoother remembers what was sent. ``wz`` is never touched; the node's ``guard``
parameter turns it off. The order is the same for every driver. A driver that plans (the DWA) is
handed the rule and the smoother's limits when the gate is built (``configure_guard``,
``configure_accel``) and told after every tick the command that went out (``command_sent``), so that
it plans the motions the guard lets out from where the base really is.

Steering: when the contract's guard steers (``guard.steer`` degrees, :mod:`navcontract.steer`) and
the base is holonomic, the clamped driving command is first turned, within that span, toward the
direction the guard lets out fastest on this tick's ranges (progress along the asked direction), and
the smoother and the guard then take the turned command: the order clamp, steering, smoother,
guard, as training's command stages apply it.

Blocked, stuck and recovery (:mod:`navdeploy.progress`; ``progress`` None: off, as a gate built
without settings has it): while the scan map has a path, a guard that keeps holding the command
toward the sub-goal for ``blocked_time`` marks the path blocked there (reason ``replanning: ...``),
the robot backs off and the map plans again round it. The path is held too when the driver makes no
way toward the sub-goal (it stops itself short, or turns away) while the guard would stop a motion
straight toward the sub-goal more than :data:`navcontract.subgoal.OPEN_SLACK` short of it. A robot that makes no
progress toward the goal or along its path for ``progress_time`` is ``stuck`` (zero): the return
that holds a motion toward the sub-goal (if one does) is raised in the map, the robot backs off, has
the map plan again and drives on; after ``max_recoveries`` it stays ``stuck`` with zero until a new goal or path. A back-off
(state ``recovering``) moves away from the returns near the robot, smoothed and guarded like a
driving command; a diff-drive base then turns in place toward the new sub-goal (state
``recovering``, :data:`TURN_RATE`) before the driver drives again, as it cannot slide back onto its
way. The same for every driver.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from navcontract.guard import GuardRule, apply_guard, blocking_beam, free_distances, guarded_ranges
from navcontract.scan import TRAINING_ANGLE_MIN, LidarMount, ScanReport, ScanUnusable
from navcontract.steer import steer_command
from navcontract.subgoal import OPEN_SLACK, LookaheadRule, follow_path, open_subgoal, path_length
from navdeploy.inputs import (
    MAX_PATH_POINTS,
    PathTooLong,
    Transform2D,
    clock_mismatch,
    read_goal,
    read_odom,
    read_path,
    read_scan,
    yaw_from_quaternion,
)
from navdeploy.progress import BlockedWatch, ProgressChecker, ProgressRule, recovery_command, refused
from navdeploy.scan_map import ScanPlanner
from navdeploy.scan_worker import ScanPlannerWorker
from navdeploy.settings import GateSettings, Limits
from navdeploy.smoother import VelocitySmoother
from navdeploy.states import FAULT_STATES, MOVING_STATES, SCAN_FAULT_STATE, State, TickResult

TURN_RATE = 0.5
"""[rad/s] A diff drive's turn in place after a back-off, toward the new sub-goal: at most this and the
base's yaw-rate limit, and at most :data:`TURN_GAIN` times the heading error left."""

TURN_GAIN = 2.0
"""[1/s] The turn's rate is at most this times the heading error left."""

TURN_DONE = math.radians(10.0)
"""[rad] The turn ends when the robot faces the sub-goal this closely."""

_UNCHANGED = "; nothing changed (the current path or goal stands)"

REACHED_SLACK = 0.05
"""[m] A reached goal stays reached while the robot is within the goal tolerance plus this (odometry's
noise at rest). A robot found further away (it crossed the tolerance's edge at speed and coasted out
while braking) is not at its goal: it drives to it again."""

SUBGOAL_REACH = 0.2
"""[m] A sub-goal is never closer to the robot than the goal tolerance plus this (:func:`beyond_tolerance`)."""

RETREATING = "backing out"
"""The start of a driving tick's reason while the scan map's path backs out along the robot's trail."""


def clamp_command(cmd: np.ndarray, limits: Limits) -> np.ndarray:
    """Clamp a body-frame [vx, vy, wz] to the limits; non-finite input gives zeros. A diff-drive base's
    ``vx`` lies in ``[-backward, v_max]`` and its ``vy`` is 0.0."""
    cmd = np.asarray(cmd, dtype=np.float64).reshape(-1)
    if cmd.shape != (3,) or not np.isfinite(cmd).all():
        return np.zeros(3)
    vx, vy, wz = (float(v) for v in cmd)
    v = limits.v_max
    wz = min(max(wz, -limits.omega_max), limits.omega_max)
    if not limits.holonomic:
        return np.array([min(max(vx, -limits.backward), v), 0.0, wz])
    vx, vy = min(max(vx, -v), v), min(max(vy, -v), v)
    if limits.limit_planar_speed:
        speed = math.hypot(vx, vy)
        if speed > v > 0:
            vx, vy = vx * v / speed, vy * v / speed
    return np.array([vx, vy, wz])


def scan_planner(settings: GateSettings) -> ScanPlanner | ScanPlannerWorker | None:
    """The scan map's planner of ``settings``: on a worker process or inline (None: no scan map),
    planning with the guard's passing clearance (``settings.plan_clearance``; None: no guard)."""
    if settings.scan_map is None or settings.robot_radius is None:
        return None
    kind = ScanPlannerWorker if settings.scan_map_worker else ScanPlanner
    return kind(settings.scan_map, settings.robot_radius, settings.map_path_rule, clearance=settings.plan_clearance)


@dataclass
class _Stamped:
    value: Any
    stamp: float


@dataclass
class CommandGate:
    """The safety layer around one driver (see the module docstring); build it with :meth:`from_settings`."""

    driver: Any  # navdeploy.runtime.PolicyRuntime or navdeploy.dwa.DwaPlanner (.step / .reset)
    limits: Limits
    goal_tolerance: float
    stale_timeout: float
    odom_frame: str = "odom"
    goal_frames: dict[str, Transform2D] = field(default_factory=dict)
    scan_errors: tuple[type[BaseException], ...] = ()
    smoother: VelocitySmoother | None = None  # acceleration limits on driving commands; None: off
    path_rule: LookaheadRule = field(default_factory=LookaheadRule)  # sub-goal of a path
    guard: GuardRule | None = None  # collision guard on driving commands (navcontract.guard); None: off
    max_range: float = math.inf  # [m] the contract's lidar max_range, for the guard
    scan_planner: ScanPlanner | ScanPlannerWorker | None = None  # goal without a path: sub-goal on the robot's own map
    progress: ProgressRule | None = None  # blocked, stuck and recovery (navdeploy.progress); None: off
    control_period: float = 0.1  # [s] a command is held this long (the guard's brake, rule step 5b)
    lidar_mount: LidarMount | None = None  # where the lidar of scan_message's scans sits on the body (None: centre)

    @classmethod
    def from_settings(cls, driver: Any, settings: GateSettings) -> CommandGate:
        """The gate the node runs around ``driver``: ``settings`` from
        :func:`navdeploy.settings.resolve_settings` (the scan options go to the driver), scan errors
        of the deploy runtime counted as unusable scans."""
        configure = getattr(driver, "configure_scan", None)
        if configure is not None:
            configure(settings.scan_options)
        elif hasattr(driver, "scan_options"):
            driver.scan_options = settings.scan_options
        keep_guard = getattr(driver, "configure_guard", None)
        if keep_guard is not None and settings.guard is not None:
            keep_guard(settings.guard)  # a planner plans with the rule its command is checked by
        keep_accel = getattr(driver, "configure_accel", None)
        if keep_accel is not None and settings.accel_limits.active:
            keep_accel(settings.accel_limits)  # and within the smoother's limits
        return cls(
            driver=driver,
            limits=settings.limits,
            goal_tolerance=settings.goal_tolerance,
            stale_timeout=settings.stale_timeout,
            odom_frame=settings.odom_frame,
            goal_frames=dict(settings.goal_frames),
            scan_errors=(ScanUnusable,),
            smoother=(
                VelocitySmoother(settings.accel_limits, settings.control_period)
                if settings.accel_limits.active
                else None
            ),
            path_rule=settings.path_rule,
            guard=settings.guard,
            max_range=settings.max_range,
            scan_planner=scan_planner(settings),
            progress=settings.progress,
            control_period=settings.control_period,
            lidar_mount=settings.lidar_mount,
        )

    def start(self) -> None:
        """Start what runs beside the ticks: the scan map's worker (when the settings ask for one)."""
        if isinstance(self.scan_planner, ScanPlannerWorker):
            self.scan_planner.start()

    def close(self) -> None:
        """Stop the scan map's worker (a no-op without one)."""
        if isinstance(self.scan_planner, ScanPlannerWorker):
            self.scan_planner.close()

    def __post_init__(self) -> None:
        self.scan: _Stamped | None = None
        self.odom: _Stamped | None = None  # value: (pose(3), twist(3))
        self.odom_error: str | None = None
        self.scan_error: str | None = None
        self.goal: tuple[float, float] | None = None  # the goal pose's position (odometry frame)
        self.path: np.ndarray | None = None  # (K, 2) float32 waypoints in the odometry frame
        self.path_progress = 0.0  # [m] arc length along the path already reached
        self._path_length = 0.0  # [m] of the path
        self._subgoal: tuple[float, float] | None = None  # this tick's (None: not computed)
        self._path_remaining: float | None = None
        self.reached = False
        self.last_inference_ms: float | None = None
        self._need_reset = True
        self._mapped_stamp: float | None = None  # the last scan folded into the scan map
        rule = self.progress
        self.checker = ProgressChecker(rule) if rule is not None and rule.progress_time > 0 else None
        self.blocked = BlockedWatch(rule) if rule is not None and rule.blocked_time > 0 else None
        self._path_serial = 0  # counts the global paths set (progress along a path is per path)
        self._checked: np.ndarray | None = None  # the command the guard checked this tick
        self._note: str | None = None  # this tick's reason, when driving says more than "driving"
        self._backoff: tuple[float, ProgressRule, str] | None = None  # the back-off in course: until, rule, why
        self._turn: tuple[float, ProgressRule, str] | None = None  # a diff drive's turn after it: until, rule, why

    # ---------------------------------------------------------------- inputs
    def input_stamps(self) -> tuple[float | None, float | None]:
        """The stamps [s] of the scan and the odometry a tick now reads (None: none usable held)."""
        return (
            None if self.scan is None else self.scan.stamp,
            None if self.odom is None else self.odom.stamp,
        )

    def set_scan(self, scan: Any, stamp: float) -> None:
        self.scan = _Stamped(scan, stamp)
        self.scan_error = None

    def set_scan_unusable(self, reason: str) -> None:
        """A scan arrived that cannot even be turned into a ScanInput: stop until a good one comes."""
        self.scan = None
        self.scan_error = reason

    def set_odom(
        self,
        position: tuple[float, float],
        quaternion: tuple[float, float, float, float],
        twist: tuple[float, float, float],
        stamp: float,
        frame_id: str,
    ) -> str | None:
        """Store odometry; returns why it is unusable (and marks it so), else None."""
        problem = None
        yaw = yaw_from_quaternion(*quaternion)
        if frame_id and frame_id != self.odom_frame:
            problem = f"odometry in frame '{frame_id}', expected '{self.odom_frame}'"
        elif yaw is None:
            problem = "odometry orientation is not a valid quaternion (NaN/inf or zero norm)"
        elif not all(math.isfinite(v) for v in (*position, *twist)):
            problem = "odometry position or twist is not finite"
        self.odom_error = problem
        if problem is None:
            self.odom = _Stamped((np.array([position[0], position[1], yaw]), np.array(twist, dtype=np.float64)), stamp)
        else:
            self.odom = None
        return problem

    def _frame_problem(self, frame_id: str) -> str | None:
        """Why points in ``frame_id`` cannot be taken into the odometry frame, or None."""
        if frame_id == self.odom_frame or frame_id in self.goal_frames:
            return None
        known = ", ".join([self.odom_frame, *self.goal_frames]) or self.odom_frame
        return (
            f"frame '{frame_id}' is not the odometry frame and no static transform "
            f"is configured for it (accepted frames: {known})"
        )

    def set_goal(self, x: float, y: float, frame_id: str) -> tuple[bool, str]:
        """Accept a goal in the odometry frame (or a configured static frame); else clear the goal.
        Either way any path is dropped: a goal pose replaces path following."""
        self.path = None
        if not (math.isfinite(x) and math.isfinite(y)):
            self.goal = None
            return False, f"goal rejected: position ({x}, {y}) is not finite; stopping"
        problem = self._frame_problem(frame_id)
        if problem is not None:
            self.goal = None
            return False, f"goal rejected: {problem}; stopping"
        gx, gy = self.goal_frames[frame_id].apply(x, y) if frame_id != self.odom_frame else (x, y)
        self.goal = (float(gx), float(gy))
        self.reached = False
        self._need_reset = True
        self._new_destination()
        if self.scan_planner is not None:
            self.scan_planner.new_goal()  # the map stays: what was seen is still there
        return True, f"new goal ({gx:.2f}, {gy:.2f}) in '{self.odom_frame}'"

    def set_path(self, points: Any, frame_id: str) -> tuple[bool, str]:
        """Follow a path of (K, 2) waypoints in ``frame_id`` (the odometry frame or a configured static
        frame); returns (accepted, what to log).

        An empty path ends path following: the goal pose (if any) is the goal again. A path that
        cannot be used (another frame, NaN/inf points, more than :data:`MAX_PATH_POINTS` points, not
        (K, 2)) is refused and nothing changes. A new path starts at progress 0 and clears the
        reached state; the goal pose underneath is kept (an empty path falls back to it)."""
        try:
            pts = np.asarray(points, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            return False, f"path refused: points are not numbers ({exc}){_UNCHANGED}"
        if pts.size == 0:
            had = self.path is not None
            self.path = None
            self.path_progress = 0.0
            if had:
                self.reached = False
                self._need_reset = True
                self._new_destination()
            back = "the goal pose" if self.goal is not None else "no goal: stopping"
            return True, f"empty path: path following ended ({back})"
        if pts.ndim != 2 or pts.shape[1] != 2:
            return False, f"path refused: points of shape {pts.shape}, expected (K, 2){_UNCHANGED}"
        if pts.shape[0] > MAX_PATH_POINTS:
            return False, f"path refused: {pts.shape[0]} poses, more than {MAX_PATH_POINTS}{_UNCHANGED}"
        if not np.all(np.isfinite(pts)):
            bad = int(np.flatnonzero(~np.all(np.isfinite(pts), axis=1))[0])
            return False, f"path refused: pose {bad} is not finite ({pts[bad].tolist()}){_UNCHANGED}"
        problem = self._frame_problem(frame_id)
        if problem is not None:
            return False, f"path refused: {problem}{_UNCHANGED}"
        if frame_id != self.odom_frame:
            pts = self.goal_frames[frame_id].apply_points(pts)
        self.path = pts.astype(np.float32)
        self._path_length = float(path_length(self.path[None], np.array([len(pts)]))[0])
        self.path_progress = 0.0
        self.reached = False
        self._need_reset = True
        self._path_serial += 1
        self._new_destination()
        end = self.path[-1]
        return True, f"new path of {len(pts)} poses to ({end[0]:.2f}, {end[1]:.2f}) in '{self.odom_frame}'"

    def clear_goal(self) -> None:
        """No goal pose and no path: zero until a new one comes."""
        self.goal = None
        self.path = None
        self._new_destination()

    def _new_destination(self) -> None:
        """A new goal or path (or none): progress, recoveries and the blocked watch start over."""
        if self.checker is not None:
            self.checker.reset()
        if self.blocked is not None:
            self.blocked.clear()
        self._backoff = self._turn = None

    def final_goal(self) -> tuple[float, float] | None:
        """Where the robot is going: the path's last point while a path is set, else the goal pose."""
        if self.path is not None:
            return float(self.path[-1, 0]), float(self.path[-1, 1])
        return self.goal

    def input_failed(self, kind: str, reason: str) -> None:
        """A message of ``kind`` (scan, odom, goal, path) could not be handled at all: that input is
        unusable (scan, odometry: zero until a good one arrives; goal, path: goal and path dropped)."""
        if kind == "scan":
            self.set_scan_unusable(reason)
        elif kind == "odom":
            self.odom, self.odom_error = None, reason
        else:
            self.clear_goal()

    # ---------------------------------------------------------------- messages (duck-typed)
    def scan_message(self, msg: Any, now: float) -> str | None:
        """Fold a ``LaserScan``-like message taken at its stamp (``now`` if unset); returns why it is
        unusable (the scan is then marked unusable until a good one comes), else None."""
        try:
            scan, stamp = read_scan(msg, now)
        except Exception as exc:  # unreadable: not even a ScanInput
            reason = f"scan unusable: {exc}"
            self.set_scan_unusable(reason)
            return reason
        if self.lidar_mount is not None:
            scan = replace(scan, mount=self.lidar_mount)  # its readings are the lidar's frame (scan rule 0)
        self.set_scan(scan, stamp)
        return None

    def odom_message(self, msg: Any, now: float) -> str | None:
        """Fold an ``Odometry``-like message (pose in ``odom_frame``, body-frame twist); returns why it
        is unusable (see :meth:`set_odom`), else None."""
        try:
            odom = read_odom(msg, now)
        except Exception as exc:
            reason = f"odometry message could not be read: {type(exc).__name__}: {exc}"
            self.input_failed("odom", reason)
            return reason
        return self.set_odom(odom.position, odom.quaternion, odom.twist, odom.stamp, odom.frame_id)

    def goal_message(self, msg: Any) -> tuple[bool, str]:
        """Fold a ``PoseStamped``-like goal (see :meth:`set_goal`); returns (accepted, what to log)."""
        try:
            x, y, frame_id = read_goal(msg)
        except Exception as exc:
            self.clear_goal()
            return False, f"goal rejected: message could not be read: {type(exc).__name__}: {exc}; stopping"
        return self.set_goal(x, y, frame_id)

    def path_message(self, msg: Any) -> tuple[bool, str]:
        """Fold a ``nav_msgs/Path``-like message (``header.frame_id``, ``poses[i].pose.position``; see
        :meth:`set_path`); returns (accepted, what to log). An unreadable message is refused like
        any unusable path: nothing changes."""
        try:
            pts, frame_id = read_path(msg)
        except PathTooLong as exc:
            return False, f"path refused: {exc}{_UNCHANGED}"
        except Exception as exc:
            return False, f"path refused: message could not be read: {type(exc).__name__}: {exc}{_UNCHANGED}"
        return self.set_path(pts, frame_id)

    # ---------------------------------------------------------------- control
    def _age_problem(self, item: _Stamped, now: float) -> str | None:
        age = now - item.stamp
        if age > self.stale_timeout:
            return f"{age:.3f} s old (timeout {self.stale_timeout:.3f} s)"
        if age < -self.stale_timeout:
            return f"stamped {-age:.3f} s in the future (clock jumped back?)"
        return None

    def _zero(
        self,
        state: State,
        reason: str,
        distance: float | None = None,
        fault: str | None = None,
        report: ScanReport | None = None,
    ) -> TickResult:
        if state in FAULT_STATES or state in (State.NO_GOAL, State.GOAL_REACHED):
            self._need_reset = True
        return TickResult(np.zeros(3), state, reason, distance, None, fault, report)

    def _report(self) -> ScanReport | None:
        return getattr(self.driver, "last_scan_report", None)

    def tick(self, now: float, dispatch: bool = True) -> TickResult:
        """The command of the control tick at ``now``; never raises, never returns a non-finite command.

        A driving or recovering command goes through the velocity smoother (when on), then the guard
        (when on: :meth:`_send`); any other state's zero goes out as it is, at once, and the smoother
        starts again from rest. ``dispatch`` false: the tick's scan waits for :meth:`dispatch` (the node
        calls it once the command is published, so the map's worker never computes while the command
        is on its way)."""
        self._subgoal = self._path_remaining = None
        self._note = None
        try:
            self._end_backoff(now)
            res = self._decide(now)
            if res.state == State.DRIVING:
                res = self._supervise(res, now)
            if res.state in MOVING_STATES:
                target = res.cmd
                res.cmd, res.guard_scale = self._send(target, now)
                if res.state == State.DRIVING:
                    self._watch(res, target, now)
        except Exception as exc:  # never let a tick die without a zero command
            res = self._zero(State.ERROR, f"tick failed: {type(exc).__name__}: {exc}")
        if not np.isfinite(res.cmd).all():
            res = self._zero(State.ERROR, "non-finite command replaced by zero", res.distance)
        if not self.limits.holonomic:
            res.cmd = np.array([res.cmd[0], 0.0, res.cmd[2]], dtype=np.float64)  # never a lateral command
        if res.state not in MOVING_STATES:
            self.stopped(now)
        told = getattr(self.driver, "command_sent", None)
        if told is not None:
            told(res.cmd)  # a planner's next window starts from what went out, not from what it asked
        self._paused(res.state)
        if res.state == State.DRIVING and self._note is not None:
            res.reason = self._note
        res.path_in_use = self.path is not None
        res.subgoal, res.path_remaining = self._subgoal, self._path_remaining
        if dispatch:
            self.dispatch()
        return res

    def dispatch(self) -> None:
        """Hand the last tick's scan to the scan map's worker (when it runs on one; never raises: a
        worker that cannot take it says so at the next tick)."""
        if isinstance(self.scan_planner, ScanPlannerWorker):
            try:
                self.scan_planner.dispatch()
            except Exception:  # the next tick's step reports the worker's failure
                pass

    def _paused(self, state: State) -> None:
        """After a tick in ``state``: any but driving starts the blocked watch again; any but driving,
        stuck and recovering (a fault, no goal, the goal reached) the progress clock too."""
        if self.blocked is not None and state != State.DRIVING:
            self.blocked.clear()
        if self.checker is not None and state not in (State.DRIVING, State.STUCK, State.RECOVERING):
            self.checker.pause()

    def stopped(self, now: float | None = None) -> None:
        """A zero command went out at ``now``: a tick's stop, or one the node sends outside a tick (the
        clock watchdog). The velocity smoother starts again from rest."""
        if self.smoother is not None:
            self.smoother.reset(now)

    def _decide(self, now: float) -> TickResult:
        if self.odom_error is not None:
            return self._zero(State.BAD_ODOM, self.odom_error)
        if self.scan_error is not None:
            return self._zero(State.BAD_SCAN, self.scan_error, fault="unreadable")
        if self.scan is None or self.odom is None:
            missing = " and ".join(n for n, v in (("scan", self.scan), ("odometry", self.odom)) if v is None)
            return self._zero(State.WAITING_INPUT, f"no {missing} received yet")
        mismatch = clock_mismatch("scan", self.scan.stamp, now) or clock_mismatch("odometry", self.odom.stamp, now)
        if mismatch:
            return self._zero(State.CLOCK_MISMATCH, mismatch)
        problem = self._age_problem(self.scan, now)
        if problem:
            return self._zero(State.STALE_SCAN, f"scan {problem}")
        problem = self._age_problem(self.odom, now)
        if problem:
            return self._zero(State.STALE_ODOM, f"odometry {problem}")
        pose, twist = self.odom.value
        final = self.final_goal()
        if final is None:
            return self._zero(State.NO_GOAL, "no goal")
        distance = float(math.hypot(final[0] - pose[0], final[1] - pose[1]))
        target = final
        near_end = True
        if self.path is not None:
            target, near_end = self._follow(pose)
        elif self.scan_planner is not None:
            target = self._mapped(pose, final, now)
        if target != final:
            target = self._subgoal = beyond_tolerance(pose, target, final, self.goal_tolerance)
        if self.reached and distance > self.goal_tolerance + REACHED_SLACK:
            self.reached = False  # coasted out of the tolerance: not at the goal
            self._note = (
                f"driving back to the goal: {distance:.2f} m from it after reaching it, beyond "
                f"{self.goal_tolerance} m + {REACHED_SLACK} m"
            )
        if self.reached or (distance < self.goal_tolerance and near_end):
            self.reached = True
            return self._zero(
                State.GOAL_REACHED,
                f"goal reached ({distance:.3f} m from it, tolerance {self.goal_tolerance} m)",
                distance,
            )
        if self._need_reset:
            self.driver.reset()
            self._need_reset = False
        t0 = time.perf_counter()
        try:
            raw = self.driver.step(self.scan.value, pose=tuple(pose), twist=tuple(twist), goal=target)
        except self.scan_errors as exc:
            code = getattr(exc, "code", None)
            state = SCAN_FAULT_STATE.get(code, State.BAD_SCAN)
            return self._zero(state, f"scan unusable ({code}): {exc}", distance, code, getattr(exc, "report", None))
        except Exception as exc:  # any other failure: stop, say why
            return self._zero(State.ERROR, f"policy step failed: {type(exc).__name__}: {exc}", distance)
        self.last_inference_ms = (time.perf_counter() - t0) * 1e3
        raw = np.asarray(raw, dtype=np.float64).reshape(-1)
        if raw.shape != (3,) or not np.isfinite(raw).all():
            return self._zero(
                State.ERROR, f"policy returned a non-finite or misshapen command {raw.tolist()}", distance
            )
        cmd = clamp_command(raw, self.limits)
        return TickResult(cmd, State.DRIVING, "driving", distance, self.last_inference_ms, None, self._report())

    def _send(self, target: np.ndarray, now: float) -> tuple[np.ndarray, float | None]:
        """The command sent for the clamped driving command ``target``, and the guard's scale (None:
        no guard): ``target`` steered (:meth:`_steered`), the smoother's step toward it (when on), then the guard on that very
        command (when on). A cut by the guard goes out as it is, beyond the smoother's limit (a stop
        is never delayed), and the smoother remembers what was sent."""
        cmd = target = self._steered(target)
        if self.smoother is not None:
            cmd = self.smoother.propose(target, now, clamp=lambda c: clamp_command(c, self.limits))
        scale = None
        self._checked = cmd
        if self.guard is not None:
            cmd, scale = self._guarded(cmd, self.guard, momentum=True)
        if self.smoother is not None:
            self.smoother.sent(cmd, now)
        return cmd, scale

    def _steered(self, target: np.ndarray) -> np.ndarray:
        """``target`` turned by the guard's steering (:mod:`navcontract.steer`) on the ranges the driver
        read this tick, on a holonomic base whose guard steers; else ``target`` itself."""
        rule = self.guard
        report = self._report()
        if rule is None or rule.steer <= 0.0 or not self.limits.holonomic or report is None:
            return target
        seen = ~np.asarray(report.filled, dtype=bool)
        steered = steer_command(report.ranges, target, rule, self.max_range, seen)
        return np.asarray(steered, dtype=np.float64)

    def _guarded(self, cmd: np.ndarray, rule: GuardRule, momentum: bool = False) -> tuple[np.ndarray, float]:
        """``cmd`` with its planar part scaled by ``rule`` on the ranges the driver read this tick (its
        ``last_scan_report``, set by its step), the sectors the scan rule filled counted as unseen
        (:mod:`navcontract.guard`, rule step 0); wz as rule step 0b leaves it. With ``momentum`` (the command that
        goes out), also rule step 5 on the odometry's body twist. Raises when the driver keeps no
        report (the tick then stops with ``error``)."""
        report = self._report()
        if report is None:
            raise RuntimeError("the guard has no scan: the runtime keeps no last_scan_report")
        seen = ~np.asarray(report.filled, dtype=bool)
        motion = self.odom.value[1] if momentum and self.odom is not None else None
        guarded, scale = apply_guard(
            report.ranges, cmd, rule, self.max_range, seen, motion=motion, period=self.control_period
        )
        return np.asarray(guarded, dtype=np.float64), float(scale)

    # ---------------------------------------------------------------- blocked, stuck, recovery
    def _path_state(self) -> tuple[Any, float]:
        """Which path the robot follows (a key; None: none) and its progress along it [m]."""
        if self.path is not None:
            return ("plan", self._path_serial), self.path_progress
        planner = self.scan_planner
        if planner is not None and planner.path is not None:
            return ("map", planner.path_id), float(planner.progress)
        return None, 0.0

    def _supervise(self, res: TickResult, now: float) -> TickResult:
        """A driving tick under the progress checker (:mod:`navdeploy.progress`): the driver's command,
        the back-off while one runs (after stuck or a blocked path), or ``stuck`` with zero (no progress
        for ``progress_time``, or every recovery spent)."""
        chk = self.checker
        if chk is not None and chk.gave_up:
            reason = f"stuck: {_spent(chk.rule)}; zero until a new goal or path"
            return self._zero(State.STUCK, reason, res.distance, report=res.scan_report)
        if self._backoff is not None:
            rule, why = self._backoff[1], self._backoff[2]
            motion = self.odom.value[1] if self.odom is not None else None
            cmd, what = recovery_command(
                res.scan_report,
                self.max_range,
                rule.recovery_speed,
                self.limits.holonomic,
                self.guard,
                motion=motion,
                period=self.control_period,
            )
            res.cmd, res.state = clamp_command(cmd, self.limits), State.RECOVERING
            res.reason = f"recovering ({why}): {what} at {rule.recovery_speed:g} m/s"
            return res
        if self._turn is not None:
            rule, why = self._turn[1], self._turn[2]
            error = self._heading_error()
            if error is not None and abs(error) > TURN_DONE:
                rate = min(TURN_RATE, self.limits.omega_max, TURN_GAIN * abs(error))
                res.cmd, res.state = np.array([0.0, 0.0, math.copysign(rate, error)]), State.RECOVERING
                res.reason = f"recovering ({why}): turning toward the way ahead, {math.degrees(error):.0f} deg to go"
                return res
            self._end_turn()  # facing the way ahead: the driver drives again
            self._note = f"driving again after {why}, turned toward the way ahead"
        if chk is None or res.distance is None or not chk.update(now, res.distance, *self._path_state()):
            return res
        rule = chk.rule
        idle = (
            f"no progress toward the goal or along the path for {rule.progress_time:g} s ({res.distance:.2f} m to go)"
        )
        if chk.start_recovery():
            why = f"recovery {chk.recoveries} of {rule.max_recoveries}"
            self._backoff = (now + rule.recovery_time, rule, why)
            raised = self._block_toward_subgoal()
            reason = f"stuck: {idle}; {why}{raised}: backing off for {rule.recovery_time:g} s, then a new plan"
        else:
            reason = f"stuck: {idle} after {_spent(rule)}; zero until a new goal or path"
        return self._zero(State.STUCK, reason, res.distance, report=res.scan_report)

    def _end_backoff(self, now: float) -> None:
        """At the first tick after a back-off: the map plans again at once, the driver starts afresh and
        the progress clock starts again (the least distance to the goal is kept). A diff drive first
        turns in place toward the new sub-goal (:data:`TURN_RATE`, at most half a turn's time), then
        drives."""
        if self._turn is not None and now >= self._turn[0]:
            self._note = f"driving again after {self._turn[2]}, the turn's time spent"
            self._end_turn()
        if self._backoff is None or now < self._backoff[0]:
            return
        rule, why = self._backoff[1], self._backoff[2]
        self._backoff = None
        self._need_reset = True
        if self.checker is not None:
            self.checker.pause()
        if self.scan_planner is not None and self.path is None:
            self.scan_planner.replan()
        self._note = f"replanning after {why}"
        if not self.limits.holonomic:
            self._turn = (now + math.pi / min(TURN_RATE, self.limits.omega_max), rule, why)

    def _end_turn(self) -> None:
        """The turn after a back-off is over: the driver starts afresh, the progress clock again."""
        self._turn = None
        self._need_reset = True
        if self.checker is not None:
            self.checker.pause()

    def _heading_error(self) -> float | None:
        """[rad] From the robot's heading to the bearing of this tick's sub-goal (the goal without one),
        in (-pi, pi]; None without a pose or a target."""
        if self.odom is None:
            return None
        pose = self.odom.value[0]
        target = self._subgoal if self._subgoal is not None else self.final_goal()
        if target is None:
            return None
        bearing = math.atan2(target[1] - pose[1], target[0] - pose[0])
        return math.atan2(math.sin(bearing - pose[2]), math.cos(bearing - pose[2]))

    def _watch(self, res: TickResult, target: np.ndarray, now: float) -> None:
        """The blocked watch on a driving tick (:mod:`navdeploy.progress`): after ``blocked_time`` of the
        guard holding the command toward the scan map's sub-goal, the return it stopped the robot
        before is raised in the map, which plans again round it; the robot backs off first."""
        watch, planner, rule = self.blocked, self.scan_planner, self.guard
        sub = self._subgoal
        if watch is None or planner is None or rule is None or self.odom is None:
            return
        if self.path is not None or planner.path is None or sub is None:
            watch.clear()
            return
        pose = self.odom.value[0]
        toward = _body_direction(pose, sub)
        speed = watch.rule.blocked_speed
        checked = self._checked
        held = refused(target, res.cmd, res.guard_scale, toward, speed)
        if not held and toward is not None and float(np.dot(res.cmd[:2], toward)) < speed:
            # The driver does not push (a planner that stops itself short, a policy turning away): the
            # path is held all the same when it makes no way toward the sub-goal and the guard would
            # stop a motion straight toward it before it gets there.
            checked = self._toward(toward)
            to_go = math.hypot(sub[0] - float(pose[0]), sub[1] - float(pose[1]))
            held = checked is not None and self._free(checked, rule) < to_go - OPEN_SLACK
        if not watch.update(held, now) or checked is None:
            return
        hit = self._blocking_return(checked, rule)
        if hit is None:
            return
        point, r, theta = hit
        planner.block(point)
        self._backoff = (now + watch.rule.recovery_time, watch.rule, "the blocked path")
        self._note = (
            f"replanning: the guard held the command toward the sub-goal under {speed:g} m/s "
            f"for {watch.rule.blocked_time:g} s; the path counts as blocked by the return {r:.2f} m away at "
            f"{math.degrees(theta):.0f} deg; backing off {watch.rule.recovery_time:g} s first"
        )

    def _toward(self, toward: np.ndarray) -> np.ndarray | None:
        """A probe command: straight toward the body-frame direction ``toward`` at the speed limit, not
        turning (None without a scan report)."""
        if self._report() is None:
            return None
        v = self.limits.v_max
        return np.array([v * float(toward[0]), v * float(toward[1]), 0.0])

    def _free(self, cmd: np.ndarray, rule: GuardRule) -> float:
        """[m] How far the guard lets ``cmd``'s direction go on this tick's scan (rule steps 0-2; inf
        when nothing blocks it)."""
        report = self._report()
        if report is None:
            return math.inf
        seen = ~np.asarray(report.filled, dtype=bool)
        free, blocks = free_distances(np.asarray(report.ranges, dtype=np.float64), cmd, rule, self.max_range, seen)
        return float(np.min(free[blocks])) if np.any(blocks) else math.inf

    def _guarded_speed(self, cmd: np.ndarray, rule: GuardRule) -> float:
        """The planar speed the guard would let ``cmd`` keep on this tick's scan."""
        guarded, _ = self._guarded(cmd, rule)
        return math.hypot(float(guarded[0]), float(guarded[1]))

    def _blocking_return(self, cmd: np.ndarray, rule: GuardRule) -> tuple[np.ndarray, float, float] | None:
        """The return that limits ``cmd`` on this tick's scan (:func:`navcontract.guard.blocking_beam`):
        its point in the odometry frame, its range and its body-frame bearing; None when nothing
        blocks it."""
        report = self._report()
        if report is None or self.odom is None:
            return None
        pose = self.odom.value[0]
        seen = ~np.asarray(report.filled, dtype=bool)
        j = blocking_beam(report.ranges, cmd, rule, self.max_range, seen)
        if j is None:
            return None
        r = float(guarded_ranges(np.asarray(report.ranges, dtype=np.float64), seen, rule)[j])
        theta = TRAINING_ANGLE_MIN + j * 2.0 * math.pi / len(report.ranges)
        c, s = math.cos(pose[2] + theta), math.sin(pose[2] + theta)
        return np.array([pose[0] + r * c, pose[1] + r * s]), r, theta

    def _block_toward_subgoal(self) -> str:
        """At a stuck robot's recovery: raise in the scan map the return that holds a motion straight
        toward the sub-goal, so that the plan after the back-off goes round it; what was done, in
        words ("" when nothing holds it, or no map path or guard)."""
        planner, rule, sub = self.scan_planner, self.guard, self._subgoal
        if planner is None or rule is None or sub is None or self.path is not None or self.odom is None:
            return ""
        toward = _body_direction(self.odom.value[0], sub)
        probe = None if toward is None else self._toward(toward)
        if probe is None or self._guarded_speed(probe, rule) >= self.limits.v_max - 1e-9:
            return ""
        hit = self._blocking_return(probe, rule)
        if hit is None:
            return ""
        planner.block(hit[0])
        return f"; the return {hit[1]:.2f} m away at {math.degrees(hit[2]):.0f} deg raised in the map"

    def _mapped(self, pose: np.ndarray, final: tuple[float, float], now: float) -> tuple[float, float]:
        """Goal without a path: hand a new scan to the robot's map and take the sub-goal along the
        path planned on it (:mod:`navdeploy.scan_map`; on a worker, the newest plan that came back),
        or the goal itself when the map has none."""
        planner = self.scan_planner
        if planner is None or self.scan is None:
            return final
        fresh = self._mapped_stamp != self.scan.stamp
        self._mapped_stamp = self.scan.stamp
        sub = planner.step(self.scan.value if fresh else None, pose, final, now)
        if sub is None:
            return final
        if planner.retreating and self._note is None:
            self._note = f"{RETREATING}: no path on the map from here, back along the robot's trail"
        self._subgoal = sub
        self._path_remaining = planner.remaining
        return sub

    def _follow(self, pose: np.ndarray) -> tuple[tuple[float, float], bool]:
        """Advance along the path from ``pose``: (this tick's sub-goal, whether the robot's progress is
        within lookahead + goal tolerance of the path's end). The second keeps a path that comes back
        to its start (a loop) from counting as reached when it begins."""
        path = self.path
        if path is None:
            raise RuntimeError("no path to follow")
        sub, progress, remaining = follow_path(
            path[None],
            np.array([len(path)]),
            np.array([pose[:2]], dtype=np.float32),
            np.array([self.path_progress], dtype=np.float32),
            self.path_rule,
        )
        self.path_progress = float(progress[0])
        self._subgoal = self._open_subgoal(pose, (float(sub[0, 0]), float(sub[0, 1])))
        self._path_remaining = float(remaining[0])
        near_end = self._path_length - self.path_progress <= self.path_rule.lookahead + self.goal_tolerance
        return self._subgoal, near_end

    def _open_subgoal(self, pose: np.ndarray, sub: tuple[float, float]) -> tuple[float, float]:
        """Following a given path with the guard on: the sub-goal of
        :func:`navcontract.subgoal.open_subgoal` (``sub``, or turned toward the part of the path the
        guard leaves open on this tick's scan; module doc), the rule training applies too."""
        rule, path, scan = self.guard, self.path, self.scan
        read = getattr(self.driver, "resample", None)
        if rule is None or path is None or scan is None or read is None:
            return sub
        try:
            read(scan.value)  # this tick's beams (the driver's step reads the same scan again)
        except Exception:
            return sub  # an unusable scan: the driver's step says so
        report = self._report()
        if report is None:
            return sub
        out = open_subgoal(
            path[None].astype(np.float64),
            np.array([len(path)]),
            np.asarray(pose, dtype=np.float64)[None, :3],
            np.array([self.path_progress]),
            np.array([sub], dtype=np.float64),
            self.path_rule,
            np.asarray(report.ranges, dtype=np.float64)[None],
            ~np.asarray(report.filled, dtype=bool)[None],
            rule,
            self.limits.v_max,
            self.max_range,
        )
        return float(out[0, 0]), float(out[0, 1])


def beyond_tolerance(
    pose: np.ndarray, sub: tuple[float, float], final: tuple[float, float], tolerance: float
) -> tuple[float, float]:
    """The sub-goal the driver gets for ``sub`` (not the goal ``final`` itself): ``sub``, or where it
    lies closer than ``tolerance`` + :data:`SUBGOAL_REACH` to the robot (a path's point pulled back
    to where the robot sees it straight, a path's first point), the point that far along the
    robot's line to it (toward ``final`` when ``sub`` is where the robot stands). A driver takes a
    goal within its tolerance for reached: the DWA brakes, the policy never trained to move there."""
    x, y = float(pose[0]), float(pose[1])
    want = tolerance + SUBGOAL_REACH
    dx, dy = sub[0] - x, sub[1] - y
    d = math.hypot(dx, dy)
    if d >= want:
        return sub
    if d < 1e-6:
        dx, dy = final[0] - x, final[1] - y
        d = math.hypot(dx, dy)
        if d < 1e-6:
            return sub
    return x + dx / d * want, y + dy / d * want


def _body_direction(pose: np.ndarray, point: tuple[float, float]) -> np.ndarray | None:
    """The unit direction from ``pose`` (x, y, yaw) to ``point`` in the body frame (None: at it)."""
    dx, dy = point[0] - float(pose[0]), point[1] - float(pose[1])
    n = math.hypot(dx, dy)
    if n < 1e-6:
        return None
    c, s = math.cos(float(pose[2])), math.sin(float(pose[2]))
    return np.array([(c * dx + s * dy) / n, (-s * dx + c * dy) / n])


def _spent(rule: ProgressRule) -> str:
    return f"{rule.max_recoveries} recoveries without getting {rule.progress_distance:g} m closer to the goal"
