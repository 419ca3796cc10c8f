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
from navbags.rosproc import DomainLease, NodeProc, RosSide, Timeout, console_script, ros_args

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

    def connected(self) -> bool:
        """Every publisher of the relay has its subscriber and every subscription its publisher, the
        episode outcomes' excepted (transient local: none is lost to a late match)."""
        outs = all(p.get_subscription_count() > 0 for p in self.pubs.values())
        ins = all(s.get_publisher_count() > 0 for s in self.subs[1:])
        return outs and ins


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
    from navcontract.bundle import read_contract

    out, bundle = Path(out), Path(bundle).resolve()
    if out.exists():  # the bag is written at the end: refuse now, not after the whole run
        raise FileExistsError(f"{out} already exists; record into a new folder")
    faults = faults or FaultPlan()
    params = params or NodeParams()
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="navbags_record_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    contract = read_contract(bundle)
    sim_params = _sim_params(seed, episodes, episode_length_s, noise_std, timeout)
    lease = DomainLease()
    ros = RosSide(lease.domain_id, "navbags_recorder")
    procs: list[NodeProc] = []
    try:
        relay = _Relay(ros)
        policy, sim = _start_nodes(procs, ros, lease.domain_id, bundle, params, sim_params, log_dir)
        ros.spin_until(relay.connected, timeout, "the simulator and the policy node to connect")
        rec = _Recorder(ros, relay, faults, params, float(contract.control_period), timeout)
        rec.run(policy, sim, episodes)
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
        "ticks": rec.ticks,
    }
    write_bag(out, rec.rows, {"nav_policy_bags": json.dumps(info, sort_keys=True)})
    counts: dict[str, int] = {}
    for topic, _, _ in rec.rows:
        counts[topic] = counts.get(topic, 0) + 1
    return RecordResult(out, rec.ticks, rec.outcomes, rec.fault_log, counts)


def _sim_params(seed: int, episodes: int, episode_length_s: float, noise_std: float, timeout: float) -> dict:
    """The simulator node's parameters: lockstep on the node's /cmd_vel, its inputs on the raw topics
    the relay listens to, its goal published, exit after ``episodes`` episodes."""
    return {
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


def _start_nodes(
    procs: list[NodeProc],
    ros: RosSide,
    domain_id: int,
    bundle: Path,
    params: NodeParams,
    sim_params: dict,
    log_dir: Path,
) -> tuple[NodeProc, NodeProc]:
    """Start ``policy_node`` (use_sim_time) then ``sim_node`` (its clock on the raw topic), each put in
    ``procs`` and watched by ``ros`` as soon as it runs."""
    node_params = {"bundle_path": str(bundle), "use_sim_time": True, **params.ros_params()}
    policy = NodeProc([console_script("policy_node"), *ros_args(node_params)], domain_id, log_dir / "policy_node.log")
    procs.append(policy)
    ros.watch = [policy]
    sim = NodeProc(
        [console_script("sim_node"), *ros_args(sim_params, {CLOCK: RAW + CLOCK})],
        domain_id,
        log_dir / "sim_node.log",
    )
    procs.append(sim)
    ros.watch = [policy, sim]
    return policy, sim


@dataclass
class _Tick:
    """One simulator tick being relayed."""

    k: int  # over the whole recording
    episode: int
    episode_tick: int  # 0 = the episode's first clock tick
    t_ns: int
    faulty: bool  # the tick's episode is the one the fault plan applies to

    def where(self) -> dict:
        return {"tick": self.k, "episode": self.episode, "episode_tick": self.episode_tick, "t": self.t_ns * 1e-9}


class _Recorder:
    """Relays each simulator tick to the policy node (faults applied) and keeps, as bag rows, exactly what
    the node received in the order it received it, then what it answered; see the module docstring."""

    def __init__(
        self, ros: RosSide, relay: _Relay, faults: FaultPlan, params: NodeParams, period: float, timeout: float
    ) -> None:
        self.ros, self.relay, self.faults, self.params = ros, relay, faults, params
        self.period, self.timeout = period, timeout
        self.resends = 0  # ticks' inputs published again for want of an answer (RESEND_PERIOD)
        self.sim_resends = 0  # clocks of ticks already relayed, sent again by the simulator and skipped
        self._relayed_ns: int | None = None  # the stamp of the last tick relayed
        self._tick_sent: list[tuple[str, bytes]] = []  # this tick's scan and odometry, as published
        self.rows: list[tuple[str, int, bytes]] = []
        self.fault_log: list[dict] = []
        self.outcomes: list[dict] = []
        self.ticks = 0
        self._last_t = 0
        self._held: list[tuple[int, bytes]] = []  # (release tick, odometry) held back
        self._goal: tuple[float, float] | None = None  # (x, y) the node was last sent
        self._episode_tick = -1
        self._seen_goals = 0

    def put(self, topic: str, raw: bytes) -> None:
        """A bag row stamped with the wall clock, strictly increasing."""
        t = max(time.time_ns(), self._last_t + 1)
        self._last_t = t
        self.rows.append((topic, t, bytes(raw)))

    def run(self, policy: NodeProc, sim: NodeProc, episodes: int) -> None:
        """Relay ticks until the simulator has no more (it reported ``episodes`` outcomes or exited); every
        outcome must have arrived. A clock stamped at or before the last tick relayed is the simulator
        sending that tick again (lockstep resend) and is skipped: its scan may be the copy taken."""
        relay = self.relay
        while True:
            self.ros.watch = [policy]  # the simulator exits when done
            self.ros.spin_until(
                lambda: relay.clocks or len(relay.episodes) >= episodes or not sim.alive(),
                self.timeout,
                "the next sim tick",
            )
            if not relay.clocks:
                break
            self.ros.watch = [policy, sim]
            clock_raw = relay.clocks.pop(0)
            if self._relayed_ns is not None and _clock_ns(clock_raw, relay.types["clock"]) <= self._relayed_ns:
                self.sim_resends += 1  # the simulator sent a tick again that has been relayed already
                continue
            self._relay_tick(clock_raw)
        self._collect_outcomes()
        if len(self.outcomes) != episodes:
            raise RuntimeError(
                f"recorded {len(self.outcomes)} episode outcomes, expected {episodes}\n{sim.output()[-3000:]}"
            )

    def _relay_tick(self, clock_raw: bytes) -> None:
        """One tick: its scan and odometry (stamped as the clock), episode outcomes and a new episode's
        goal first, the faults of this tick, the inputs, the clock last, then the node's answer."""
        t_ns = _clock_ns(clock_raw, self.relay.types["clock"])
        scan_raw, odom_raw = self._take_inputs(t_ns)
        self._relayed_ns = t_ns
        self._collect_outcomes()
        self._relay_new_goals()
        self._episode_tick += 1
        ep = len(self.outcomes)
        tick = _Tick(self.ticks, ep, self._episode_tick, t_ns, ep == self.faults.episode)
        if tick.faulty and tick.episode_tick in self.faults.goal_shift and self._goal is not None:
            self._shift_goal(tick)
        self._relay_odom(tick, odom_raw)
        self._relay_scan(tick, scan_raw)
        self._clock_and_answer(clock_raw)
        self.ticks += 1

    def _take_inputs(self, t_ns: int) -> tuple[bytes, bytes]:
        """Wait for the simulator's scan and odometry stamped ``t_ns`` and take them."""
        from rclpy.serialization import deserialize_message

        relay, types = self.relay, self.relay.types

        def stamped(buf: list[bytes], typ) -> bool:
            return any(_stamp_ns(deserialize_message(b, typ)) == t_ns for b in buf)

        self.ros.spin_until(
            lambda: stamped(relay.scans, types["scan"]) and stamped(relay.odoms, types["odom"]),
            self.timeout,
            "scan + odom",
        )
        scan_raw = _take(relay.scans, types["scan"], t_ns, deserialize_message)
        odom_raw = _take(relay.odoms, types["odom"], t_ns, deserialize_message)
        return scan_raw, odom_raw

    def _collect_outcomes(self) -> None:
        """Episode outcomes the simulator published since the last call, into the bag."""
        from rclpy.serialization import deserialize_message

        while self.relay.episodes[len(self.outcomes) :]:
            raw = self.relay.episodes[len(self.outcomes)]
            self.outcomes.append(json.loads(deserialize_message(raw, self.relay.types["str"]).data))
            self.put(EPISODE, raw)

    def _relay_new_goals(self) -> None:
        """A new episode's goal goes to the node first; it restarts the episode's tick count and drops any
        odometry still held back."""
        from rclpy.serialization import deserialize_message

        for raw in self.relay.goals[self._seen_goals :]:
            self._seen_goals += 1
            g = deserialize_message(raw, self.relay.types["goal"])
            self._goal = (g.pose.position.x, g.pose.position.y)
            self.relay.pubs[GOAL].publish(raw)
            self.put(GOAL, raw)
            self._episode_tick = -1
            self._held.clear()

    def _note(self, tick: _Tick, kind: str, **extra) -> None:
        """A fault injected at ``tick``: logged, published on the fault topic and written to the bag."""
        from rclpy.serialization import serialize_message

        info = {**tick.where(), "fault": kind, **extra}
        self.fault_log.append(info)
        raw = serialize_message(self.relay.types["str"](data=json.dumps(info)))
        self.relay.fault_pub.publish(raw)
        self.put(FAULT, raw)

    def _shift_goal(self, tick: _Tick) -> None:
        """Send the node a goal moved by the plan's offset for this tick (stamped with the tick's time)."""
        from rclpy.serialization import serialize_message

        dx, dy = self.faults.goal_shift[tick.episode_tick]
        g = self.relay.types["goal"]()
        g.header.frame_id = self.params.odom_frame
        g.header.stamp.sec, g.header.stamp.nanosec = divmod(tick.t_ns, 1_000_000_000)
        self._goal = (self._goal[0] + dx, self._goal[1] + dy)
        g.pose.position.x, g.pose.position.y = self._goal
        g.pose.orientation.w = 1.0
        raw = serialize_message(g)
        self._note(tick, "goal_change", goal=list(self._goal))
        self.relay.pubs[GOAL].publish(raw)
        self.put(GOAL, raw)

    def _relay_odom(self, tick: _Tick, odom_raw: bytes) -> None:
        """Odometry under latency: this tick's message is held back for d ticks; the node gets the newest
        held one that is due. A fresh message supersedes everything still held. At most one message per
        input topic per tick, so no tick can fall between two."""
        et = tick.episode_tick
        due = [h for h in self._held if h[0] <= et]
        for h in due:
            self._held.remove(h)
        if tick.faulty and et in self.faults.odom_delay:
            d = int(self.faults.odom_delay[et])
            self._note(tick, "odom_delayed", ticks=d, seconds=round(d * self.period, 6))
            self._held.append((et + d, odom_raw))
            if due:
                self._publish(ODOM, due[-1][1])
                self.put(ODOM, due[-1][1])
            return
        if due or self._held:
            self._note(tick, "odom_superseded", dropped=len(due) + len(self._held))
        self._held.clear()
        self._publish(ODOM, odom_raw)
        self.put(ODOM, odom_raw)

    def _relay_scan(self, tick: _Tick, scan_raw: bytes) -> None:
        """The scan, unless the plan drops it; NaN in every third beam (``nan_some``) or every beam
        (``nan_all``) where the plan says so."""
        from rclpy.serialization import deserialize_message, serialize_message

        et, faults = tick.episode_tick, self.faults
        if tick.faulty and et in faults.drop_scan:
            self._note(tick, "scan_dropped")
            return
        if tick.faulty and (et in faults.nan_some or et in faults.nan_all):
            s = deserialize_message(scan_raw, self.relay.types["scan"])
            r = list(s.ranges)
            step = 1 if et in faults.nan_all else 3
            for i in range(0, len(r), step):
                r[i] = math.nan
            s.ranges = r
            scan_raw = serialize_message(s)
            self._note(tick, "nan_beams", every=step, beams=len(range(0, len(r), step)))
        self._publish(SCAN, scan_raw)
        self.put(SCAN, scan_raw)

    def _publish(self, topic: str, raw: bytes) -> None:
        """Publish one of this tick's inputs to the node, remembered for a resend."""
        self.relay.pubs[topic].publish(raw)
        self._tick_sent.append((topic, raw))

    def _clock_and_answer(self, clock_raw: bytes) -> None:
        """Publish the clock (the node's timer fires on it) and wait for the node's one command and
        status of this tick; both go into the bag. A tick without an answer after
        :data:`RESEND_PERIOD` has its scan, odometry and clock published again, the same messages (a
        best-effort message sent before the node had matched the relay is lost for good), until
        ``timeout``; the bag holds each once, and :attr:`resends` counts them."""
        relay = self.relay
        n_cmd, n_status = len(relay.cmds), len(relay.status)
        relay.pubs[CLOCK].publish(clock_raw)
        self.put(CLOCK, clock_raw)
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            try:
                self.ros.spin_until(
                    lambda: len(relay.cmds) > n_cmd and len(relay.status) > n_status,
                    max(min(RESEND_PERIOD, left), 0.0),
                    f"/cmd_vel of tick {self.ticks}",
                )
                break
            except Timeout:
                if left <= RESEND_PERIOD:
                    raise
            self.resends += 1
            for topic, raw in self._tick_sent:
                relay.pubs[topic].publish(raw)
            relay.pubs[CLOCK].publish(clock_raw)
        self._tick_sent = []
        if len(relay.cmds) != n_cmd + 1:
            raise RuntimeError(
                f"tick {self.ticks}: the policy node published {len(relay.cmds) - n_cmd} commands, expected 1"
            )
        self.put(CMD, relay.cmds[-1])
        self.put(STATUS, relay.status[n_status])


RESEND_PERIOD = 1.0
"""[s] A tick without the node's answer this long has its inputs published again."""


def _clock_ns(clock_raw: bytes, typ) -> int:
    """The time a serialised /clock message carries, in nanoseconds."""
    from rclpy.serialization import deserialize_message

    c = deserialize_message(clock_raw, typ).clock
    return c.sec * 1_000_000_000 + c.nanosec


def _stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def _take(buf: list[bytes], typ, t_ns: int, deserialize) -> bytes:
    """Remove and return the message stamped ``t_ns`` (the simulator publishes one per tick)."""
    for i, raw in enumerate(buf):
        if _stamp_ns(deserialize(raw, typ)) == t_ns:
            del buf[: i + 1]  # older leftovers cannot belong to any later tick
            return raw
    raise KeyError(t_ns)
