"""The policy node's decision logic, free of ROS: input gating, goal handling, safety, clamping.

``PolicyController`` keeps the latest scan, odometry and goal with the time each was taken, and on
every control tick decides between a zero command (no goal, goal reached, stale or unusable input,
any error) and the policy's command from the deploy runtime, clamped to the configured limits and
acceleration-limited by the velocity smoother (``navdeploy.smoother``; never applied to a zero: a
stop goes out at once).
The observation and the action scaling belong to ``navdeploy.runtime``: nothing here rebuilds them.
Times are ROS times in seconds (simulated time under ``use_sim_time``).

This is the one implementation of those rules. The ROS node (``nav_policy.policy_node``) wires it
to topics, and the bag replay's offline reference (``navbags.reference``) drives it with messages
decoded from a bag. Both hand their messages to the same duck-typed adapters
(:meth:`PolicyController.scan_message`, :meth:`~PolicyController.odom_message`,
:meth:`~PolicyController.goal_message`, :meth:`~PolicyController.path_message`): anything with the
attribute names of ``sensor_msgs/LaserScan``, ``nav_msgs/Odometry``, ``geometry_msgs/PoseStamped``
and ``nav_msgs/Path`` works (rclpy messages, ``rosbags`` dataclasses), so how a message is folded
into the controller's state also exists once. Both build the controller from the node's parameters
with :func:`resolve_settings`.

Path following: with a path set (:meth:`PolicyController.set_path`), the final goal is the path's
last point, and each tick the policy is given the sub-goal of the lookahead rule
(:func:`navcontract.subgoal.follow_path`, the same code training runs) instead of the goal pose.
A new goal pose, or an empty path, ends path following. The rule's lookahead and search window
are the ones the policy was trained with (the contract's ``path_following`` section), unless the
node's parameters set them (:func:`resolve_path_rule`).

Collision guard: when the bundle carries a ``guard`` section (the guard the policy was trained
driving through, :mod:`navcontract.guard`), each driving command, once clamped to the limits and
before the velocity smoother, has its planar part scaled by :func:`navcontract.guard.apply_guard` on
the very ranges the runtime built this tick's observation from (``last_scan_report.ranges``: the
contract's beams, metres) and the contract's max range, as training's ``step()`` does with the scan
its policy observed. ``wz`` is never touched; the node's ``guard`` parameter turns it off.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from navcontract.guard import GuardRule, apply_guard
from navcontract.scan import (
    DEFAULT_MAX_FILL_GAP,
    DEFAULT_MIN_COVERAGE,
    DEFAULT_MIN_VALID_SHARE,
    ScanInput,
    ScanOptions,
    ScanReport,
    ScanUnusable,
)
from navcontract.subgoal import LookaheadRule, follow_path, path_length
from navdeploy.scan_map import ScanMapCfg, ScanPlanner
from navdeploy.smoother import AccelLimits, VelocitySmoother


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
    ERROR = "error"


FAULT_STATES = {
    State.STALE_SCAN,
    State.STALE_ODOM,
    State.BAD_SCAN,
    State.BLIND_SCAN,
    State.LOW_COVERAGE,
    State.BAD_ODOM,
    State.CLOCK_STALLED,
    State.ERROR,
}

SCAN_FAULT_STATE = {
    "too_few_valid": State.BLIND_SCAN,
    "blind_front": State.BLIND_SCAN,
    "low_coverage": State.LOW_COVERAGE,
}
"""The state of a scan refused for a named reason (``ScanUnusable.code``); any other reason: BAD_SCAN."""


@dataclass(frozen=True)
class Limits:
    v_max: float
    omega_max: float
    limit_planar_speed: bool = True


@dataclass(frozen=True)
class Transform2D:
    """Pose of a frame in the odometry frame: p_odom = R(yaw) p_frame + (x, y)."""

    x: float
    y: float
    yaw: float

    def apply(self, px: float, py: float) -> tuple[float, float]:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return self.x + c * px - s * py, self.y + s * px + c * py

    def apply_points(self, points: np.ndarray) -> np.ndarray:
        """(K, 2) points in the frame -> (K, 2) in the odometry frame (float64)."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        rot = np.array([[c, -s], [s, c]])
        return np.asarray(points, dtype=np.float64) @ rot.T + np.array([self.x, self.y])


def parse_goal_frames(text: str) -> dict[str, Transform2D]:
    """``"map 1.0 2.0 0.0; world 0 0 1.57"`` -> {frame: Transform2D}. Raises ValueError if malformed."""
    out: dict[str, Transform2D] = {}
    for item in text.replace("\n", ";").split(";"):
        item = item.strip()
        if not item:
            continue
        parts = item.split()
        if len(parts) != 4:
            raise ValueError(f"static goal frame '{item}': expected 'frame x y yaw'")
        x, y, yaw = (float(v) for v in parts[1:])
        if not all(math.isfinite(v) for v in (x, y, yaw)):
            raise ValueError(f"static goal frame '{item}': non-finite value")
        out[parts[0]] = Transform2D(x, y, yaw)
    return out


DEFAULT_CLOCK_TIMEOUT = 1.0
"""[s wall] /clock not advancing for this long (use_sim_time) -> zero command, clock_stalled."""

MAX_PATH_POINTS = 10000
"""A path with more poses than this is refused (the lookahead rule runs over all of them each tick)."""

_UNCHANGED = "; nothing changed (the current path or goal stands)"


@dataclass(frozen=True)
class ControllerSettings:
    """The controller's configuration, resolved from the node's parameters and the bundle's contract."""

    control_period: float  # [s] the node's timer period
    goal_tolerance: float  # [m]
    limits: Limits
    stale_timeout: float  # [s]
    odom_frame: str = "odom"
    goal_frames: dict[str, Transform2D] = field(default_factory=dict)
    scan_options: ScanOptions = field(default_factory=ScanOptions)
    clock_timeout: float = DEFAULT_CLOCK_TIMEOUT  # [s wall]
    limit_sources: tuple[str, ...] = ()  # one line per limit: its value and which side set it
    accel_limits: AccelLimits = field(default_factory=AccelLimits)  # the velocity smoother's; none: off
    path_rule: LookaheadRule = field(default_factory=LookaheadRule)  # sub-goal of a path (navcontract.subgoal)
    path_source: str = ""  # one line: the path rule's values and which side set each
    guard: GuardRule | None = None  # the collision guard on driving commands (navcontract.guard); None: off
    max_range: float = math.inf  # [m] the contract's lidar max_range: a beam at it is no return (the guard)
    guard_source: str = ""  # one line: the guard in use, or why there is none
    scan_map: ScanMapCfg | None = None  # goal without a path: plan on the robot's own scans; None: off
    robot_radius: float | None = None  # [m] the contract's robot.radius (the scan map plans for it)
    scan_map_source: str = ""  # one line: the scan map in use, or why there is none


def check_number(name: str, value: Any, lo: float, hi: float = math.inf, *, lo_open: bool = False) -> float:
    """``value`` as a finite float in [lo, hi] (``(lo, hi]`` with ``lo_open``); ValueError naming the
    parameter otherwise (NaN and infinities included)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ValueError(f"parameter '{name}' must be a number, got {value!r}")
    v = float(value)
    below = v <= lo if lo_open else v < lo
    if not math.isfinite(v) or below or v > hi:
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
        raise ValueError(f"parameter '{name}' must be finite and in {rng}, got {value}")
    return v


def resolve_settings(
    contract: Any,
    *,
    control_period: float = 0.0,
    goal_tolerance: float = 0.0,
    v_max: float = 0.0,
    omega_max: float = 0.0,
    stale_timeout: float = 0.5,
    odom_frame: str = "odom",
    static_goal_frames: str = "",
    below_min: str = "obstacle",
    fill: str = "nearest",
    fill_value: float = 0.0,
    min_valid_share: float = DEFAULT_MIN_VALID_SHARE,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
    max_fill_gap: int = DEFAULT_MAX_FILL_GAP,
    clock_timeout: float = DEFAULT_CLOCK_TIMEOUT,
    velocity_smoother: bool = True,
    max_accel_linear: float = 0.0,
    max_accel_angular: float = 0.0,
    path_lookahead: float = 0.0,
    path_search_window: float = 0.0,
    guard: bool = True,
    scan_map: bool = True,
) -> tuple[ControllerSettings, list[str]]:
    """The node's parameters over the bundle's contract: 0 takes the contract's value; for each limit
    the smaller of the node's and the contract's wins. Every number must be finite and in range.
    The velocity smoother's acceleration limits: a node value > 0 replaces the contract's (warned
    when outside the trained range), 0 takes the contract's ``robot_response.accel_limit`` (none in
    a bundle without one); ``velocity_smoother`` false turns it off. ``path_lookahead`` and
    ``path_search_window`` set the path-following rule (:class:`navcontract.subgoal.LookaheadRule`;
    :func:`resolve_path_rule`): 0 takes the bundle's trained value, a value > 0 replaces it.
    ``guard``: apply the bundle's collision guard (:func:`resolve_guard`; none without the section).
    ``scan_map``: with a goal and no path, plan on a map of the robot's own scans
    (:mod:`navdeploy.scan_map`; off for a bundle that does not state its robot radius).
    Returns the settings and warnings to log; raises ValueError naming the parameter when one is
    unusable (the node refuses to start with that one line)."""
    warnings: list[str] = []
    sources: list[str] = []

    def pick(name: str, value: float, default: float, unit: str, cap: bool) -> float:
        value = check_number(name, value, 0.0, 1e6)
        if value == 0:
            if cap:
                sources.append(f"{name} {default:g} {unit} (bundle contract; node parameter 0 = the bundle's)")
            return default
        if cap and value > default:
            warnings.append(f"{name}={value:g} exceeds the bundle's {default:g}; using {default:g}")
            sources.append(f"{name} {default:g} {unit} (bundle contract, below node parameter {value:g})")
            return default
        if cap:
            sources.append(f"{name} {value:g} {unit} (node parameter, below the bundle's {default:g})")
        return value

    period = pick("control_period", control_period, float(contract.control_period), "s", cap=False)
    check_number("control_period", period, 0.0, 10.0, lo_open=True)
    tol = pick("goal_tolerance", goal_tolerance, float(contract.goal_tolerance), "m", cap=False)
    limits = Limits(
        pick("v_max", v_max, float(contract.v_max), "m/s", cap=True),
        pick("omega_max", omega_max, float(contract.omega_max), "rad/s", cap=True),
        bool(contract.scaling.limit_planar_speed),
    )
    stale = check_number("stale_timeout", stale_timeout, 0.0, 60.0, lo_open=True)
    clock = check_number("clock_timeout", clock_timeout, 0.0, 60.0, lo_open=True)
    check_number("min_valid_share", min_valid_share, 0.0, 1.0)
    check_number("min_coverage", min_coverage, 0.0, 1.0)
    gap = check_number("max_fill_gap", max_fill_gap, 0.0, float(contract.num_beams))
    if gap != int(gap):
        raise ValueError(f"parameter 'max_fill_gap' must be a whole number of sectors, got {max_fill_gap}")
    fv = check_number("fill_value", fill_value, 0.0, 1e6)
    try:
        scan_options = ScanOptions(
            fill=str(fill),
            fill_value=fv if fill == "constant" else None,
            below_min=str(below_min),
            min_valid_share=float(min_valid_share),
            min_coverage=float(min_coverage),
            max_fill_gap=int(gap),
        )
    except ValueError as exc:
        raise ValueError(f"scan parameters: {exc}") from exc
    if fill == "constant" and fv == 0.0:
        warnings.append(
            "fill 'constant' with fill_value 0: every unseen sector reads as an obstacle touching the robot"
        )
    try:
        frames = parse_goal_frames(static_goal_frames)
    except ValueError as exc:
        raise ValueError(f"parameter 'static_goal_frames': {exc}") from exc
    accel = resolve_accel_limits(
        contract, velocity_smoother, max_accel_linear, max_accel_angular, warnings=warnings, sources=sources
    )
    rule, path_source = resolve_path_rule(contract, path_lookahead, path_search_window, warnings=warnings)
    guard_rule, guard_source = resolve_guard(contract, guard, warnings=warnings)
    if guard_rule is not None and accel.linear is not None and accel.linear < guard_rule.decel:
        warnings.append(
            f"the velocity smoother's linear limit {accel.linear:g} m/s^2 is below the guard's braking "
            f"deceleration {guard_rule.decel:g} m/s^2: the robot cannot stop where the guard plans to "
            "(use a bundle trained with a lower env.guard.decel)"
        )
    radius = getattr(contract, "robot_radius", None)
    map_cfg: ScanMapCfg | None = None
    if not scan_map:
        map_source = "scan map off (parameter scan_map false): a goal without a path is driven to directly"
    elif radius is None:
        map_source = "scan map off: the bundle does not state robot.radius (exported before it)"
    else:
        map_cfg = ScanMapCfg()
        map_source = (
            f"scan map on (goal without a path: {map_cfg.resolution:g} m cells, replan every "
            f"{map_cfg.replan_period:g} s, radius {float(radius):g} m plus {map_cfg.margin:g} m, "
            f"{map_cfg.squeeze:g} m less as the last resort)"
        )
    settings = ControllerSettings(
        period,
        tol,
        limits,
        stale,
        odom_frame,
        frames,
        scan_options,
        clock,
        tuple(sources),
        accel_limits=accel,
        path_rule=rule,
        path_source=path_source,
        guard=guard_rule,
        max_range=float(contract.max_range) if guard_rule is not None else math.inf,
        guard_source=guard_source,
        scan_map=map_cfg,
        robot_radius=None if radius is None else float(radius),
        scan_map_source=map_source,
    )
    return settings, warnings


def resolve_guard(contract: Any, enabled: bool, *, warnings: list[str]) -> tuple[GuardRule | None, str]:
    """The collision guard from the node's ``guard`` parameter and the contract's ``guard`` section:
    the section's rule when both are there, else None. Returns the rule and one line for the log;
    appends a warning when the parameter turns off a guard the policy was trained with."""
    if not isinstance(enabled, bool | np.bool_):
        raise ValueError(f"parameter 'guard' must be true or false, got {enabled!r}")
    trained: GuardRule | None = getattr(contract, "guard", None)
    if trained is None:
        return None, "guard none (the bundle has no guard section: the policy was trained without it)"
    if not enabled:
        warnings.append("guard off, but the policy was trained driving through it: nothing slows it near obstacles")
        return None, "guard off (node parameter guard false)"
    return trained, (
        f"guard radius {trained.radius:g} m, margin {trained.margin:g} m, headway {trained.headway:g} s, "
        f"decel {trained.decel:g} m/s^2, slide {'on' if trained.slide else 'off'} (bundle contract)"
    )


def resolve_path_rule(
    contract: Any, lookahead: float, search_window: float, *, warnings: list[str]
) -> tuple[LookaheadRule, str]:
    """The path-following rule from the node's parameters and the contract's ``path_following``
    section, as ``goal_tolerance`` is resolved: a parameter of 0 takes the bundle's trained value
    (:class:`LookaheadRule`'s default in a bundle without the section), a value > 0 replaces it
    (warned about when it differs from a rule the policy was trained to follow). Returns the rule and
    one line for the log saying where each value came from; appends warnings to ``warnings``."""
    given = (
        ("path_lookahead", check_number("path_lookahead", lookahead, 0.0, 100.0)),
        ("path_search_window", check_number("path_search_window", search_window, 0.0, 100.0)),
    )
    trained = getattr(contract, "path_following", None)
    base = trained.rule if trained is not None else LookaheadRule()
    values: list[float] = []
    parts: list[str] = []
    for (name, value), default in zip(given, (base.lookahead, base.search_window), strict=True):
        if value > 0:
            values.append(value)
            origin = "node parameter" + (f"; the bundle's {default:g} m" if trained is not None else "")
            if trained is not None and trained.trained_share > 0 and value != default:
                warnings.append(
                    f"{name}={value:g} m differs from the {default:g} m the policy was trained to follow paths with"
                )
        else:
            values.append(default)
            if trained is not None:
                origin = "bundle contract; node parameter 0 = the bundle's"
            else:
                origin = "default; the bundle has no path_following section"
        parts.append(f"{name} {values[-1]:g} m ({origin})")
    if trained is None:
        tail = "trained rule not stated (bundle exported before the path_following section)"
    elif trained.trained_share > 0:
        tail = f"the policy followed planned paths in {trained.trained_share * 100:g}% of its training episodes"
    else:
        tail = "the policy was trained without path following (share 0)"
    return LookaheadRule(*values), f"{', '.join(parts)}; {tail}"


def resolve_accel_limits(
    contract: Any,
    enabled: bool,
    linear: float,
    angular: float,
    *,
    warnings: list[str],
    sources: list[str],
) -> AccelLimits:
    """The velocity smoother's limits from the node's parameters and the contract's
    ``robot_response`` (see :func:`resolve_settings`); appends what to log to ``warnings`` and
    ``sources``."""
    if not isinstance(enabled, bool | np.bool_):
        raise ValueError(f"parameter 'velocity_smoother' must be true or false, got {enabled!r}")
    lin = check_number("max_accel_linear", linear, 0.0, 1e4)
    ang = check_number("max_accel_angular", angular, 0.0, 1e4)
    response = getattr(contract, "response", None)
    if not enabled:
        sources.append("velocity smoother off (node parameter velocity_smoother false)")
        if lin or ang:
            warnings.append("max_accel_linear / max_accel_angular are ignored: velocity_smoother is false")
        if response is not None and (response.accel_linear or response.accel_angular):
            warnings.append(
                "velocity smoother off, but the policy was trained with acceleration limits: "
                "the base itself must not accelerate faster than " + response.describe()
            )
        return AccelLimits()
    if response is None:
        absent = "none (the bundle has no robot_response section: format 1)"
    else:
        absent = "none (the policy was trained without an acceleration limit)"
    picked: list[float | None] = []
    for name, value, trained, unit in (
        ("max_accel_linear", lin, response.accel_linear if response else None, "m/s^2"),
        ("max_accel_angular", ang, response.accel_angular if response else None, "rad/s^2"),
    ):
        if value > 0:
            picked.append(value)
            sources.append(f"{name} {value:g} {unit} (node parameter)")
            if trained is not None and not trained[0] <= value <= trained[1]:
                warnings.append(
                    f"{name}={value:g} {unit} is outside the range the policy was trained with "
                    f"({trained[0]:g}-{trained[1]:g} {unit})"
                )
        elif trained is not None:
            picked.append(trained[0])
            sources.append(
                f"{name} {trained[0]:g} {unit} (bundle contract: the lowest trained, of {trained[0]:g}-{trained[1]:g})"
            )
        else:
            picked.append(None)
            sources.append(f"{name} {absent}")
    return AccelLimits(*picked)


def stamp_seconds(stamp: Any) -> float:
    """A ``builtin_interfaces/Time``-like stamp (``sec``, ``nanosec``) in seconds."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def header_time(header: Any, now: float) -> float:
    """The time a message was taken: its header stamp, or ``now`` when the stamp is zero (unset)."""
    t = stamp_seconds(header.stamp)
    return t if t > 0 else now


def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float | None:
    """Yaw of a quaternion, or None when it is not finite or has (near) zero norm."""
    q = (x, y, z, w)
    if not all(math.isfinite(v) for v in q):
        return None
    n = math.sqrt(sum(v * v for v in q))
    if n < 1e-6:
        return None
    x, y, z, w = (v / n for v in q)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def clamp_command(cmd: np.ndarray, limits: Limits) -> np.ndarray:
    """Clamp a body-frame [vx, vy, wz] to the limits; non-finite input gives zeros."""
    cmd = np.asarray(cmd, dtype=np.float64).reshape(-1)
    if cmd.shape != (3,) or not np.all(np.isfinite(cmd)):
        return np.zeros(3)
    vx, vy, wz = (float(v) for v in cmd)
    v = limits.v_max
    vx, vy = min(max(vx, -v), v), min(max(vy, -v), v)
    if limits.limit_planar_speed:
        speed = math.hypot(vx, vy)
        if speed > v > 0:
            vx, vy = vx * v / speed, vy * v / speed
    wz = min(max(wz, -limits.omega_max), limits.omega_max)
    return np.array([vx, vy, wz])


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


class ClockWatchdog:
    """Under ``use_sim_time`` the node's timer runs on /clock: when /clock stops, so does the timer,
    and the last command would stand on the base. This watchdog runs on wall time: once /clock has
    started, ROS time not advancing for ``timeout`` wall seconds gives a zero command (state
    ``clock_stalled``) on every wall tick until it advances again. Before the first /clock nothing
    was ever commanded, so there is nothing to cancel (and nothing is published)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = float(timeout)
        self._ros: float | None = None
        self._wall: float | None = None

    def check(self, ros_now: float, wall_now: float) -> TickResult | None:
        """The zero command of a stalled clock, or None while it advances (or has not started)."""
        if ros_now <= 0.0:
            return None
        if self._ros is None or ros_now != self._ros:
            self._ros, self._wall = ros_now, wall_now
            return None
        stalled = wall_now - float(self._wall)
        if stalled <= self.timeout:
            return None
        return TickResult(
            np.zeros(3),
            State.CLOCK_STALLED,
            f"/clock stopped at {ros_now:.3f} s: no advance for {stalled:.2f} s wall (clock_timeout {self.timeout} s)",
            None,
            None,
        )


@dataclass
class _Stamped:
    value: Any
    stamp: float


@dataclass
class PolicyController:
    runtime: Any  # navdeploy.runtime.PolicyRuntime (or a stand-in with .step / .reset)
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
    scan_planner: ScanPlanner | None = None  # goal without a path: sub-goal on the robot's own map

    @classmethod
    def from_settings(cls, runtime: Any, settings: ControllerSettings) -> PolicyController:
        """The controller the node runs: ``settings`` from :func:`resolve_settings` (the scan options go
        to the runtime), scan errors of the deploy runtime counted as unusable scans."""
        configure = getattr(runtime, "configure_scan", None)
        if configure is not None:
            configure(settings.scan_options)
        elif hasattr(runtime, "scan_options"):
            runtime.scan_options = settings.scan_options
        return cls(
            runtime=runtime,
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
            scan_planner=(
                ScanPlanner(settings.scan_map, settings.robot_radius, settings.path_rule)
                if settings.scan_map is not None and settings.robot_radius is not None
                else None
            ),
        )

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

    # ---------------------------------------------------------------- inputs
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
        end = self.path[-1]
        return True, f"new path of {len(pts)} poses to ({end[0]:.2f}, {end[1]:.2f}) in '{self.odom_frame}'"

    def clear_goal(self) -> None:
        """No goal pose and no path: zero until a new one comes."""
        self.goal = None
        self.path = None

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
            scan = ScanInput.from_msg(msg)
            stamp = header_time(msg.header, now)
        except Exception as exc:  # unreadable: not even a ScanInput
            reason = f"scan unusable: {exc}"
            self.set_scan_unusable(reason)
            return reason
        self.set_scan(scan, stamp)
        return None

    def odom_message(self, msg: Any, now: float) -> str | None:
        """Fold an ``Odometry``-like message (pose in ``odom_frame``, body-frame twist); returns why it
        is unusable (see :meth:`set_odom`), else None."""
        try:
            p, q, t = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
            position = (float(p.x), float(p.y))
            quaternion = (float(q.x), float(q.y), float(q.z), float(q.w))
            twist = (float(t.linear.x), float(t.linear.y), float(t.angular.z))
            stamp, frame_id = header_time(msg.header, now), str(msg.header.frame_id)
        except Exception as exc:
            reason = f"odometry message could not be read: {type(exc).__name__}: {exc}"
            self.input_failed("odom", reason)
            return reason
        return self.set_odom(position, quaternion, twist, stamp, frame_id)

    def goal_message(self, msg: Any) -> tuple[bool, str]:
        """Fold a ``PoseStamped``-like goal (see :meth:`set_goal`); returns (accepted, what to log)."""
        try:
            x, y, frame_id = float(msg.pose.position.x), float(msg.pose.position.y), str(msg.header.frame_id)
        except Exception as exc:
            self.clear_goal()
            return False, f"goal rejected: message could not be read: {type(exc).__name__}: {exc}; stopping"
        return self.set_goal(x, y, frame_id)

    def path_message(self, msg: Any) -> tuple[bool, str]:
        """Fold a ``nav_msgs/Path``-like message (``header.frame_id``, ``poses[i].pose.position``; see
        :meth:`set_path`); returns (accepted, what to log). An unreadable message is refused like
        any unusable path: nothing changes."""
        try:
            frame_id = str(msg.header.frame_id)
            poses = msg.poses
            n = len(poses)
            if n > MAX_PATH_POINTS:
                return False, f"path refused: {n} poses, more than {MAX_PATH_POINTS}{_UNCHANGED}"
            pts = np.empty((n, 2), dtype=np.float64)
            for i, pose in enumerate(poses):
                p = pose.pose.position
                pts[i, 0], pts[i, 1] = float(p.x), float(p.y)
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
        return getattr(self.runtime, "last_scan_report", None)

    def tick(self, now: float) -> TickResult:
        """The command of the control tick at ``now``; never raises, never returns a non-finite command.

        A driving command goes through the velocity smoother (when on); any other state's zero goes
        out as it is, at once, and the smoother starts again from rest."""
        self._subgoal = self._path_remaining = None
        try:
            res = self._decide(now)
            if res.state == State.DRIVING and self.smoother is not None and np.all(np.isfinite(res.cmd)):
                res.cmd = self.smoother.step(res.cmd, now, clamp=lambda c: clamp_command(c, self.limits))
        except Exception as exc:  # never let a tick die without a zero command
            res = self._zero(State.ERROR, f"tick failed: {type(exc).__name__}: {exc}")
        if not np.all(np.isfinite(res.cmd)):
            res = self._zero(State.ERROR, "non-finite command replaced by zero", res.distance)
        if res.state != State.DRIVING:
            self.stopped(now)
        res.path_in_use = self.path is not None
        res.subgoal, res.path_remaining = self._subgoal, self._path_remaining
        return res

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
        if self.reached or (distance < self.goal_tolerance and near_end):
            self.reached = True
            return self._zero(
                State.GOAL_REACHED, f"goal reached ({distance:.3f} m < {self.goal_tolerance} m)", distance
            )
        if self._need_reset:
            self.runtime.reset()
            self._need_reset = False
        t0 = time.perf_counter()
        try:
            raw = self.runtime.step(self.scan.value, pose=tuple(pose), twist=tuple(twist), goal=target)
        except self.scan_errors as exc:
            code = getattr(exc, "code", None)
            state = SCAN_FAULT_STATE.get(code, State.BAD_SCAN)
            return self._zero(state, f"scan unusable ({code}): {exc}", distance, code, getattr(exc, "report", None))
        except Exception as exc:  # any other failure: stop, say why
            return self._zero(State.ERROR, f"policy step failed: {type(exc).__name__}: {exc}", distance)
        self.last_inference_ms = (time.perf_counter() - t0) * 1e3
        raw = np.asarray(raw, dtype=np.float64).reshape(-1)
        if raw.shape != (3,) or not np.all(np.isfinite(raw)):
            return self._zero(
                State.ERROR, f"policy returned a non-finite or misshapen command {raw.tolist()}", distance
            )
        cmd = clamp_command(raw, self.limits)
        scale = None
        if self.guard is not None:
            cmd, scale = self._guarded(cmd, self.guard)
        return TickResult(
            cmd, State.DRIVING, "driving", distance, self.last_inference_ms, None, self._report(), guard_scale=scale
        )

    def _guarded(self, cmd: np.ndarray, rule: GuardRule) -> tuple[np.ndarray, float]:
        """``cmd`` with its planar part scaled by ``rule`` on the ranges the policy observed this tick
        (the runtime's ``last_scan_report``, set by its step); wz as it was. Raises when the runtime
        keeps no report (the tick then stops with ``error``)."""
        report = self._report()
        if report is None:
            raise RuntimeError("the guard has no scan: the runtime keeps no last_scan_report")
        guarded, scale = apply_guard(report.ranges, cmd, rule, self.max_range)
        return guarded, float(scale)

    def _mapped(self, pose: np.ndarray, final: tuple[float, float], now: float) -> tuple[float, float]:
        """Goal without a path: fold a new scan into the robot's map and take the sub-goal along the
        path planned on it (:mod:`navdeploy.scan_map`), or the goal itself when the map has none."""
        planner = self.scan_planner
        if planner is None or self.scan is None:
            return final
        fresh = self._mapped_stamp != self.scan.stamp
        self._mapped_stamp = self.scan.stamp
        sub = planner.step(self.scan.value if fresh else None, pose, final, now)
        if sub is None:
            return final
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
        self._subgoal = (float(sub[0, 0]), float(sub[0, 1]))
        self._path_remaining = float(remaining[0])
        near_end = self._path_length - self.path_progress <= self.path_rule.lookahead + self.goal_tolerance
        return self._subgoal, near_end
