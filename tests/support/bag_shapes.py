"""Bags shaped like other robots' recordings (third-party: no /clock, no commands of the policy node).

:func:`write_robot_bag` writes one with the plain ``rosbags`` writer (default sqlite3 storage, stock
message definitions, no QoS, no custom data): a ``LaserScan`` at about 15 Hz with jittered stamps,
``nav_msgs/Odometry`` at 50 Hz with its own stamps, receive times a few ms after the stamps, a topic
the node does not read, and optionally a goal. The robot drives a made-up curve through a 6 x 5 m
room whose walls the scan sees. The lidar's shape is a :class:`Lidar` (beams, first angle,
increment, which readings are NaN / inf).

:data:`SHAPES` are the five bags of issue 28, as a robot would record them on the node's own topic
names with their own goal: a 1440-beam lidar from 0 rad, a 1081-beam 270-degree lidar, a reversed
360-beam scan, 720 beams with NaN and inf, and a goal in another frame than the odometry's.
:data:`SHAPE_TICKS` control ticks each (0.1 s grid over 4.9 s of data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Writer
from rosbags.typesys import Stores, get_typestore

from navcontract.scan import LidarMount
from support.scans import ScanGeometry

T0_NS = 1_700_000_000_000_000_000  # stamps of a robot's wall clock [ns] (on the 0.1 s grid)
ROOM = (3.0, 2.5)  # half sizes of the room [m]


@dataclass(frozen=True)
class Lidar(ScanGeometry):
    """A scan's geometry (:class:`support.scans.ScanGeometry`) and its invalid readings: readings
    ``i % nan_every == 1`` are NaN and ``i % inf_every == 2`` +inf (0: none); ``mount``: where it sits
    on the body (None: the centre, facing forward, upright)."""

    nan_every: int = 0
    inf_every: int = 0
    mount: LidarMount | None = None


LIDAR_270 = Lidar(1081, -0.75 * math.pi, 1.5 * math.pi / 1080)


@dataclass(frozen=True)
class RobotBag:
    """What :func:`write_robot_bag` writes (defaults: the 270-degree robot of tests/bags/test_bag_third_party.py)."""

    seconds: float = 3.0
    lidar: Lidar = LIDAR_270
    scan_topic: str = "/lidar/scan"
    odom_topic: str = "/wheel/odom"
    odom_frame: str = "wheel_odom"
    goal_topic: str | None = None  # None: no goal in the bag
    goal_frame: str | None = None  # None: the odometry frame
    goal_xy: tuple[float, float] = (2.0, 1.2)
    zero_stamps: bool = False
    extra: dict[str, str] = field(default_factory=lambda: {"/diagnostics_text": "ok"})


SHAPE_SECONDS = 4.9
SHAPE_TICKS = 51  # from the grid point before the first stamp to the one at the last: 4.9 s / 0.1 s + 2
_ON_NODE_TOPICS = {"scan_topic": "/scan", "odom_topic": "/odom", "odom_frame": "odom", "goal_topic": "/goal_pose"}
SHAPES: dict[str, RobotBag] = {
    "lidar_1440_from_zero": RobotBag(SHAPE_SECONDS, Lidar(1440, 0.0, 2 * math.pi / 1440), **_ON_NODE_TOPICS),
    "lidar_1081_270deg": RobotBag(SHAPE_SECONDS, LIDAR_270, **_ON_NODE_TOPICS),
    "lidar_360_reversed": RobotBag(SHAPE_SECONDS, Lidar(360, math.pi, -2 * math.pi / 360), **_ON_NODE_TOPICS),
    "lidar_720_nan_inf": RobotBag(
        SHAPE_SECONDS, Lidar(720, -math.pi, 2 * math.pi / 720, nan_every=7, inf_every=11), **_ON_NODE_TOPICS
    ),
    "goal_in_another_frame": RobotBag(
        SHAPE_SECONDS, Lidar(720, -math.pi, 2 * math.pi / 720), goal_frame="map", **_ON_NODE_TOPICS
    ),
}


def pose(t: float) -> tuple[float, float, float]:
    """The made-up drive: x, y, yaw at ``t`` seconds."""
    return -1.0 + 0.4 * t, -0.5 + 0.05 * t * t, 0.1 * t


def ranges(lidar: Lidar, t: float) -> np.ndarray:
    """What the lidar reads at ``t``: the room's walls (no return beyond range_max: +inf), float32."""
    x, y, yaw = pose(t)
    ang = lidar.angle_min + lidar.increment * np.arange(lidar.beams)
    if lidar.mount is None:
        ang = yaw + ang
    else:
        x, y, yaw = lidar.mount.sensor_pose((x, y, yaw))
        ang = yaw + lidar.mount.sign * ang
    c, s = np.cos(ang), np.sin(ang)
    hx, hy = ROOM
    with np.errstate(divide="ignore", invalid="ignore"):
        tx = np.where(c > 0, (hx - x) / c, np.where(c < 0, (-hx - x) / c, np.inf))
        ty = np.where(s > 0, (hy - y) / s, np.where(s < 0, (-hy - y) / s, np.inf))
    r = np.minimum(tx, ty).astype(np.float32)
    r[r > lidar.range_max] = np.inf
    i = np.arange(lidar.beams)
    if lidar.nan_every:
        r[i % lidar.nan_every == 1] = np.nan
    if lidar.inf_every:
        r[i % lidar.inf_every == 2] = np.inf
    return r


def write_robot_bag(path: Path, spec: RobotBag = RobotBag()) -> Path:
    """A robot-like bag written with rosbags' own Writer (see the module docstring)."""
    ts = get_typestore(Stores.ROS2_HUMBLE)
    T = ts.types
    Time, Header = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"]
    Point, Quat = T["geometry_msgs/msg/Point"], T["geometry_msgs/msg/Quaternion"]

    def stamp(t_ns: int):
        ns = 0 if spec.zero_stamps else T0_NS + t_ns
        return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)

    end_ns = int(round(spec.seconds * 1e9))
    rows = []  # (topic, msgtype, receive time [ns], message)
    t_ns, k = 13_000_000, 0
    lid = spec.lidar
    while t_ns < end_ns:
        scan = T["sensor_msgs/msg/LaserScan"](
            header=Header(stamp=stamp(t_ns), frame_id="laser"),
            angle_min=lid.angle_min,
            angle_max=lid.angle_min + lid.increment * (lid.beams - 1),
            angle_increment=lid.increment,
            time_increment=0.0,
            scan_time=1 / 15,
            range_min=0.05,
            range_max=lid.range_max,
            ranges=ranges(lid, t_ns * 1e-9),
            intensities=np.zeros(0, np.float32),
        )
        rows.append((spec.scan_topic, "sensor_msgs/msg/LaserScan", T0_NS + t_ns + 4_000_000, scan))
        k += 1
        t_ns += int(round((1 / 15 + 0.003 * math.sin(k)) * 1e9))
    for j in range(int(round(spec.seconds * 50))):
        t_ns = j * 20_000_000
        rows.append((spec.odom_topic, "nav_msgs/msg/Odometry", T0_NS + t_ns + 1_000_000, _odom(T, spec, t_ns, stamp)))
    for topic, text in spec.extra.items():
        rows.append((topic, "std_msgs/msg/String", T0_NS + 500_000_000, T["std_msgs/msg/String"](data=text)))
    if spec.goal_topic:
        goal = T["geometry_msgs/msg/PoseStamped"](
            header=Header(stamp=stamp(250_000_000), frame_id=spec.goal_frame or spec.odom_frame),
            pose=T["geometry_msgs/msg/Pose"](
                position=Point(x=spec.goal_xy[0], y=spec.goal_xy[1], z=0.0),
                orientation=Quat(x=0.0, y=0.0, z=0.0, w=1.0),
            ),
        )
        rows.append((spec.goal_topic, "geometry_msgs/msg/PoseStamped", T0_NS + 260_000_000, goal))
    rows.sort(key=lambda r: r[2])
    with Writer(path, version=Writer.VERSION_LATEST) as w:  # the plain writer: its defaults
        conns = {}
        for topic, msgtype, _, _ in rows:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, msgtype, typestore=ts)
        for topic, msgtype, t_rx, msg in rows:
            w.write(conns[topic], int(t_rx), ts.serialize_cdr(msg, msgtype))
    return path


def _odom(T, spec: RobotBag, t_ns: int, stamp):
    x, y, yaw = pose(t_ns * 1e-9)
    Vec3 = T["geometry_msgs/msg/Vector3"]
    return T["nav_msgs/msg/Odometry"](
        header=T["std_msgs/msg/Header"](stamp=stamp(t_ns), frame_id=spec.odom_frame),
        child_frame_id="base_link",
        pose=T["geometry_msgs/msg/PoseWithCovariance"](
            pose=T["geometry_msgs/msg/Pose"](
                position=T["geometry_msgs/msg/Point"](x=x, y=y, z=0.0),
                orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2)),
            ),
            covariance=np.zeros(36),
        ),
        twist=T["geometry_msgs/msg/TwistWithCovariance"](
            twist=T["geometry_msgs/msg/Twist"](linear=Vec3(x=0.4, y=0.0, z=0.0), angular=Vec3(x=0.0, y=0.0, z=0.1)),
            covariance=np.zeros(36),
        ),
    )


def write_shape_bag(folder: Path, name: str) -> Path:
    """The bag of shape ``name`` (a key of :data:`SHAPES`) as ``folder/name``."""
    return write_robot_bag(Path(folder) / name, SHAPES[name])
