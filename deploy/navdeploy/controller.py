"""The policy node's decision logic, free of ROS: input gating, goal handling, safety, clamping.

``PolicyController`` keeps the latest scan, odometry and goal with the time each was taken, and on
every control tick decides between a zero command (no goal, goal reached, stale or unusable input,
any error) and the policy's command from the deploy runtime, clamped to the configured limits.
The observation and the action scaling belong to ``navdeploy.runtime``: nothing here rebuilds them.
Times are ROS times in seconds (simulated time under ``use_sim_time``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np


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
