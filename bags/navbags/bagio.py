"""The topics of a nav_policy bag, and reading / writing rosbag2 bags (MCAP) with ``rosbags``.

A nav_policy bag holds three kinds of topics:

- **inputs** of the policy node, exactly as it received them: ``/clock``, ``/scan``, ``/odom``,
  ``/goal_pose``. Replay publishes these (raw CDR bytes) in recorded order.
- **outputs** of the policy node during the recording: ``/cmd_vel`` and the JSON status
  ``/nav_policy/status``. Replay compares the live node's outputs with them.
- **annotations**: the simulator's episode outcomes ``/sim/episode`` and the faults the recorder
  injected ``/nav_policy_bags/fault`` (JSON strings). Counted, never published.

Messages are stored as the CDR bytes ROS 2 serialises (``rclpy.serialization``), log times are the
recorder's wall clock in nanoseconds (strictly increasing, as ``ros2 bag record`` stamps receive
times), and each topic carries the QoS its publisher offered, so ``ros2 bag play`` republishes
``/scan`` best effort like a lidar driver and the goal transient local like the simulator.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

TYPESTORE_ID = Stores.ROS2_KILTED  # the distro of the ROS 2 wheels the node runs on
ROS_DISTRO = "kilted"

CLOCK, SCAN, ODOM, GOAL = "/clock", "/scan", "/odom", "/goal_pose"
CMD, STATUS = "/cmd_vel", "/nav_policy/status"
EPISODE, FAULT = "/sim/episode", "/nav_policy_bags/fault"

INPUT, OUTPUT, ANNOTATION = "input", "output", "annotation"

_INF = QosTime(sec=2147483647, nsec=4294967295)  # rosbag2's "infinite" duration


def _qos(reliable: bool, depth: int, transient_local: bool = False) -> Qos:
    return Qos(
        history=QosHistory.KEEP_LAST,
        depth=depth,
        reliability=QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
        durability=QosDurability.TRANSIENT_LOCAL if transient_local else QosDurability.VOLATILE,
        deadline=_INF,
        lifespan=_INF,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=_INF,
        avoid_ros_namespace_conventions=False,
    )


@dataclass(frozen=True)
class TopicSpec:
    name: str
    msgtype: str  # rosbag2 spelling, e.g. sensor_msgs/msg/LaserScan
    role: str
    qos: Qos


TOPICS: dict[str, TopicSpec] = {
    t.name: t
    for t in (
        TopicSpec(CLOCK, "rosgraph_msgs/msg/Clock", INPUT, _qos(True, 10)),
        TopicSpec(SCAN, "sensor_msgs/msg/LaserScan", INPUT, _qos(False, 5)),
        TopicSpec(ODOM, "nav_msgs/msg/Odometry", INPUT, _qos(True, 10)),
        TopicSpec(GOAL, "geometry_msgs/msg/PoseStamped", INPUT, _qos(True, 1, transient_local=True)),
        TopicSpec(CMD, "geometry_msgs/msg/Twist", OUTPUT, _qos(True, 10)),
        TopicSpec(STATUS, "std_msgs/msg/String", OUTPUT, _qos(True, 10)),
        TopicSpec(EPISODE, "std_msgs/msg/String", ANNOTATION, _qos(True, 100, transient_local=True)),
        TopicSpec(FAULT, "std_msgs/msg/String", ANNOTATION, _qos(True, 100)),
    )
}
INPUT_TOPICS = tuple(n for n, t in TOPICS.items() if t.role == INPUT)


@dataclass(frozen=True)
class BagMessage:
    index: int  # position in the bag (log-time order)
    topic: str
    msgtype: str
    log_time: int  # ns
    raw: bytes  # CDR as ROS 2 serialises it

    @property
    def role(self) -> str:
        spec = TOPICS.get(self.topic)
        return spec.role if spec else ANNOTATION


_TYPESTORE = None


def typestore():
    global _TYPESTORE
    if _TYPESTORE is None:
        _TYPESTORE = get_typestore(TYPESTORE_ID)
    return _TYPESTORE


def decode(msg: BagMessage):
    """The message as a ``rosbags`` dataclass (an independent CDR decoder: no rclpy needed)."""
    return typestore().deserialize_cdr(msg.raw, msg.msgtype)


def write_bag(
    path: str | Path,
    messages: Iterable[tuple[str, int, bytes]],
    custom_data: dict[str, str] | None = None,
) -> Path:
    """Write ``(topic, log_time_ns, cdr_bytes)`` in the given order into a new MCAP rosbag2 bag.

    Every topic of :data:`TOPICS` gets a connection (with its type's message definition and RIHS01
    hash, as ``ros2 bag record`` writes them), used or not. Log times must not go backwards.
    """
    path = Path(path)
    ts = typestore()
    writer = Writer(path, version=Writer.VERSION_LATEST, storage_plugin=StoragePlugin.MCAP)
    for key, value in (custom_data or {}).items():
        writer.set_custom_data(key, value)
    last = -1
    with writer:
        conns = {
            name: writer.add_connection(name, spec.msgtype, typestore=ts, offered_qos_profiles=[spec.qos])
            for name, spec in TOPICS.items()
        }
        for topic, log_time, raw in messages:
            if log_time < last:
                raise ValueError(f"log time goes backwards on {topic}: {log_time} < {last}")
            last = log_time
            writer.write(conns[topic], int(log_time), bytes(raw))
    _patch_ros_distro(path)
    return path


def _patch_ros_distro(path: Path) -> None:
    """rosbags writes ``ros_distro: rosbags``; name the distro the messages come from instead."""
    meta = path / "metadata.yaml"
    text = meta.read_text()
    meta.write_text(text.replace("ros_distro: rosbags", f"ros_distro: {ROS_DISTRO}"))


def read_bag(path: str | Path) -> tuple[list[BagMessage], dict[str, str]]:
    """All messages of a bag in log-time order, and its custom_data."""
    out: list[BagMessage] = []
    custom = dict(read_metadata(path).get("custom_data") or {})
    with Reader(Path(path)) as reader:
        for i, (conn, t, raw) in enumerate(reader.messages()):
            out.append(BagMessage(i, conn.topic, conn.msgtype, int(t), bytes(raw)))
    return out, custom


class BagError(ValueError):
    """A bag the tools cannot use, with the reason in one line (the command-line tools print it and exit 2)."""


@dataclass
class BagContents:
    path: Path
    messages: list[BagMessage]
    custom: dict[str, str]
    topic_types: dict[str, str]  # every connection of the bag (also those without messages) -> msgtype

    def topics_of_type(self, msgtype: str) -> list[str]:
        return sorted(t for t, ty in self.topic_types.items() if ty == msgtype)


def open_bag(path: str | Path) -> BagContents:
    """Read a whole bag (any rosbag2 storage ``rosbags`` reads: MCAP, sqlite3) and check that it can be
    used: raises :class:`BagError` with a one-line reason for a missing, incomplete or unreadable bag."""
    path = Path(path)
    if not path.exists():
        raise BagError(f"bag {path} does not exist")
    if not path.is_dir():
        raise BagError(f"bag {path} is not a folder: pass the rosbag2 folder that holds metadata.yaml")
    if not (path / "metadata.yaml").is_file():
        raise BagError(f"bag {path} has no metadata.yaml: not a rosbag2 bag, or an incomplete copy")
    try:
        info = read_metadata(path)
        custom = {str(k): str(v) for k, v in dict(info.get("custom_data") or {}).items()}
        for rel in info.get("relative_file_paths") or []:
            if not (path / rel).is_file():
                raise BagError(f"bag {path}: its storage file {rel} (named in metadata.yaml) is missing")
        messages: list[BagMessage] = []
        with Reader(path) as reader:
            topic_types = {c.topic: c.msgtype for c in reader.connections}
            for i, (conn, t, raw) in enumerate(reader.messages()):
                messages.append(BagMessage(i, conn.topic, conn.msgtype, int(t), bytes(raw)))
    except BagError:
        raise
    except Exception as exc:  # rosbags' ReaderError, YAML / storage errors of a truncated or foreign file
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise BagError(f"bag {path} cannot be read (truncated or damaged?): {type(exc).__name__}: {text}") from None
    return BagContents(path, messages, custom, topic_types)


def read_metadata(path: str | Path) -> dict:
    """The ``rosbag2_bagfile_information`` mapping of a bag's metadata.yaml."""
    import yaml

    data = yaml.safe_load((Path(path) / "metadata.yaml").read_text())
    return data["rosbag2_bagfile_information"]


def count_by_topic(messages: Sequence[BagMessage]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in messages:
        counts[m.topic] = counts.get(m.topic, 0) + 1
    return counts


def json_of(msg: BagMessage) -> dict:
    """A JSON std_msgs/String message's payload."""
    return json.loads(decode(msg).data)
