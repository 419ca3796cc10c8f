"""Replay a bag into a live policy node and compare every command it publishes.

The harness starts ``policy_node`` with ``use_sim_time`` on a private loopback domain and publishes
the bag's input messages (``/goal_pose``, ``/scan``, ``/odom``, ``/clock``; raw CDR bytes, the
recorded QoS) in recorded order, optionally paced by their recorded log times divided by ``rate``.
Determinism: the node's timer runs on the bag's ``/clock``, so it can only tick when a clock message
reaches its next deadline (the offline reference knows which ones). After such a clock the harness
waits for that tick's ``/cmd_vel`` and status before it publishes anything else, so every input
before the clock has reached the node and none after it can have. Inputs of one tick leave this
process in order on one DDS participant; the bag holds at most one message per input topic between
two ticks (checked: otherwise the rclpy executor could run the timer between two messages of one
topic, and the tick would be ambiguous).

Each command is compared with (a) the command recorded in the bag for the same tick and (b) the
offline reference (:mod:`navbags.reference`: the node's own safety controller, driven without ROS),
and each state with both; every message of the bag gets a fate in the accounting (published and
seen by which ticks, superseded, compared, annotation).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from navbags.bagio import (
    ANNOTATION,
    CLOCK,
    CMD,
    INPUT,
    INPUT_TOPICS,
    OUTPUT,
    STATUS,
    TOPICS,
    BagMessage,
    decode,
    read_bag,
)
from navbags.reference import NodeParams, Reference, compute_reference, load_runtime
from navbags.rosproc import DomainLease, NodeProc, RosSide, console_script, ros_args


@dataclass
class ReplayReport:
    bag: str
    ticks: int
    node_cmds: np.ndarray  # (n, 3) what the live node published, one per tick
    recorded_cmds: np.ndarray  # (n, 3) the bag's /cmd_vel
    offline_cmds: np.ndarray  # (n, 3) the offline reference
    node_states: list[str]
    recorded_states: list[str]
    offline_states: list[str]
    fates: dict[int, str]  # bag index -> what happened to that message
    counts: dict[str, dict[str, int]]  # topic -> {in_bag, published, ...}
    ambiguous: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def max_delta_offline(self) -> float:
        return _maxabs(self.node_cmds, self.offline_cmds)

    @property
    def max_delta_recorded(self) -> float:
        return _maxabs(self.node_cmds, self.recorded_cmds)

    @property
    def unaccounted(self) -> int:
        return sum(c["in_bag"] for c in self.counts.values()) - len(self.fates)

    def zero_ticks(self) -> list[int]:
        return [k for k, s in enumerate(self.offline_states) if s != "driving"]

    def ok(self, tol_offline: float = 1e-5, tol_recorded: float = 1e-4) -> bool:
        return (
            not self.problems
            and not self.ambiguous
            and self.unaccounted == 0
            and not any(f.startswith("extra-output") for f in self.fates.values())
            and self.max_delta_offline <= tol_offline
            and self.max_delta_recorded <= tol_recorded
        )

    def summary(self) -> str:
        states: dict[str, int] = {}
        for s in self.node_states:
            states[s] = states.get(s, 0) + 1
        lines = [
            f"bag {self.bag}: {self.ticks} control ticks replayed in {self.wall_s:.2f} s",
            f"  max |node - offline|  = {self.max_delta_offline:.3g}",
            f"  max |node - recorded| = {self.max_delta_recorded:.3g}",
            f"  states (node): {json.dumps(states, sort_keys=True)}",
            f"  states equal: node/offline {self.node_states == self.offline_states}, "
            f"node/recorded {self.node_states == self.recorded_states}",
        ]
        for topic, c in sorted(self.counts.items()):
            lines.append(f"  {topic:24s} " + ", ".join(f"{k} {v}" for k, v in c.items()))
        lines.append(f"  messages without a fate: {self.unaccounted}")
        lines += [f"  AMBIGUOUS: {a}" for a in self.ambiguous]
        lines += [f"  PROBLEM: {p}" for p in self.problems]
        return "\n".join(lines)


def _maxabs(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def _twist(m) -> list[float]:
    return [float(m.linear.x), float(m.linear.y), float(m.angular.z)]


def ambiguities(messages: list[BagMessage], ref: Reference) -> list[str]:
    """Places where two messages of one input topic fall between the same two ticks."""
    tick_at = {t.clock_index for t in ref.ticks}
    seen: dict[str, int] = {}
    out = []
    for m in messages:
        if m.index in tick_at:
            seen.clear()
        elif m.topic in INPUT_TOPICS and m.topic != CLOCK:
            if m.topic in seen:
                out.append(f"{m.topic} #{seen[m.topic]} and #{m.index} arrive before the same tick")
            seen[m.topic] = m.index
    return out


def fates(messages: list[BagMessage], ref: Reference) -> dict[int, str]:
    """Every message's fate as ``"kind: detail"``: inputs from the reference's usage, outputs by tick.

    Kinds: ``fired`` (a clock that fired a tick), ``no-deadline`` (a clock between deadlines),
    ``seen`` (an input some tick saw), ``superseded`` (replaced before any tick saw it),
    ``after-last-tick``, ``compared`` (a recorded output paired with its tick), ``extra-output``
    (a recorded output with no tick), ``annotation``.
    """
    out: dict[int, str] = {}
    n_out: dict[str, int] = {}
    last_tick_clock = ref.ticks[-1].clock_index if ref.ticks else -1
    for i, m in enumerate(messages):
        if m.role == INPUT:
            used = ref.usage.get(m.index, [])
            if m.topic == CLOCK:
                out[m.index] = f"fired: tick {used[0]}" if used else "no-deadline: no timer deadline reached"
            elif used:
                out[m.index] = f"seen: by ticks {used[0]}..{used[-1]}"
            elif m.index > last_tick_clock:
                out[m.index] = "after-last-tick: published after the last tick"
            else:
                later = next((n.index for n in messages[i + 1 :] if n.topic == m.topic), None)
                out[m.index] = f"superseded: by #{later} before any tick"
        elif m.role == OUTPUT:
            k = n_out.get(m.topic, 0)
            n_out[m.topic] = k + 1
            out[m.index] = f"compared: tick {k}" if k < len(ref.ticks) else "extra-output: no tick"
        else:
            out[m.index] = "annotation: counted, not published"
    return out


def replay_bag(
    bag: str | Path,
    bundle: str | Path,
    params: NodeParams | None = None,
    rate: float = 0.0,
    timeout: float = 30.0,
    log_dir: str | Path | None = None,
    node_command: Sequence[str] | None = None,
) -> ReplayReport:
    """Replay ``bag`` into a fresh ``policy_node`` running ``bundle``; see the module docstring.

    ``node_command`` is the node's command line before its ``--ros-args`` (default: the installed
    ``policy_node`` console script)."""
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from rclpy.duration import Duration
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import String

    params = params or NodeParams()
    bundle = Path(bundle).resolve()
    messages, _ = read_bag(bag)
    ref = compute_reference(messages, load_runtime(bundle), params)
    recorded_cmds = np.array([_twist(decode(m)) for m in messages if m.topic == CMD]).reshape(-1, 3)
    recorded_states = [json.loads(decode(m).data)["state"] for m in messages if m.topic == STATUS]
    tick_of_clock = {t.clock_index: t.k for t in ref.ticks}
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="navbags_replay_"))
    log_dir.mkdir(parents=True, exist_ok=True)

    def qos_of(topic: str) -> QoSProfile:
        q = TOPICS[topic].qos
        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=q.depth,
            reliability=ReliabilityPolicy.RELIABLE
            if q.reliability.name == "RELIABLE"
            else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL
            if q.durability.name == "TRANSIENT_LOCAL"
            else DurabilityPolicy.VOLATILE,
        )

    node_cmds: list[list[float]] = []
    node_states: list[str] = []
    published: dict[str, int] = {t: 0 for t in INPUT_TOPICS}
    problems: list[str] = []
    lease = DomainLease()
    ros = RosSide(lease.domain_id, "navbags_replay")
    proc = None
    t_start = time.monotonic()
    try:
        n = ros.node
        types = {CLOCK: Clock, "/scan": LaserScan, "/odom": Odometry, "/goal_pose": PoseStamped}
        pubs = {t: n.create_publisher(types[t], t, qos_of(t)) for t in INPUT_TOPICS}
        out_qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        subs = [
            n.create_subscription(Twist, CMD, lambda m: node_cmds.append(_twist(m)), out_qos),
            n.create_subscription(String, STATUS, lambda m: node_states.append(json.loads(m.data)["state"]), out_qos),
        ]
        node_params = {"bundle_path": str(bundle), "use_sim_time": True, **params.ros_params()}
        cmd = list(node_command) if node_command else [console_script("policy_node")]
        proc = NodeProc([*cmd, *ros_args(node_params)], lease.domain_id, log_dir / "policy_node.log")
        ros.watch = [proc]
        ros.spin_until(
            lambda: (
                all(p.get_subscription_count() > 0 for p in pubs.values())
                and all(s.get_publisher_count() > 0 for s in subs)
            ),
            timeout,
            "the policy node to connect",
        )
        t0_log = next((m.log_time for m in messages), 0)
        t0_wall = time.monotonic()
        for m in messages:
            if m.role != INPUT:
                continue
            if rate > 0:
                due = t0_wall + (m.log_time - t0_log) * 1e-9 / rate
                ros.spin_until(lambda due=due: time.monotonic() >= due, timeout + (due - time.monotonic()), "pacing")
            pubs[m.topic].publish(m.raw)
            published[m.topic] += 1
            if TOPICS[m.topic].qos.reliability.name == "RELIABLE" and m.topic != CLOCK:
                if not pubs[m.topic].wait_for_all_acked(Duration(seconds=timeout)):
                    problems.append(f"{m.topic} #{m.index} not acknowledged by the node")
            k = tick_of_clock.get(m.index)
            if k is not None:
                ros.spin_until(
                    lambda k=k: len(node_cmds) > k and len(node_states) > k, timeout, f"the node's command of tick {k}"
                )
                if len(node_cmds) != k + 1:
                    problems.append(f"tick {k}: {len(node_cmds)} commands received so far, expected {k + 1}")
        ros.spin_until(lambda: len(node_states) >= len(node_cmds), timeout, "the last status")
        n_cmds = len(node_cmds)
        n_states = len(node_states)
    finally:
        if proc is not None:
            rc = proc.stop()
            if rc not in (0, None):
                problems.append(f"policy_node exited with {rc}:\n{proc.output()[-2000:]}")
        ros.close()
        lease.release()
    wall = time.monotonic() - t_start

    nt = len(ref.ticks)
    if n_cmds != nt:
        problems.append(f"the node published {n_cmds} commands for {nt} ticks")
    if recorded_cmds.shape[0] != nt:
        problems.append(f"the bag records {recorded_cmds.shape[0]} commands for {nt} ticks")
    node_arr = np.array(node_cmds[:n_cmds], dtype=np.float64).reshape(-1, 3)
    offline = np.array([t.cmd for t in ref.ticks], dtype=np.float64).reshape(-1, 3)
    offline_states = [t.state for t in ref.ticks]
    for k, s in enumerate(offline_states):
        if s != "driving" and k < len(node_arr) and np.any(node_arr[k] != 0.0):
            problems.append(f"tick {k}: state {s} but the node's command {node_arr[k].tolist()} is not exactly zero")

    fate = fates(messages, ref)
    counts: dict[str, dict[str, int]] = {}
    for m in messages:
        c = counts.setdefault(m.topic, {"in_bag": 0})
        c["in_bag"] += 1
        kind = fate[m.index].split(":")[0]
        c[kind] = c.get(kind, 0) + 1
    for t, c in counts.items():
        if TOPICS.get(t) and TOPICS[t].role == INPUT:
            c["published"] = published[t]
            if published[t] != c["in_bag"]:
                problems.append(f"{t}: {published[t]} of {c['in_bag']} messages published")
    for m in messages:
        if m.topic not in TOPICS:
            problems.append(f"unknown topic {m.topic} in the bag")
            break
    return ReplayReport(
        bag=str(bag),
        ticks=nt,
        node_cmds=node_arr,
        recorded_cmds=recorded_cmds,
        offline_cmds=offline,
        node_states=node_states[:n_states],
        recorded_states=recorded_states,
        offline_states=offline_states,
        fates=fate,
        counts=counts,
        ambiguous=ambiguities(messages, ref),
        problems=problems,
        wall_s=wall,
    )


__all__ = ["ANNOTATION", "ReplayReport", "ambiguities", "fates", "replay_bag"]
