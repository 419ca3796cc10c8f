"""The command gate's inputs as plain values: messages read, stamps, frames, and the clock watchdog.

The readers take anything with the attribute names of ``sensor_msgs/LaserScan``,
``nav_msgs/Odometry``, ``geometry_msgs/PoseStamped`` and ``nav_msgs/Path`` (rclpy messages,
``rosbags`` dataclasses) and raise on a message they cannot read; the gate
(:class:`navdeploy.gate.CommandGate`) decides what an unreadable or unusable input means. Times
are ROS times in seconds (simulated time under ``use_sim_time``). :func:`clock_mismatch` names a
stamp in another time base than the node's clock (simulated against wall time).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from navcontract.scan import ScanInput
from navdeploy.states import State, TickResult

MAX_PATH_POINTS = 10000
"""A path with more poses than this is refused (the lookahead rule runs over all of them each tick)."""

CLOCK_MISMATCH_S = 3600.0
"""[s] A stamp this far from the node's clock (either way) is in another time base: simulated time
against wall time (``use_sim_time`` set wrong, or /clock missing), not a late message."""
WALL_TIME_S = 1e9
"""[s] Times at or above this (2001-09-09) read as wall time, below it as simulated time (which starts
near 0), for the hint of a clock mismatch."""


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


def stamp_seconds(stamp: Any) -> float:
    """A ``builtin_interfaces/Time``-like stamp (``sec``, ``nanosec``) in seconds."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def header_time(header: Any, now: float) -> float:
    """The time a message was taken: its header stamp, or ``now`` when the stamp is zero (unset)."""
    t = stamp_seconds(header.stamp)
    return t if t > 0 else now


def clock_mismatch(what: str, stamp: float, now: float) -> str | None:
    """Why ``what`` stamped ``stamp`` cannot be compared with the node's clock ``now`` at all: more than
    :data:`CLOCK_MISMATCH_S` apart, with a hint which side is simulated time; None when they are
    within it (then the stale rule judges the stamp)."""
    gap = now - stamp
    if abs(gap) <= CLOCK_MISMATCH_S:
        return None
    if now >= WALL_TIME_S > stamp:
        hint = (
            "the node runs on wall time and the stamps are simulated time: set use_sim_time true (and publish /clock)"
        )
    elif stamp >= WALL_TIME_S > now:
        hint = (
            "the node runs on simulated time (use_sim_time true, /clock) and the stamps are wall time: "
            "set use_sim_time false, or publish /clock from the stamps' clock"
        )
    else:
        hint = "simulated and wall time mixed? use_sim_time must match the clock that stamps the messages"
    return (
        f"{what} stamped {stamp:.3f} s, the node's clock reads {now:.3f} s: {abs(gap):.0f} s apart "
        f"(over {CLOCK_MISMATCH_S:.0f} s): {hint}"
    )


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


# ------------------------------------------------------------------------------ message readers


@dataclass(frozen=True)
class OdomReading:
    """An odometry message as numbers: pose in its header's frame, body-frame twist."""

    position: tuple[float, float]
    quaternion: tuple[float, float, float, float]
    twist: tuple[float, float, float]  # vx, vy, wz
    stamp: float
    frame_id: str


class PathTooLong(ValueError):
    """A path message with more than :data:`MAX_PATH_POINTS` poses (not read further)."""

    def __init__(self, poses: int) -> None:
        super().__init__(f"{poses} poses, more than {MAX_PATH_POINTS}")
        self.poses = poses


def read_scan(msg: Any, now: float) -> tuple[ScanInput, float]:
    """A ``LaserScan``-like message as the scan and the time it was taken (``now`` if unstamped)."""
    return ScanInput.from_msg(msg), header_time(msg.header, now)


def read_odom(msg: Any, now: float) -> OdomReading:
    """An ``Odometry``-like message as numbers, taken at its stamp (``now`` if unstamped)."""
    p, q, t = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
    return OdomReading(
        position=(float(p.x), float(p.y)),
        quaternion=(float(q.x), float(q.y), float(q.z), float(q.w)),
        twist=(float(t.linear.x), float(t.linear.y), float(t.angular.z)),
        stamp=header_time(msg.header, now),
        frame_id=str(msg.header.frame_id),
    )


def read_goal(msg: Any) -> tuple[float, float, str]:
    """A ``PoseStamped``-like goal as (x, y, frame_id); its orientation and stamp are not used."""
    return float(msg.pose.position.x), float(msg.pose.position.y), str(msg.header.frame_id)


def read_path(msg: Any) -> tuple[np.ndarray, str]:
    """A ``nav_msgs/Path``-like message as (K, 2) float64 points and their frame; raises
    :class:`PathTooLong` before reading more than :data:`MAX_PATH_POINTS` poses."""
    frame_id = str(msg.header.frame_id)
    poses = msg.poses
    n = len(poses)
    if n > MAX_PATH_POINTS:
        raise PathTooLong(n)
    pts = np.empty((n, 2), dtype=np.float64)
    for i, pose in enumerate(poses):
        p = pose.pose.position
        pts[i, 0], pts[i, 1] = float(p.x), float(p.y)
    return pts, frame_id


# ------------------------------------------------------------------------------ the clock


class ClockWatchdog:
    """Under ``use_sim_time`` the node's timer runs on /clock: when /clock stops, so does the timer,
    and the last command would stand on the base. This watchdog runs on wall time: once /clock has
    started, ROS time not advancing for ``timeout`` wall seconds gives a zero command on every wall
    tick until it advances again: state ``clock_stalled`` while /clock still has a publisher,
    ``clock_ended`` once none is left (the simulation or the bag ended: a normal end, not a fault).
    Before the first /clock nothing was ever commanded, so there is nothing to cancel (and nothing
    is published)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = float(timeout)
        self._ros: float | None = None
        self._wall: float | None = None

    def check(
        self, ros_now: float, wall_now: float, clock_published: Callable[[], bool] | None = None
    ) -> TickResult | None:
        """The zero command of a stalled or ended clock, or None while it advances (or has not
        started). ``clock_published()`` says whether /clock still has a publisher (asked only once
        the clock stalled; None: assume it has)."""
        if ros_now <= 0.0:
            return None
        if self._ros is None or ros_now != self._ros:
            self._ros, self._wall = ros_now, wall_now
            return None
        stalled = wall_now - float(self._wall)
        if stalled <= self.timeout:
            return None
        if clock_published is not None and not clock_published():
            return TickResult(
                np.zeros(3),
                State.CLOCK_ENDED,
                f"/clock ended at {ros_now:.3f} s: no publisher left (the simulation or bag ended); zero command",
                None,
                None,
            )
        return TickResult(
            np.zeros(3),
            State.CLOCK_STALLED,
            f"/clock stopped at {ros_now:.3f} s: no advance for {stalled:.2f} s wall (clock_timeout {self.timeout} s)",
            None,
            None,
        )
