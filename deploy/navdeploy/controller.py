"""The policy node's decision logic, free of ROS: input gating, goal handling, safety, clamping.

``PolicyController`` keeps the latest scan, odometry and goal with the time each was taken, and on
every control tick decides between a zero command (no goal, goal reached, stale or unusable input,
any error) and the policy's command from the deploy runtime, clamped to the configured limits.
The observation and the action scaling belong to ``navdeploy.runtime``: nothing here rebuilds them.
Times are ROS times in seconds (simulated time under ``use_sim_time``).

This is the one implementation of those rules. The ROS node (``nav_policy.policy_node``) wires it
to topics, and the bag replay's offline reference (``navbags.reference``) drives it with messages
decoded from a bag. Both hand their messages to the same duck-typed adapters
(:meth:`PolicyController.scan_message`, :meth:`~PolicyController.odom_message`,
:meth:`~PolicyController.goal_message`): anything with the attribute names of ``sensor_msgs/LaserScan``,
``nav_msgs/Odometry`` and ``geometry_msgs/PoseStamped`` works (rclpy messages, ``rosbags``
dataclasses), so how a message is folded into the controller's state also exists once. Both build
the controller from the node's parameters with :func:`resolve_settings`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from navdeploy.scan import ScanInput, ScanUnusable


class State(StrEnum):
    WAITING_INPUT = "waiting_input"  # no scan or odometry received yet
    NO_GOAL = "no_goal"
    DRIVING = "driving"
    GOAL_REACHED = "goal_reached"
    STALE_SCAN = "stale_scan"
    STALE_ODOM = "stale_odom"
    BAD_SCAN = "bad_scan"
    BAD_ODOM = "bad_odom"
    ERROR = "error"


FAULT_STATES = {State.STALE_SCAN, State.STALE_ODOM, State.BAD_SCAN, State.BAD_ODOM, State.ERROR}


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


@dataclass(frozen=True)
class ControllerSettings:
    """The controller's configuration, resolved from the node's parameters and the bundle's contract."""

    control_period: float  # [s] the node's timer period
    goal_tolerance: float  # [m]
    limits: Limits
    stale_timeout: float  # [s]
    odom_frame: str = "odom"
    goal_frames: dict[str, Transform2D] = field(default_factory=dict)


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
) -> tuple[ControllerSettings, list[str]]:
    """The node's parameters over the bundle's contract: 0 takes the contract's value, limits above the
    contract's are capped to it. Returns the settings and warnings to log; raises ValueError naming the
    parameter when one is unusable."""
    warnings: list[str] = []

    def pick(name: str, value: float, default: float, cap: bool) -> float:
        value = float(value)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"parameter '{name}' must be >= 0 (0 = take the bundle's {default}), got {value}")
        if value == 0:
            return default
        if cap and value > default:
            warnings.append(f"{name}={value} exceeds the bundle's {default}; using {default}")
            return default
        return value

    period = pick("control_period", control_period, float(contract.control_period), cap=False)
    tol = pick("goal_tolerance", goal_tolerance, float(contract.goal_tolerance), cap=False)
    limits = Limits(
        pick("v_max", v_max, float(contract.v_max), cap=True),
        pick("omega_max", omega_max, float(contract.omega_max), cap=True),
        bool(contract.scaling.limit_planar_speed),
    )
    if not (math.isfinite(stale_timeout) and stale_timeout > 0):
        raise ValueError(f"parameter 'stale_timeout' must be > 0, got {stale_timeout}")
    try:
        frames = parse_goal_frames(static_goal_frames)
    except ValueError as exc:
        raise ValueError(f"parameter 'static_goal_frames': {exc}") from exc
    return ControllerSettings(period, tol, limits, float(stale_timeout), odom_frame, frames), warnings


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

    @classmethod
    def from_settings(cls, runtime: Any, settings: ControllerSettings) -> PolicyController:
        """The controller the node runs: ``settings`` from :func:`resolve_settings`, scan errors of the
        deploy runtime counted as unusable scans."""
        return cls(
            runtime=runtime,
            limits=settings.limits,
            goal_tolerance=settings.goal_tolerance,
            stale_timeout=settings.stale_timeout,
            odom_frame=settings.odom_frame,
            goal_frames=dict(settings.goal_frames),
            scan_errors=(ScanUnusable,),
        )

    def __post_init__(self) -> None:
        self.scan: _Stamped | None = None
        self.odom: _Stamped | None = None  # value: (pose(3), twist(3))
        self.odom_error: str | None = None
        self.scan_error: str | None = None
        self.goal: tuple[float, float] | None = None
        self.reached = False
        self.last_inference_ms: float | None = None
        self._need_reset = True

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

    def set_goal(self, x: float, y: float, frame_id: str) -> tuple[bool, str]:
        """Accept a goal in the odometry frame (or a configured static frame); else clear the goal."""
        if not (math.isfinite(x) and math.isfinite(y)):
            self.goal = None
            return False, f"goal rejected: position ({x}, {y}) is not finite; stopping"
        if frame_id == self.odom_frame:
            gx, gy = x, y
        elif frame_id in self.goal_frames:
            gx, gy = self.goal_frames[frame_id].apply(x, y)
        else:
            self.goal = None
            known = ", ".join([self.odom_frame, *self.goal_frames]) or self.odom_frame
            return False, (
                f"goal rejected: frame '{frame_id}' is not the odometry frame and no static transform "
                f"is configured for it (accepted frames: {known}); stopping"
            )
        self.goal = (float(gx), float(gy))
        self.reached = False
        self._need_reset = True
        return True, f"new goal ({gx:.2f}, {gy:.2f}) in '{self.odom_frame}'"

    def clear_goal(self) -> None:
        self.goal = None

    def input_failed(self, kind: str, reason: str) -> None:
        """A message of ``kind`` (scan, odom, goal) could not be handled at all: that input is unusable
        (scan, odometry: zero until a good one arrives; goal: dropped)."""
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

    # ---------------------------------------------------------------- control
    def _age_problem(self, item: _Stamped, now: float) -> str | None:
        age = now - item.stamp
        if age > self.stale_timeout:
            return f"{age:.3f} s old (timeout {self.stale_timeout:.3f} s)"
        if age < -self.stale_timeout:
            return f"stamped {-age:.3f} s in the future (clock jumped back?)"
        return None

    def _zero(self, state: State, reason: str, distance: float | None = None) -> TickResult:
        if state in FAULT_STATES or state in (State.NO_GOAL, State.GOAL_REACHED):
            self._need_reset = True
        return TickResult(np.zeros(3), state, reason, distance, None)

    def tick(self, now: float) -> TickResult:
        """The command of the control tick at ``now``; never raises, never returns a non-finite command."""
        try:
            res = self._decide(now)
        except Exception as exc:  # never let a tick die without a zero command
            return self._zero(State.ERROR, f"tick failed: {type(exc).__name__}: {exc}")
        if not np.all(np.isfinite(res.cmd)):
            return self._zero(State.ERROR, "non-finite command replaced by zero", res.distance)
        return res

    def _decide(self, now: float) -> TickResult:
        if self.odom_error is not None:
            return self._zero(State.BAD_ODOM, self.odom_error)
        if self.scan_error is not None:
            return self._zero(State.BAD_SCAN, self.scan_error)
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
        if self.goal is None:
            return self._zero(State.NO_GOAL, "no goal")
        distance = float(math.hypot(self.goal[0] - pose[0], self.goal[1] - pose[1]))
        if self.reached or distance < self.goal_tolerance:
            self.reached = True
            return self._zero(
                State.GOAL_REACHED, f"goal reached ({distance:.3f} m < {self.goal_tolerance} m)", distance
            )
        if self._need_reset:
            self.runtime.reset()
            self._need_reset = False
        t0 = time.perf_counter()
        try:
            raw = self.runtime.step(self.scan.value, pose=tuple(pose), twist=tuple(twist), goal=self.goal)
        except self.scan_errors as exc:
            return self._zero(State.BAD_SCAN, f"scan unusable: {exc}", distance)
        except Exception as exc:  # any other failure: stop, say why
            return self._zero(State.ERROR, f"policy step failed: {type(exc).__name__}: {exc}", distance)
        self.last_inference_ms = (time.perf_counter() - t0) * 1e3
        raw = np.asarray(raw, dtype=np.float64).reshape(-1)
        if raw.shape != (3,) or not np.all(np.isfinite(raw)):
            return self._zero(
                State.ERROR, f"policy returned a non-finite or misshapen command {raw.tolist()}", distance
            )
        return TickResult(clamp_command(raw, self.limits), State.DRIVING, "driving", distance, self.last_inference_ms)
