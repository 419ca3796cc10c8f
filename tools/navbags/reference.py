"""The offline reference: what the policy node must publish for a bag, computed without ROS.

The bag's input messages are taken in recorded order, decoded with ``rosbags`` (an independent
CDR decoder), and folded into the node's input state as its callbacks do; every ``/clock`` message
that reaches the node's next timer deadline is a control tick, decided by the node's documented
rules (``nav_policy.policy_node`` / ``controller``, restated here on purpose rather than imported,
so that replay checks the node against its specification, not against itself):

1. odometry unusable (frame other than ``odom_frame``, invalid quaternion, non-finite values)
   -> ``bad_odom``; 2. a scan that could not be read -> ``bad_scan``; 3. no scan or no odometry
   yet -> ``waiting_input``; 4. scan, then odometry, older than ``stale_timeout`` (or stamped that
   far in the future) at the tick time -> ``stale_scan`` / ``stale_odom``; 5. no goal (or a goal
   rejected for its frame or NaN) -> ``no_goal``; 6. within ``goal_tolerance`` -> ``goal_reached``,
   latched until a new goal; 7. otherwise the deploy runtime's command (``PolicyRuntime.step``),
   clamped to the limits; a scan the runtime cannot use -> ``bad_scan``, any other failure or a
   non-finite command -> ``error``. Every state but ``driving`` publishes exactly zero, and the
   runtime is reset (previous action forgotten) before the first policy step after a zero or a new goal.

Timer: under ``use_sim_time`` the node's timer is created at ROS time 0, so its deadlines lie on the
grid ``n * period``; a clock message at time ``t >= next`` fires it once and moves ``next`` to the
first grid point after ``t`` (rcl skips missed periods).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from navbags.bagio import CLOCK, GOAL, INPUT, ODOM, SCAN, BagMessage, decode

ZERO_STATES = ("waiting_input", "no_goal", "goal_reached", "stale_scan", "stale_odom", "bad_scan", "bad_odom", "error")
FAULTS = ("stale_scan", "stale_odom", "bad_scan", "bad_odom", "error")


@dataclass(frozen=True)
class NodeParams:
    """The policy node parameters replay sets (and the reference assumes)."""

    stale_timeout: float = 0.5
    odom_frame: str = "odom"
    control_period: float = 0.0  # 0: the bundle's
    goal_tolerance: float = 0.0  # 0: the bundle's

    def ros_params(self) -> dict[str, object]:
        return {
            "stale_timeout": self.stale_timeout,
            "odom_frame": self.odom_frame,
            "control_period": self.control_period,
            "goal_tolerance": self.goal_tolerance,
        }


@dataclass
class Tick:
    k: int
    clock_index: int  # bag index of the /clock message that fired it
    t_ns: int
    state: str
    cmd: np.ndarray  # (3,)
    scan_index: int | None  # bag indices of the inputs the tick saw
    odom_index: int | None
    goal_index: int | None


@dataclass
class Reference:
    ticks: list[Tick]
    period_ns: int
    usage: dict[int, list[int]] = field(default_factory=dict)  # input bag index -> ticks that saw it


def stamp_sec(header: Any) -> float:
    return float(header.stamp.sec) + 1e-9 * float(header.stamp.nanosec)


def clock_ns(msg: BagMessage) -> int:
    c = decode(msg).clock
    return int(c.sec) * 1_000_000_000 + int(c.nanosec)


def quat_yaw(x: float, y: float, z: float, w: float) -> float | None:
    q = np.array([x, y, z, w], dtype=np.float64)
    if not np.all(np.isfinite(q)):
        return None
    n = float(np.linalg.norm(q))
    if n < 1e-6:
        return None
    x, y, z, w = q / n
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def clamp(cmd: np.ndarray, v_max: float, omega_max: float, planar: bool) -> np.ndarray:
    vx, vy, wz = (float(v) for v in cmd)
    vx, vy = float(np.clip(vx, -v_max, v_max)), float(np.clip(vy, -v_max, v_max))
    speed = math.hypot(vx, vy)
    if planar and speed > v_max > 0:
        vx, vy = vx * v_max / speed, vy * v_max / speed
    return np.array([vx, vy, float(np.clip(wz, -omega_max, omega_max))])


def load_runtime(bundle: str | Path):
    from navdeploy.runtime import PolicyRuntime

    return PolicyRuntime.load(bundle)


class ReferenceNode:
    """The node's input state and tick rule, without ROS."""

    def __init__(self, runtime, params: NodeParams = NodeParams()) -> None:
        from navdeploy.scan import ScanInput, ScanUnusable

        self.ScanInput, self.ScanUnusable = ScanInput, ScanUnusable
        c = runtime.contract
        self.runtime, self.params = runtime, params
        self.period = params.control_period or float(c.control_period)
        self.tol = params.goal_tolerance or float(c.goal_tolerance)
        self.v_max, self.w_max = float(c.v_max), float(c.omega_max)
        self.planar = bool(c.scaling.limit_planar_speed)
        self.now = 0.0
        self.scan = self.odom = None  # (value, stamp, bag index)
        self.odom_error: str | None = None
        self.goal: tuple[float, float] | None = None
        self.goal_index: int | None = None
        self.reached, self.need_reset = False, True
        runtime.reset()

    def on_scan(self, msg, index: int) -> None:
        t = stamp_sec(msg.header)
        self.scan = (self.ScanInput.from_msg(msg), t if t > 0 else self.now, index)

    def on_odom(self, msg, index: int) -> None:
        p, q, tw = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
        yaw = quat_yaw(q.x, q.y, q.z, q.w)
        vals = (p.x, p.y, tw.linear.x, tw.linear.y, tw.angular.z)
        if msg.header.frame_id and msg.header.frame_id != self.params.odom_frame:
            self.odom_error = "frame"
        elif yaw is None:
            self.odom_error = "quaternion"
        elif not all(math.isfinite(v) for v in vals):
            self.odom_error = "non-finite"
        else:
            self.odom_error = None
        t = stamp_sec(msg.header)
        pose_twist = (np.array([p.x, p.y, yaw]), np.array(vals[2:]))
        self.odom = None if self.odom_error else (pose_twist, t if t > 0 else self.now, index)

    def on_goal(self, msg, index: int) -> None:
        x, y = msg.pose.position.x, msg.pose.position.y
        self.goal_index = index
        if math.isfinite(x) and math.isfinite(y) and msg.header.frame_id == self.params.odom_frame:
            self.goal, self.reached, self.need_reset = (float(x), float(y)), False, True
        else:
            self.goal = None

    def _stale(self, stamp: float) -> bool:
        age = self.now - stamp
        return age > self.params.stale_timeout or age < -self.params.stale_timeout

    def tick(self) -> tuple[str, np.ndarray]:
        state = self._decide()
        if isinstance(state, np.ndarray):
            return "driving", state
        if state in FAULTS or state in ("no_goal", "goal_reached"):
            self.need_reset = True
        return state, np.zeros(3)

    def _decide(self):
        if self.odom_error is not None:
            return "bad_odom"
        if self.scan is None or self.odom is None:
            return "waiting_input"
        if self._stale(self.scan[1]):
            return "stale_scan"
        if self._stale(self.odom[1]):
            return "stale_odom"
        if self.goal is None:
            return "no_goal"
        pose, twist = self.odom[0]
        if self.reached or math.hypot(self.goal[0] - pose[0], self.goal[1] - pose[1]) < self.tol:
            self.reached = True
            return "goal_reached"
        if self.need_reset:
            self.runtime.reset()
            self.need_reset = False
        try:
            raw = self.runtime.step(self.scan[0], pose=tuple(pose), twist=tuple(twist), goal=self.goal)
        except self.ScanUnusable:
            return "bad_scan"
        except Exception:
            return "error"
        raw = np.asarray(raw, dtype=np.float64).reshape(-1)
        if raw.shape != (3,) or not np.all(np.isfinite(raw)):
            return "error"
        return clamp(raw, self.v_max, self.w_max, self.planar)


def compute_reference(messages: list[BagMessage], runtime, params: NodeParams = NodeParams()) -> Reference:
    """The ticks and commands the node must produce for ``messages`` (see the module docstring)."""
    node = ReferenceNode(runtime, params)
    period_ns = int(round(node.period * 1e9))
    next_ns = period_ns
    ticks: list[Tick] = []
    usage: dict[int, list[int]] = {m.index: [] for m in messages if m.role == INPUT}
    for m in messages:
        if m.topic == SCAN:
            node.on_scan(decode(m), m.index)
        elif m.topic == ODOM:
            node.on_odom(decode(m), m.index)
        elif m.topic == GOAL:
            node.on_goal(decode(m), m.index)
        elif m.topic == CLOCK:
            t_ns = clock_ns(m)
            node.now = t_ns * 1e-9
            if t_ns < next_ns:
                continue
            next_ns = period_ns * (t_ns // period_ns + 1)
            state, cmd = node.tick()
            seen = (node.scan[2] if node.scan else None, node.odom[2] if node.odom else None, node.goal_index)
            for i in (m.index, *seen):
                if i is not None:
                    usage[i].append(len(ticks))
            ticks.append(Tick(len(ticks), m.index, t_ns, state, cmd, *seen))
    return Reference(ticks, period_ns, usage)
