"""What a replay publishes: a nav_policy bag as recorded, or a third-party bag turned into the node's inputs.

A **nav_policy bag** (written by ``nav-bag-record``: ``custom_data.nav_policy_bags`` and a ``/clock``)
is replayed as recorded: every input in recorded order, the recorded ``/clock`` driving the node's
timer, each command compared with the recorded one and with the offline reference. The bundle given
must be the one it was recorded with (the bag records its ``policy.onnx`` SHA-256).

Any other bag is **third-party**: written by a robot's ``ros2 bag record`` or the plain ``rosbags``
writer, with no ``/clock``, no commands of this node, and topic names of its own. Its scan, odometry
and goal topics are mapped onto the node's (:class:`InputMap`, ``--scan-topic`` etc.) and the replay
makes the clock itself:

- each input message is placed at its header stamp, or at its receive time (the bag's log time)
  where the stamp is zero;
- the control ticks lie on the node's timer grid ``n * period`` (the bundle's control period, or the
  ``control_period`` node parameter): from the last grid point before the first input message to the
  first one at or after the last scan/odometry message; a synthesized ``/clock`` message at each grid
  point fires one tick. The first tick comes before any input (it reports ``waiting_input``), so a
  message stamped zero is taken at the previous tick's time, as the node takes it under
  ``use_sim_time``, never at ROS time 0;
- before each tick, the newest message of each input topic placed since the previous tick is
  published; older ones of the same interval are not (fate ``superseded``). The command gate keeps
  only the newest scan, odometry and goal, and with two messages of one topic queued the rclpy
  executor could run the timer between them (an ambiguous tick). That dropping them changes nothing
  is checked: the offline reference also runs on every message (``full_messages``) and must agree
  tick by tick;
- a goal given as ``goal_xy`` (``--goal x,y``, in the odometry frame) is published before the first
  tick and replaces the bag's goals;
- the node's ``odom_frame`` is the frame of the bag's odometry unless one is given.

A third-party bag has no recorded commands of this node, so each command is compared with the
offline reference only. What a bag lacks (a scan topic, odometry, a goal) is refused up front with
one line naming all of it (:class:`navbags.bagio.BagError`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from navbags.bagio import (
    CLOCK,
    CMD,
    GOAL,
    ODOM,
    SCAN,
    STATUS,
    TOPICS,
    BagContents,
    BagError,
    BagMessage,
    open_bag,
    typestore,
)
from navbags.reference import NodeParams
from navdeploy.settings import resolve_settings

NAV_POLICY, THIRD_PARTY = "nav_policy", "third-party"
INFO_KEY = "nav_policy_bags"  # custom_data key nav-bag-record writes
MAX_TICKS = 1_000_000  # more than a day at 0.1 s: stamps in two time bases, not a recording


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class InputMap:
    """How a third-party bag's topics feed the node (None: the node's own topic name / the bag's frame)."""

    scan: str | None = None  # --scan-topic
    odom: str | None = None  # --odom-topic
    goal: str | None = None  # --goal-topic
    goal_xy: tuple[float, float] | None = None  # --goal x,y (odometry frame)
    odom_frame: str | None = None  # --odom-frame

    def given(self) -> list[str]:
        names = {
            "scan": "--scan-topic",
            "odom": "--odom-topic",
            "goal": "--goal-topic",
            "goal_xy": "--goal",
            "odom_frame": "--odom-frame",
        }
        return [opt for attr, opt in names.items() if getattr(self, attr) is not None]


@dataclass
class Timeline:
    """The messages a replay publishes, in order, on the node's topics, and where each comes from."""

    bag: Path
    kind: str  # NAV_POLICY or THIRD_PARTY
    bag_messages: list[BagMessage]  # the bag as stored
    messages: list[BagMessage]  # what the replay publishes (and the reference runs on), in order
    origin: list[int | None]  # per message of ``messages``: its index in the bag; None = synthesized
    params: NodeParams
    compare_recorded: bool  # the bag holds this node's commands for these ticks
    description: str
    skipped: dict[int, str] = field(default_factory=dict)  # bag index -> fate of a bag message not published
    full_messages: list[BagMessage] | None = None  # third-party: every mapped message, nothing superseded


def load_timeline(
    bag: str | Path,
    contract,
    params: NodeParams | None = None,
    inputs: InputMap | None = None,
    bundle: str | Path | None = None,
) -> Timeline:
    """Read ``bag`` and decide what a replay publishes; raises :class:`BagError` (one line) when it
    cannot be replayed: unreadable, recorded with another bundle than ``bundle``, or lacking an input."""
    params = params or NodeParams()
    inputs = inputs or InputMap()
    contents = open_bag(bag)
    has_clock = any(m.topic == CLOCK for m in contents.messages)
    if INFO_KEY in contents.custom and has_clock:
        return _nav_policy(contents, params, inputs, bundle)
    return _third_party(contents, contract, params, inputs)


# ------------------------------------------------------------------------------ nav_policy bags


def _nav_policy(contents: BagContents, params: NodeParams, inputs: InputMap, bundle) -> Timeline:
    path = contents.path
    if inputs.given():
        raise BagError(
            f"bag {path} is a nav-bag-record recording (its /clock, topics and goals drive the replay); "
            f"{', '.join(inputs.given())} only for third-party bags"
        )
    try:
        info = json.loads(contents.custom[INFO_KEY])
    except (TypeError, ValueError) as exc:
        raise BagError(f"bag {path}: custom_data {INFO_KEY} is not JSON ({exc})") from None
    recorded = str(info.get("bundle_onnx_sha256") or "")
    if bundle is not None and recorded:
        have = sha256_file(Path(bundle) / "policy.onnx")
        if have != recorded:
            fp = info.get("bundle_fingerprint") or "?"
            raise BagError(
                f"bag {path} was recorded with another bundle: its policy.onnx SHA-256 {recorded[:16]}... "
                f"(fingerprint {fp}) != {have[:16]}... of --bundle {bundle}; "
                "replay it with the bundle it was recorded with"
            )
    recorded_params = info.get("node_params")
    if isinstance(recorded_params, dict) and "scan_map" not in recorded_params and params.scan_map:
        # A recording whose node parameters lack scan_map ran a node without the scan map: a goal
        # without a path was driven to directly.
        params = replace(params, scan_map=False)
    msgs = contents.messages
    return Timeline(
        bag=path,
        kind=NAV_POLICY,
        bag_messages=msgs,
        messages=msgs,
        origin=[m.index for m in msgs],
        params=params,
        compare_recorded=True,
        description="nav-bag-record recording: its /clock drives the ticks; "
        "commands compared with the recorded ones and the offline reference",
    )


# ----------------------------------------------------------------------------- third-party bags


def _stamp_ns(header) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _serialize(msgtype: str, msg) -> bytes:
    return bytes(typestore().serialize_cdr(msg, msgtype))


def clock_message(t_ns: int) -> bytes:
    ts = typestore()
    Time = ts.types["builtin_interfaces/msg/Time"]
    Clock = ts.types[TOPICS[CLOCK].msgtype]
    sec, nsec = divmod(int(t_ns), 1_000_000_000)
    return _serialize(TOPICS[CLOCK].msgtype, Clock(clock=Time(sec=sec, nanosec=nsec)))


def goal_message(x: float, y: float, frame: str) -> bytes:
    """A PoseStamped goal at (x, y) in ``frame`` (stamp zero: the node ignores a goal's stamp)."""
    ts = typestore()
    t = ts.types
    msg = t[TOPICS[GOAL].msgtype](
        header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=frame),
        pose=t["geometry_msgs/msg/Pose"](
            position=t["geometry_msgs/msg/Point"](x=float(x), y=float(y), z=0.0),
            orientation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
    )
    return _serialize(TOPICS[GOAL].msgtype, msg)


@dataclass(frozen=True)
class _Event:
    t_ns: int  # where the message is placed: header stamp, or receive time if the stamp is zero
    index: int  # in the bag
    topic: str  # the node's topic
    raw: bytes


def _third_party(contents: BagContents, contract, params: NodeParams, inputs: InputMap) -> Timeline:
    per_topic: dict[str, list[BagMessage]] = {}
    for m in contents.messages:
        per_topic.setdefault(m.topic, []).append(m)
    scan_t, odom_t, goal_t = _input_topics(contents, per_topic, inputs)
    mapping = {scan_t: SCAN, odom_t: ODOM}
    if goal_t is not None:
        mapping[goal_t] = GOAL
    events, zero_stamps, odom_frame = _placed_events(contents.path, mapping, per_topic, inputs.odom_frame)
    params = replace(params, odom_frame=odom_frame or params.odom_frame)

    settings, _ = resolve_settings(contract, params)
    period = int(round(settings.control_period * 1e9))
    first, n_ticks = _tick_grid(contents.path, events, period, settings.control_period)
    skipped = _unmapped_fates(contents, mapping, inputs)
    goal_raw = None
    if inputs.goal_xy is not None:
        goal_raw = goal_message(*inputs.goal_xy, params.odom_frame)
    grid = (first, period, n_ticks)
    messages, origin, fates = _publish_order(events, goal_raw, grid, decimate=True)
    full, _, _ = _publish_order(events, goal_raw, grid, decimate=False)
    skipped.update(fates)
    return Timeline(
        bag=contents.path,
        kind=THIRD_PARTY,
        bag_messages=contents.messages,
        messages=messages,
        origin=origin,
        params=params,
        compare_recorded=False,
        description=_third_party_description(
            n_ticks, settings.control_period, zero_stamps, len(events), (scan_t, odom_t, goal_t), inputs, params
        ),
        skipped=skipped,
        full_messages=full,
    )


def _third_party_description(
    n_ticks: int,
    period_s: float,
    zero_stamps: int,
    n_events: int,
    topics: tuple[str, str, str | None],
    inputs: InputMap,
    params: NodeParams,
) -> str:
    """What a third-party replay publishes, in one line: its ticks, what places its messages (header
    stamps or receive times), its scan, odometry and goal."""
    scan_t, odom_t, goal_t = topics
    if zero_stamps == 0:
        base = "header stamps"
    elif zero_stamps == n_events:
        base = "receive times (all stamps zero)"
    else:
        base = f"header stamps (receive times for {zero_stamps} messages stamped zero)"
    goal_text = (
        f"--goal ({inputs.goal_xy[0]:g}, {inputs.goal_xy[1]:g}) in '{params.odom_frame}'"
        if inputs.goal_xy is not None
        else goal_t
    )
    return (
        f"third-party bag (no nav-bag-record /clock): {n_ticks} ticks every {period_s:g} s "
        f"on its {base}; scan {scan_t}, odometry {odom_t} (frame '{params.odom_frame}'), goal {goal_text}; "
        "no recorded commands of this node: compared with the offline reference only"
    )


def _input_topics(
    contents: BagContents, per_topic: dict[str, list[BagMessage]], inputs: InputMap
) -> tuple[str, str, str | None]:
    """The bag's scan, odometry and goal topics (goal None: ``--goal`` gives it); BagError naming
    everything the bag lacks (a topic, its type, its messages) at once."""
    types = contents.topic_types
    missing: list[str] = []

    def check(what: str, option: str, topic: str, node_topic: str) -> None:
        want = TOPICS[node_topic].msgtype
        if topic not in types:
            others = ", ".join(contents.topics_of_type(want)) or "none"
            missing.append(
                f"no {what} topic: {topic} is not in the bag ({want} topics: {others}; map one with {option})"
            )
        elif types[topic] != want:
            missing.append(f"{what} topic {topic} is {types[topic]}, not {want} ({option})")
        elif not per_topic.get(topic):
            missing.append(f"no {what}: {topic} holds no messages")

    scan_t, odom_t = inputs.scan or SCAN, inputs.odom or ODOM
    check("scan", "--scan-topic", scan_t, SCAN)
    check("odometry", "--odom-topic", odom_t, ODOM)
    goal_t: str | None = None
    if inputs.goal_xy is None:
        goal_t = inputs.goal or GOAL
        if inputs.goal is not None or per_topic.get(goal_t):
            check("goal", "--goal-topic", goal_t, GOAL)
        else:
            others = ", ".join(contents.topics_of_type(TOPICS[GOAL].msgtype)) or "none"
            missing.append(
                f"no goal: {goal_t} holds no goal ({TOPICS[GOAL].msgtype} topics: {others}) and no --goal X,Y was given"
            )
    if missing:
        raise BagError(f"bag {contents.path} cannot be replayed (third-party bag, no /clock): " + "; ".join(missing))
    return scan_t, odom_t, goal_t


def _placed_events(
    path: Path, mapping: dict[str, str], per_topic: dict[str, list[BagMessage]], odom_frame: str | None
) -> tuple[list[_Event], int, str | None]:
    """Every message of the mapped topics placed at its header stamp (its receive time when the
    stamp is zero), in time order; how many were stamped zero; the odometry frame (``odom_frame``
    when given, else the first odometry message's)."""
    events: list[_Event] = []
    zero_stamps = 0
    for bag_topic, node_topic in mapping.items():
        for m in per_topic[bag_topic]:
            try:
                msg = typestore().deserialize_cdr(m.raw, m.msgtype)
                stamp = _stamp_ns(msg.header)
            except Exception as exc:
                raise BagError(
                    f"bag {path}: message #{m.index} on {bag_topic} does not decode as {m.msgtype}: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            if node_topic == ODOM and odom_frame is None and msg.header.frame_id:
                odom_frame = str(msg.header.frame_id)
            if stamp <= 0:
                zero_stamps += 1
            events.append(_Event(stamp if stamp > 0 else m.log_time, m.index, node_topic, m.raw))
    events.sort(key=lambda e: (e.t_ns, e.index))
    return events, zero_stamps, odom_frame


def _tick_grid(path: Path, events: list[_Event], period: int, period_s: float) -> tuple[int, int]:
    """The first tick [ns] and the number of ticks: the grid ``n * period`` from the last grid point
    before any input to the first at or after the last scan / odometry message. The first tick's
    /clock reaches the node before any input, so a message stamped zero is taken at the node's ROS
    time, which is 0 until a /clock arrives. BagError when the span is implausibly long."""
    sensed = [e.t_ns for e in events if e.topic in (SCAN, ODOM)]
    first = max(period, ((min(e.t_ns for e in events) - 1) // period) * period)
    last = max(first, -(-max(sensed) // period) * period)
    n_ticks = (last - first) // period + 1
    if n_ticks > MAX_TICKS:
        raise BagError(
            f"bag {path}: its scan and odometry span {(last - first) * 1e-9:.0f} s ({n_ticks} ticks of "
            f"{period_s} s): header stamps and receive times in different time bases?"
        )
    return first, n_ticks


def _unmapped_fates(contents: BagContents, mapping: dict[str, str], inputs: InputMap) -> dict[int, str]:
    """Why each message of a topic that is not mapped to an input is not published."""
    skipped: dict[int, str] = {}
    for m in contents.messages:
        if m.topic in mapping:
            continue
        if m.topic == (inputs.goal or GOAL) and inputs.goal_xy is not None:
            skipped[m.index] = "ignored: --goal replaces the bag's goals"
        elif m.topic == CLOCK:
            skipped[m.index] = "ignored: the replay ticks on the inputs' stamps, not on this bag's /clock"
        elif m.topic in (CMD, STATUS):
            skipped[m.index] = f"ignored: {m.topic} of a third-party bag is not this node's output for these ticks"
        else:
            skipped[m.index] = f"ignored: {m.topic} is not mapped to an input of the node"
    return skipped


def _publish_order(
    events: list[_Event], goal_raw: bytes | None, grid: tuple[int, int, int], *, decimate: bool
) -> tuple[list[BagMessage], list[int | None], dict[int, str]]:
    """The messages to publish, in order, with a synthesized /clock at each tick of ``grid`` (first,
    period, ticks) and the ``--goal`` (when given) before the first; their bag indices (None:
    synthesized); the fate of each event not published. With ``decimate`` only the newest message of
    each topic before a tick is published (the others are ``superseded``)."""
    first, period, n_ticks = grid
    rows: list[tuple[str, int, bytes, int | None]] = []
    fates: dict[int, str] = {}
    if goal_raw is not None:
        rows.append((GOAL, min(events[0].t_ns, first), goal_raw, None))
    j = 0
    for k in range(n_ticks):
        t = first + k * period
        batch = []
        while j < len(events) and events[j].t_ns <= t:
            batch.append(events[j])
            j += 1
        newest = {e.topic: e for e in batch}
        for e in batch:
            if decimate and newest[e.topic] is not e:
                fates[e.index] = (
                    f"superseded: by #{newest[e.topic].index} before the same tick (published only the newest)"
                )
            else:
                rows.append((e.topic, e.t_ns, e.raw, e.index))
        rows.append((CLOCK, t, clock_message(t), None))
    for e in events[j:]:  # only goals can lie after the last tick (it is at or after every scan / odom)
        fates[e.index] = "after-last-tick: placed after the last tick, not published"
    msgs = [BagMessage(i, topic, TOPICS[topic].msgtype, t_ns, raw) for i, (topic, t_ns, raw, _) in enumerate(rows)]
    return msgs, [r[3] for r in rows], fates


def parse_goal(text: str) -> tuple[float, float]:
    """``"x,y"`` -> (x, y), both finite; ValueError otherwise."""
    parts = text.replace(" ", "").split(",")
    if len(parts) != 2:
        raise ValueError(f"expected X,Y (two numbers), got {text!r}")
    x, y = (float(p) for p in parts)
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"goal {text!r} is not finite")
    return x, y
