"""Record seeded simulator episodes into a rosbag2 bag, optionally with faults injected.

Three processes on a private loopback domain::

    sim_node (lockstep) --/sim_raw/{scan,odom,goal_pose,clock}--> recorder relay (this process)
    recorder relay --/scan /odom /goal_pose /clock--> policy_node (use_sim_time) --/cmd_vel--> sim_node

The relay takes each simulator tick (scan and odometry stamped ``t``, then the clock ``t``), applies
the :class:`FaultPlan` for that tick (drop the scan, NaN some or all beams, hold the odometry back
for a number of ticks, send a different goal), publishes the result to the policy node, inputs first
and the clock last, and waits for the node's one ``/cmd_vel`` (and status) for that tick before it
takes the next. The bag is written from that single ordered sequence: exactly the messages the
node received, in the order it received them, then what it answered. The simulator applies the same
``/cmd_vel`` and steps on (lockstep), so a recording takes as long as the CPU needs, no longer.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from navbags.bagio import CLOCK, CMD, EPISODE, FAULT, GOAL, ODOM, SCAN, STATUS, write_bag
from navbags.reference import NodeParams
from navbags.rosproc import DomainLease, NodeProc, RosSide, console_script, ros_args

RAW = "/sim_raw"


@dataclass
class FaultPlan:
    """Faults by tick index within episode ``episode`` (tick 0 = the episode's first clock tick)."""

    episode: int = 0
    drop_scan: Sequence[int] = ()  # the scan of these ticks never reaches the node
    nan_some: Sequence[int] = ()  # every third beam NaN
    nan_all: Sequence[int] = ()  # all beams NaN (the scan carries nothing)
    odom_delay: dict[int, int] = field(default_factory=dict)  # tick -> latency of its odometry (ticks)
    goal_shift: dict[int, tuple[float, float]] = field(default_factory=dict)  # tick -> goal offset (m)

    def empty(self) -> bool:
        return not (self.drop_scan or self.nan_some or self.nan_all or self.odom_delay or self.goal_shift)


def standard_faults() -> FaultPlan:
    """The fault bag's plan: every kind once, spaced so each one's effect is seen on its own."""
    return FaultPlan(
        episode=0,
        drop_scan=[4, 9, 10, *range(14, 21)],  # single drops (still fresh), then 7 in a row (stale)
        nan_some=[24, 25],
        nan_all=[27],
        # odometry latency: 0.2 s for 4 ticks (still fresh), then 0.7 s for 10 ticks (stale)
        odom_delay={**{j: 2 for j in range(30, 34)}, **{j: 7 for j in range(36, 46)}},
        goal_shift={55: (0.8, -0.6)},
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class RecordResult:
    path: Path
    ticks: int
    episodes: list[dict]
    faults: list[dict]
    counts: dict[str, int]


class _Relay:
    def __init__(self, ros: RosSide) -> None:
        from geometry_msgs.msg import PoseStamped, Twist
        from nav_msgs.msg import Odometry
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import LaserScan
        from std_msgs.msg import String

        n = ros.node
        rel = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        events = QoSProfile(
            depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.episodes: list[bytes] = []
        self.goals: list[bytes] = []
        self.scans: list[bytes] = []
        self.odoms: list[bytes] = []
        self.clocks: list[bytes] = []
        self.cmds: list[bytes] = []
        self.status: list[bytes] = []
        # Creation order = the order the executor takes messages that are ready together: the
        # simulator publishes episode outcome, goal, scan, odometry, clock in this order.
        self.subs = [
            n.create_subscription(String, EPISODE, self.episodes.append, events, raw=True),
            n.create_subscription(PoseStamped, RAW + GOAL, self.goals.append, latched, raw=True),
            n.create_subscription(LaserScan, RAW + SCAN, self.scans.append, qos_profile_sensor_data, raw=True),
            n.create_subscription(Odometry, RAW + ODOM, self.odoms.append, rel, raw=True),
            n.create_subscription(Clock, RAW + CLOCK, self.clocks.append, rel, raw=True),
            n.create_subscription(Twist, CMD, self.cmds.append, rel, raw=True),
            n.create_subscription(String, STATUS, self.status.append, rel, raw=True),
        ]
        self.pubs = {
            SCAN: n.create_publisher(LaserScan, SCAN, qos_profile_sensor_data),
            ODOM: n.create_publisher(Odometry, ODOM, 10),
            GOAL: n.create_publisher(PoseStamped, GOAL, latched),
            CLOCK: n.create_publisher(Clock, CLOCK, 10),
        }
        self.fault_pub = n.create_publisher(String, FAULT, 10)
        self.types = {"scan": LaserScan, "odom": Odometry, "goal": PoseStamped, "clock": Clock, "str": String}


def record_episodes(
    out: str | Path,
    bundle: str | Path,
    seed: int = 0,
    episodes: int = 1,
    episode_length_s: float = 0.0,
    faults: FaultPlan | None = None,
    params: NodeParams | None = None,
    noise_std: float = -1.0,
    log_dir: str | Path | None = None,
    timeout: float = 60.0,
) -> RecordResult:
    """Run ``episodes`` simulator episodes (rooms ``seed``, ``seed + 1``, ...) and write the bag ``out``."""
    from rclpy.serialization import deserialize_message, serialize_message

    out, bundle = Path(out), Path(bundle).resolve()
    if out.exists():  # the bag is written at the end: refuse now, not after the whole run
        raise FileExistsError(f"{out} already exists; record into a new folder")
    faults = faults or FaultPlan()
    params = params or NodeParams()
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="navbags_record_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, int, bytes]] = []
    last_t = [0]

    def put(topic: str, raw: bytes) -> None:
        t = max(time.time_ns(), last_t[0] + 1)  # wall clock, strictly increasing
        last_t[0] = t
        rows.append((topic, t, bytes(raw)))

    from navcontract.bundle import read_contract

    contract = read_contract(bundle)
    period = float(contract.control_period)
    lease = DomainLease()
    ros = RosSide(lease.domain_id, "navbags_recorder")
    procs: list[NodeProc] = []
    fault_log: list[dict] = []
    outcomes: list[dict] = []
    try:
        relay = _Relay(ros)
        T = relay.types
        sim_params = {
            "seed": seed,
            "num_episodes": episodes,
            "exit_when_done": True,
            "lockstep": True,
            "lockstep_timeout": timeout,
            "wait_for_policy_timeout": timeout,
            "noise_std": noise_std,
            "episode_length_s": episode_length_s,
            "publish_goal": True,
            "scan_topic": RAW + SCAN,
            "odom_topic": RAW + ODOM,
            "goal_topic": RAW + GOAL,
            "cmd_vel_topic": CMD,
            "episode_topic": EPISODE,
        }
        node_params = {"bundle_path": str(bundle), "use_sim_time": True, **params.ros_params()}
        policy = NodeProc(
            [console_script("policy_node"), *ros_args(node_params)], lease.domain_id, log_dir / "policy_node.log"
        )
        procs.append(policy)
        ros.watch = [policy]
        sim = NodeProc(
            [console_script("sim_node"), *ros_args(sim_params, {CLOCK: RAW + CLOCK})],
            lease.domain_id,
            log_dir / "sim_node.log",
        )
        procs.append(sim)
        ros.watch = [policy, sim]

        def connected() -> bool:
            outs = all(p.get_subscription_count() > 0 for p in relay.pubs.values())
            ins = all(s.get_publisher_count() > 0 for s in relay.subs[1:])
            return outs and ins

        ros.spin_until(connected, timeout, "the simulator and the policy node to connect")

        held: list[tuple[int, bytes]] = []  # (release tick, odometry) held back
        goal = None  # (x, y) the node was last sent
        ep, ep_tick, k = 0, -1, 0
        seen_goals = 0
        while True:
            ros.watch = [policy]
            ros.spin_until(
                lambda: relay.clocks or len(relay.episodes) >= episodes or not sim.alive(), timeout, "the next sim tick"
            )
            if not relay.clocks:
                break
            ros.watch = [policy, sim]
            clock_raw = relay.clocks.pop(0)
            c = deserialize_message(clock_raw, T["clock"]).clock
            t_ns = c.sec * 1_000_000_000 + c.nanosec

            def stamped(buf: list[bytes], typ, t_ns: int = t_ns) -> bool:
                return any(_stamp_ns(deserialize_message(b, typ)) == t_ns for b in buf)

            ros.spin_until(
                lambda: stamped(relay.scans, T["scan"]) and stamped(relay.odoms, T["odom"]), timeout, "scan + odom"
            )
            scan_raw = _take(relay.scans, T["scan"], t_ns, deserialize_message)
            odom_raw = _take(relay.odoms, T["odom"], t_ns, deserialize_message)
            while relay.episodes[len(outcomes) :]:
                raw = relay.episodes[len(outcomes)]
                outcomes.append(json.loads(deserialize_message(raw, T["str"]).data))
                put(EPISODE, raw)
            ep = len(outcomes)
            for raw in relay.goals[seen_goals:]:  # a new episode: its goal first
                seen_goals += 1
                g = deserialize_message(raw, T["goal"])
                goal = (g.pose.position.x, g.pose.position.y)
                relay.pubs[GOAL].publish(raw)
                put(GOAL, raw)
                ep_tick = -1
                held.clear()
            ep_tick += 1
            faulty = ep == faults.episode

            where = {"tick": k, "episode": ep, "episode_tick": ep_tick, "t": t_ns * 1e-9}

            def note(kind: str, where: dict = where, **extra) -> None:
                info = {**where, "fault": kind, **extra}
                fault_log.append(info)
                raw = serialize_message(T["str"](data=json.dumps(info)))
                relay.fault_pub.publish(raw)
                put(FAULT, raw)

            if faulty and ep_tick in faults.goal_shift and goal is not None:
                dx, dy = faults.goal_shift[ep_tick]
                g = T["goal"]()
                g.header.frame_id = params.odom_frame
                g.header.stamp.sec, g.header.stamp.nanosec = divmod(t_ns, 1_000_000_000)
                goal = (goal[0] + dx, goal[1] + dy)
                g.pose.position.x, g.pose.position.y = goal
                g.pose.orientation.w = 1.0
                raw = serialize_message(g)
                note("goal_change", goal=list(goal))
                relay.pubs[GOAL].publish(raw)
                put(GOAL, raw)
            # Odometry under latency: this tick's message is held back for d ticks; the node gets
            # the newest held one that is due. A fresh message supersedes everything still held.
            # At most one message per input topic per tick, so no tick can fall between two.
            due = [h for h in held if h[0] <= ep_tick]
            for h in due:
                held.remove(h)
            if faulty and ep_tick in faults.odom_delay:
                d = int(faults.odom_delay[ep_tick])
                note("odom_delayed", ticks=d, seconds=round(d * period, 6))
                held.append((ep_tick + d, odom_raw))
                if due:
                    relay.pubs[ODOM].publish(due[-1][1])
                    put(ODOM, due[-1][1])
            else:
                if due or held:
                    note("odom_superseded", dropped=len(due) + len(held))
                held.clear()
                relay.pubs[ODOM].publish(odom_raw)
                put(ODOM, odom_raw)
            if faulty and ep_tick in faults.drop_scan:
                note("scan_dropped")
            else:
                if faulty and (ep_tick in faults.nan_some or ep_tick in faults.nan_all):
                    s = deserialize_message(scan_raw, T["scan"])
                    r = list(s.ranges)
                    step = 1 if ep_tick in faults.nan_all else 3
                    for i in range(0, len(r), step):
                        r[i] = math.nan
                    s.ranges = r
                    scan_raw = serialize_message(s)
                    note("nan_beams", every=step, beams=len(range(0, len(r), step)))
                relay.pubs[SCAN].publish(scan_raw)
                put(SCAN, scan_raw)
            n_cmd, n_status = len(relay.cmds), len(relay.status)
            relay.pubs[CLOCK].publish(clock_raw)
            put(CLOCK, clock_raw)
            ros.spin_until(
                lambda n_cmd=n_cmd, n_status=n_status: len(relay.cmds) > n_cmd and len(relay.status) > n_status,
                timeout,
                f"/cmd_vel of tick {k}",
            )
            if len(relay.cmds) != n_cmd + 1:
                raise RuntimeError(
                    f"tick {k}: the policy node published {len(relay.cmds) - n_cmd} commands, expected 1"
                )
            put(CMD, relay.cmds[-1])
            put(STATUS, relay.status[n_status])
            k += 1
        while relay.episodes[len(outcomes) :]:
            raw = relay.episodes[len(outcomes)]
            outcomes.append(json.loads(deserialize_message(raw, T["str"]).data))
            put(EPISODE, raw)
        if len(outcomes) != episodes:
            raise RuntimeError(
                f"recorded {len(outcomes)} episode outcomes, expected {episodes}\n{sim.output()[-3000:]}"
            )
    finally:
        for p in procs:
            p.stop()
        ros.close()
        lease.release()

    info = {
        "seed": seed,
        "episodes": episodes,
        "episode_length_s": episode_length_s,
        "faults": asdict(faults),
        "node_params": params.ros_params(),
        "bundle_fingerprint": str(getattr(contract, "fingerprint", "")),
        "bundle_onnx_sha256": _sha256(bundle / "policy.onnx"),
        "ticks": k,
    }
    write_bag(out, rows, {"nav_policy_bags": json.dumps(info, sort_keys=True)})
    counts: dict[str, int] = {}
    for topic, _, _ in rows:
        counts[topic] = counts.get(topic, 0) + 1
    return RecordResult(out, k, outcomes, fault_log, counts)


def _stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def _take(buf: list[bytes], typ, t_ns: int, deserialize) -> bytes:
    """Remove and return the message stamped ``t_ns`` (the simulator publishes one per tick)."""
    for i, raw in enumerate(buf):
        if _stamp_ns(deserialize(raw, typ)) == t_ns:
            del buf[: i + 1]  # older leftovers cannot belong to any later tick
            return raw
    raise KeyError(t_ns)
