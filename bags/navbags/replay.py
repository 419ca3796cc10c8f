"""Replay a bag into a live policy node and compare every command it publishes.

The harness starts ``policy_node`` with ``use_sim_time`` on a private loopback domain and publishes
the bag's input messages (``/goal_pose``, ``/scan``, ``/odom``, ``/clock``; raw CDR bytes, the
recorded QoS) in recorded order, optionally paced by their recorded log times divided by ``rate``.
Delivery: before the first message the harness waits until the node subscribes to every input and
then asks the node for its parameters (simulated time, its input topics); the answer proves the node
has matched every publisher of the harness (:func:`_connect`), so no first message, best effort or
not, is published into a connection only one side knows. Reliable inputs are acknowledged one by
one; a tick's ``/clock`` (read best effort by the node) is published again until the tick's command
comes back (:func:`_await_tick`; the same time twice moves nothing). A node that never connects,
dies, or stops answering aborts the replay with one line (:class:`ReplayAborted`).

Late delivery: each status names the stamps of the scan and odometry its tick read. On a loaded
machine an input published before a tick's clock can still reach the node after the tick's timer
ran; the tick then read the one before, which the status shows and the reference did not. Such a
live run tells nothing about the controller: it is set aside (named in the report) and the live run
is repeated, up to :data:`DELIVERY_ATTEMPTS` runs; commands are compared only for a run in which
every tick read what the reference read.

Determinism: the node's timer runs on the bag's ``/clock``, so it can only tick when a clock message
reaches its next deadline (the offline reference knows which ones). After such a clock the harness
waits for that tick's ``/cmd_vel`` and status before it publishes anything else, so every input
before the clock has reached the node and none after it can have. Inputs of one tick leave this
process in order on one DDS participant; the bag holds at most one message per input topic between
two ticks (checked: otherwise the rclpy executor could run the timer between two messages of one
topic, and the tick would be ambiguous).

Each command is compared with (a) the command recorded in the bag for the same tick and (b) the
offline reference (:mod:`navbags.reference`: the node's own command gate, driven without ROS),
and each state with both; every message of the bag gets a fate in the accounting (published and
seen by which ticks, superseded, compared, annotation).

What is published comes from :mod:`navbags.timeline`: a nav-bag-record bag as recorded; a
third-party bag (no ``/clock``, no commands of this node) mapped onto the node's topics, with a
``/clock`` the replay makes on a grid of the bag's stamps, compared with (b) only. A replay that
compared no tick fails and says so.
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
    GOAL,
    INPUT,
    INPUT_TOPICS,
    ODOM,
    OUTPUT,
    SCAN,
    STATUS,
    TOPICS,
    BagMessage,
    decode,
)
from navbags.reference import NodeParams, Reference, compute_reference, load_runtime
from navbags.rosproc import DomainLease, NodeProc, RosSide, Timeout, console_script, ros_args
from navbags.timeline import NAV_POLICY, InputMap, Timeline, load_timeline
from navdeploy.states import MOVING_STATES, WATCHDOG_STATES

MOVING = frozenset(s.value for s in MOVING_STATES)  # states whose command may be non-zero
WATCHDOG = frozenset(s.value for s in WATCHDOG_STATES)  # the node's wall-time /clock watchdog's states


@dataclass
class ReplayReport:
    bag: str
    ticks: int
    node_cmds: np.ndarray  # (n, 3) what the live node published, one per tick
    recorded_cmds: np.ndarray | None  # (n, 3) the bag's /cmd_vel; None: the bag has none of this node
    offline_cmds: np.ndarray  # (n, 3) the offline reference
    node_states: list[str]
    recorded_states: list[str] | None
    offline_states: list[str]
    fates: dict[int, str]  # bag index -> what happened to that message
    counts: dict[str, dict[str, int]]  # bag topic -> {in_bag, published, ...}
    ambiguous: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    kind: str = NAV_POLICY
    description: str = ""
    synthesized: dict[str, dict[str, int]] = field(default_factory=dict)  # messages the replay made (clock, goal)
    clock_resent: int = 0  # tick clocks published again (the node had not answered yet; see _await_tick)
    late_runs: list[str] = field(default_factory=list)  # live runs set aside: a tick read an input delivered late

    @property
    def compared(self) -> bool:
        """At least one tick's command was compared (a replay of zero ticks proves nothing)."""
        return self.ticks > 0 and self.node_cmds.shape == self.offline_cmds.shape

    @property
    def max_delta_offline(self) -> float | None:
        return _maxabs(self.node_cmds, self.offline_cmds) if self.ticks else None

    @property
    def max_delta_recorded(self) -> float | None:
        if self.recorded_cmds is None or not self.ticks:
            return None
        return _maxabs(self.node_cmds, self.recorded_cmds)

    @property
    def unaccounted(self) -> int:
        return sum(c["in_bag"] for c in self.counts.values()) - len(self.fates)

    def zero_ticks(self) -> list[int]:
        return [k for k, s in enumerate(self.offline_states) if s not in MOVING]

    def ok(self, tol_offline: float = 1e-5, tol_recorded: float = 1e-4) -> bool:
        recorded_ok = self.recorded_cmds is None or (
            self.max_delta_recorded is not None and self.max_delta_recorded <= tol_recorded
        )
        return (
            self.compared
            and not self.problems
            and not self.ambiguous
            and self.unaccounted == 0
            and not any(f.startswith("extra-output") for f in self.fates.values())
            and self.max_delta_offline is not None
            and self.max_delta_offline <= tol_offline
            and recorded_ok
        )

    def summary(self) -> str:
        states: dict[str, int] = {}
        for s in self.node_states:
            states[s] = states.get(s, 0) + 1
        lines = [f"bag {self.bag}: {self.ticks} control ticks replayed in {self.wall_s:.2f} s"]
        if self.description:
            lines.append(f"  {self.description}")
        if not self.ticks:
            lines.append("  NO TICK COMPARED: the node was never asked for a command, so nothing was checked")
        else:
            lines.append(f"  max |node - offline|  = {self.max_delta_offline:.3g}  (over {self.ticks} ticks)")
            if self.recorded_cmds is None:
                lines.append("  max |node - recorded| : n/a (the bag holds no commands of this node)")
            else:
                lines.append(f"  max |node - recorded| = {self.max_delta_recorded:.3g}")
            lines.append(f"  states (node): {json.dumps(states, sort_keys=True)}")
            equal = f"  states equal: node/offline {self.node_states == self.offline_states}"
            if self.recorded_states is not None:
                equal += f", node/recorded {self.node_states == self.recorded_states}"
            lines.append(equal)
        for topic, c in sorted(self.counts.items()):
            lines.append(f"  {topic:24s} " + ", ".join(f"{k} {v}" for k, v in c.items()))
        for topic, c in sorted(self.synthesized.items()):
            lines.append(f"  {topic + ' (replay)':24s} " + ", ".join(f"{k} {v}" for k, v in c.items()))
        lines.append(f"  messages without a fate: {self.unaccounted}")
        if self.clock_resent:
            lines.append(
                f"  /clock of a tick published again {self.clock_resent} times (the node had not answered yet)"
            )
        for late in self.late_runs:
            lines.append(f"  live run set aside, an input reached the node after its tick: {late}")
        lines += [f"  AMBIGUOUS: {a}" for a in self.ambiguous]
        lines += [f"  PROBLEM: {p}" for p in self.problems]
        return "\n".join(lines)

    def as_json(self) -> dict:
        return {
            "bag": self.bag,
            "kind": self.kind,
            "description": self.description,
            "ticks": self.ticks,
            "max_delta_offline": self.max_delta_offline,
            "max_delta_recorded": self.max_delta_recorded,
            "counts": self.counts,
            "synthesized": self.synthesized,
            "zero_ticks": self.zero_ticks(),
            "problems": self.problems,
            "ambiguous": self.ambiguous,
            "clock_resent": self.clock_resent,
            "late_runs": self.late_runs,
        }


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
    inputs: InputMap | None = None,
) -> ReplayReport:
    """Replay ``bag`` into a fresh ``policy_node`` running ``bundle``; see the module docstring.

    ``inputs`` maps a third-party bag's topics (and gives a goal); see :mod:`navbags.timeline`.
    Raises :class:`navbags.bagio.BagError` before starting anything when the bag cannot be replayed.
    ``node_command`` is the node's command line before its ``--ros-args`` (default: the installed
    ``policy_node`` console script)."""
    bundle = Path(bundle).resolve()
    runtime = load_runtime(bundle)
    timeline = load_timeline(bag, runtime.contract, params, inputs, bundle=bundle)
    return replay_timeline(timeline, runtime, bundle, rate, timeout, log_dir, node_command)


def replay_timeline(
    tl: Timeline,
    runtime,
    bundle: str | Path,
    rate: float = 0.0,
    timeout: float = 30.0,
    log_dir: str | Path | None = None,
    node_command: Sequence[str] | None = None,
) -> ReplayReport:
    """Publish ``tl.messages`` into a fresh ``policy_node`` running ``bundle`` (``runtime`` loaded from it)
    and compare every command; see the module docstring.

    Steps: the offline reference, the live run, the node's control ticks (watchdog zeros set aside),
    the per-tick comparison, the fate of every message. Problems are listed in that order."""
    bundle = Path(bundle).resolve()
    ref = compute_reference(tl.messages, runtime, tl.params)
    problems = _newest_input_problems(tl, runtime, ref)
    recorded_cmds, recorded_states = _recorded_outputs(tl)
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="navbags_replay_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    live, late_runs = _run_live_delivered(tl, ref, bundle, rate, timeout, log_dir, node_command)
    problems += live.problems
    node_cmds, node_states, watchdog = _control_ticks(live.heard, problems)
    offline = np.array([t.cmd for t in ref.ticks], dtype=np.float64).reshape(-1, 3)
    offline_states = [t.state for t in ref.ticks]
    _check_ticks(node_cmds, offline_states, recorded_cmds, ref, problems)
    if watchdog and node_cmds.shape == offline.shape and np.any(node_cmds != offline):
        problems.append(
            f"{watchdog} zeros of the node's clock watchdog (clock_timeout {tl.params.clock_timeout:g} s) came "
            "between ticks: each restarts the node's velocity smoother, the reference's does not; raise clock_timeout"
        )
    fate, counts, synthesized = _account(tl, ref, live.sent, problems)
    if watchdog:
        synthesized["/cmd_vel (clock watchdog)"] = {"zero": watchdog, "not compared": watchdog}
    return ReplayReport(
        bag=str(tl.bag),
        ticks=len(ref.ticks),
        node_cmds=node_cmds,
        recorded_cmds=recorded_cmds,
        offline_cmds=offline,
        node_states=node_states,
        recorded_states=recorded_states,
        offline_states=offline_states,
        fates=fate,
        counts=counts,
        ambiguous=ambiguities(tl.messages, ref),
        problems=problems,
        wall_s=live.wall_s,
        kind=tl.kind,
        description=tl.description,
        synthesized=synthesized,
        clock_resent=live.clock_resent,
        late_runs=late_runs,
    )


def _late_tick(heard: _Heard, ref: Reference) -> str | None:
    """The first control tick at which the node read another scan or odometry than the reference (an
    input published before the tick's clock that reached the node after its timer ran), or None."""
    for tick, got in zip(ref.ticks, heard.stamps, strict=False):
        if tuple(got) != tuple(tick.stamps):
            return (
                f"tick {tick.k} read scan/odometry stamped {list(got)}, the bag's before its clock {list(tick.stamps)}"
            )
    return None


def _run_live_delivered(tl: Timeline, ref: Reference, bundle: Path, rate, timeout, log_dir, node_command):
    """:func:`_run_live`, again (at most :data:`DELIVERY_ATTEMPTS` runs) while the node reports that
    a tick read an older input than the one published before its clock: the machine delivered it
    late, which says nothing about the controller; the comparison uses the first run in which every
    tick read what the reference read. Returns the run and the late runs' one-line accounts."""
    late_runs: list[str] = []
    for attempt in range(DELIVERY_ATTEMPTS):
        run_dir = log_dir / f"run{attempt + 1}" if attempt else log_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        live = _run_live(tl, ref, bundle, rate, timeout, run_dir, node_command)
        late = _late_tick(live.heard, ref)
        if late is None:
            return live, late_runs
        late_runs.append(late)
    live.problems.append(
        f"input delivered late in all {DELIVERY_ATTEMPTS} live runs ({late_runs[0]}): the machine is too loaded "
        "for a tick-exact replay"
    )
    return live, late_runs


def _newest_input_problems(tl: Timeline, runtime, ref: Reference) -> list[str]:
    """Publishing only the newest message per input topic and tick must lose nothing: the offline
    reference on every message of the bag (``tl.full_messages``) gives the same ticks, states and
    commands as on the messages published. Returns the first difference found (none: [])."""
    if tl.full_messages is None:
        return []
    problems = []
    full = compute_reference(tl.full_messages, runtime, tl.params)
    for a, b in zip(ref.ticks, full.ticks, strict=False):
        if a.state != b.state or not np.array_equal(a.cmd, b.cmd):
            problems.append(
                f"tick {a.k}: the offline result on every message ({b.state} {b.cmd.tolist()}) differs from the "
                f"one on the newest message per tick ({a.state} {a.cmd.tolist()}): the controller keeps more "
                "than the newest input"
            )
            break
    if len(full.ticks) != len(ref.ticks):
        problems.append(f"{len(full.ticks)} ticks on every message, {len(ref.ticks)} on the newest")
    return problems


def _recorded_outputs(tl: Timeline) -> tuple[np.ndarray | None, list[str] | None]:
    """The bag's own commands ``(n, 3)`` and states, when it holds this node's outputs; else (None, None)."""
    if not tl.compare_recorded:
        return None, None
    cmds = np.array([_twist(decode(m)) for m in tl.messages if m.topic == CMD]).reshape(-1, 3)
    states = [json.loads(decode(m).data)["state"] for m in tl.messages if m.topic == STATUS]
    return cmds, states


@dataclass
class _Heard:
    """What the live node published, in arrival order: one command, then one status, per tick."""

    cmds: list[list[float]] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    stalled: int = 0  # statuses of the node's wall-time /clock watchdog so far (not control ticks)
    stamps: list[tuple] = field(default_factory=list)  # per control tick: the scan and odometry stamps it read

    def on_cmd(self, m) -> None:
        self.cmds.append(_twist(m))

    def on_status(self, m) -> None:
        status = json.loads(m.data)
        state = status["state"]
        self.states.append(state)
        self.stalled += state in WATCHDOG
        if state not in WATCHDOG:
            self.stamps.append(tuple(status.get("input_stamps") or (None, None)))

    def ticks(self) -> int:
        """Control ticks heard (statuses that are not the watchdog's)."""
        return len(self.states) - self.stalled


@dataclass
class _LiveRun:
    heard: _Heard
    sent: set[int]  # indices in ``tl.messages`` published
    problems: list[str]
    wall_s: float
    clock_resent: int = 0  # tick clocks published again because the node had not answered yet


def _qos_of(topic: str):
    """The rclpy QoS of a bag topic: the profile its recorded publisher offered."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    q = TOPICS[topic].qos
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=q.depth,
        reliability=ReliabilityPolicy.RELIABLE if q.reliability.name == "RELIABLE" else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL
        if q.durability.name == "TRANSIENT_LOCAL"
        else DurabilityPolicy.VOLATILE,
    )


def _endpoints(node, heard: _Heard) -> tuple[dict, list]:
    """Publishers of the node's inputs (recorded QoS) and subscriptions to its command and status."""
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import String

    types = {CLOCK: Clock, "/scan": LaserScan, "/odom": Odometry, "/goal_pose": PoseStamped}
    pubs = {t: node.create_publisher(types[t], t, _qos_of(t)) for t in INPUT_TOPICS}
    out_qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    subs = [
        node.create_subscription(Twist, CMD, heard.on_cmd, out_qos),
        node.create_subscription(String, STATUS, heard.on_status, out_qos),
    ]
    return pubs, subs


class ReplayAborted(RuntimeError):
    """The live run could not finish (the node never connected, died, or stopped answering): the
    message is one line naming what was missing and where the node's log is; ``log`` holds its tail."""

    def __init__(self, text: str, log: str = "") -> None:
        super().__init__(text)
        self.log = log


NODE_NAME = "policy_node"
CONNECT_TIMEOUT = 60.0  # [s] a node's start (imports, ONNX session, DDS discovery) on a loaded machine
RESEND_S = 0.5  # [s] a tick's /clock is published again when its command has not come back by then
DELIVERY_ATTEMPTS = 3  # live runs of one replay at most, while a tick reads an input delivered late


def _run_live(
    tl: Timeline,
    ref: Reference,
    bundle: Path,
    rate: float,
    timeout: float,
    log_dir: Path,
    node_command: Sequence[str] | None,
) -> _LiveRun:
    """Start ``policy_node`` on a private domain, connect to it (:func:`_connect`), publish the
    timeline's inputs in order, collect what it publishes, stop it. A node that exits with an error
    is a problem; a node that never connects, dies or stops answering aborts the run
    (:class:`ReplayAborted`, one line)."""
    heard, problems = _Heard(), []
    sent: set[int] = set()
    lease = DomainLease()
    ros = RosSide(lease.domain_id, "navbags_replay")
    proc = None
    t_start = time.monotonic()
    resent = [0]
    try:
        pubs, subs = _endpoints(ros.node, heard)
        node_params = {"bundle_path": str(bundle), "use_sim_time": True, **tl.params.ros_params()}
        cmd = list(node_command) if node_command else [console_script(NODE_NAME)]
        proc = NodeProc([*cmd, *ros_args(node_params)], lease.domain_id, log_dir / "policy_node.log")
        ros.watch = [proc]
        try:
            _connect(ros, pubs, subs, max(timeout, CONNECT_TIMEOUT))
            sent = _publish_in_order(ros, pubs, tl.messages, ref, heard, rate, timeout, problems, resent)
            ros.spin_until(lambda: len(heard.states) >= len(heard.cmds), timeout, "the last status")
        except (Timeout, RuntimeError) as exc:
            raise _aborted(tl, proc, exc) from None
    finally:
        if proc is not None:
            rc = proc.stop()
            if rc not in (0, None):
                problems.append(f"policy_node exited with {rc}: {_last_line(proc)} (log {proc.log_path})")
        ros.close()
        lease.release()
    return _LiveRun(heard, sent, problems, time.monotonic() - t_start, resent[0])


def _last_line(proc: NodeProc) -> str:
    lines = [ln.strip() for ln in proc.output().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def _aborted(tl: Timeline, proc: NodeProc, exc: Exception) -> ReplayAborted:
    """One line: the bag, what the replay waited for (the first line of ``exc``), the node's last log
    line when it exited, and where its log is."""
    what = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    died = "" if proc.alive() else f"; its last line: {_last_line(proc)}"
    return ReplayAborted(f"bag {tl.bag}: {what}{died} (node log {proc.log_path})", proc.output()[-3000:])


def _connect(ros: RosSide, pubs: dict, subs: list, timeout: float) -> None:
    """Wait until the node subscribes to every input and publishes its command and status, then ask it
    for its parameters and check them (simulated time, the input topics this replay publishes).

    The parameter reply is also the proof that the node has discovered this process's publishers:
    DDS announces a participant's endpoints in the order they were created, over one reliable
    stream, and the node matches each as it reads its announcement; the request's publisher is
    created after the input publishers, so a node that answered a request has matched every input
    publisher before it. A best-effort input (the /clock, the scan) published to a node that has
    not yet matched its publisher would be dropped without a trace."""

    def missing() -> list[str]:
        out = [f"a subscriber of {t}" for t, p in pubs.items() if p.get_subscription_count() == 0]
        return out + [f"a publisher of {s.topic_name}" for s in subs if s.get_publisher_count() == 0]

    try:
        ros.spin_until(lambda: not missing(), timeout, "the policy node to connect")
    except Timeout:
        raise Timeout(
            f"timed out after {timeout:g} s waiting for the policy node: missing {', '.join(missing())}"
        ) from None
    values = _node_parameters(ros, ["use_sim_time", "scan_topic", "odom_topic", "goal_topic"], timeout)
    wrong = [f"use_sim_time {values['use_sim_time']}"] if values["use_sim_time"] is not True else []
    for name, topic in (("scan_topic", SCAN), ("odom_topic", ODOM), ("goal_topic", GOAL)):
        if values[name] != topic:
            wrong.append(f"{name} {values[name]!r} (the replay publishes {topic})")
    if wrong:
        raise RuntimeError(f"the policy node reports {', '.join(wrong)}: it would not read what the replay publishes")


def _node_parameters(ros: RosSide, names: list[str], timeout: float) -> dict[str, object]:
    """The node's values of ``names`` (its get_parameters service)."""
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    client = ros.node.create_client(GetParameters, f"/{NODE_NAME}/get_parameters")
    try:
        ros.spin_until(client.service_is_ready, timeout, "the policy node's parameter service")
        fut = client.call_async(GetParameters.Request(names=names))
        ros.spin_until(fut.done, timeout, "the policy node's parameters")
        return {n: parameter_value_to_python(v) for n, v in zip(names, fut.result().values, strict=True)}
    finally:
        ros.node.destroy_client(client)


def _publish_in_order(
    ros: RosSide,
    pubs: dict,
    messages: list[BagMessage],
    ref: Reference,
    heard: _Heard,
    rate: float,
    timeout: float,
    problems: list[str],
    resent: list[int],
) -> set[int]:
    """Publish every input of ``messages`` in order (paced by log time / ``rate`` when ``rate > 0``) and
    return the indices published. A reliable input (not the clock) must be acknowledged before the next;
    after a clock that fires tick k, nothing more is published until the node's command of tick k is in
    (:func:`_await_tick`)."""
    from rclpy.duration import Duration

    tick_of_clock = {t.clock_index: t.k for t in ref.ticks}
    sent: set[int] = set()
    t0_log = next((m.log_time for m in messages), 0)
    t0_wall = time.monotonic()
    for i, m in enumerate(messages):
        if m.role != INPUT:
            continue
        if rate > 0:
            due = t0_wall + (m.log_time - t0_log) * 1e-9 / rate
            ros.spin_until(lambda due=due: time.monotonic() >= due, timeout + (due - time.monotonic()), "pacing")
        pubs[m.topic].publish(m.raw)
        sent.add(i)
        if TOPICS[m.topic].qos.reliability.name == "RELIABLE" and m.topic != CLOCK:
            if not pubs[m.topic].wait_for_all_acked(Duration(seconds=timeout)):
                problems.append(f"{m.topic} #{m.index} not acknowledged by the node")
        k = tick_of_clock.get(m.index)
        if k is not None:
            resent[0] += _await_tick(ros, pubs[CLOCK], m, k, heard, timeout)
            if heard.ticks() != k + 1:
                problems.append(f"tick {k}: {heard.ticks()} ticks' commands received so far, expected {k + 1}")
    return sent


def _await_tick(ros: RosSide, clock_pub, clock: BagMessage, k: int, heard: _Heard, timeout: float) -> int:
    """Wait for the node's command and status of tick ``k``, which ``clock`` fires. The node reads
    /clock best effort (rclpy's time source): a clock it missed is published again every
    :data:`RESEND_S` seconds. That is safe: the same time again moves nothing, and fires no second
    tick. Returns how many times it was published again; Timeout after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    again = 0

    def answered() -> bool:
        return heard.ticks() > k and len(heard.cmds) >= len(heard.states)

    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Timeout(
                f"timed out after {timeout:g} s waiting for the node's command of tick {k} "
                f"(its /clock published {again + 1} times; {heard.ticks()} ticks answered before)"
            )
        try:
            ros.spin_until(answered, min(RESEND_S, left), f"the node's command of tick {k}")
            return again
        except Timeout:
            if heard.ticks() > k:  # the command is in, its status still on the way
                continue
            clock_pub.publish(clock.raw)
            again += 1


def _control_ticks(heard: _Heard, problems: list[str]) -> tuple[np.ndarray, list[str], int]:
    """The node's control ticks: its commands ``(n, 3)`` and states without the watchdog's, and how many
    watchdog statuses there were.

    The node pairs each command with one status (command first). Under use_sim_time its wall-time
    watchdog publishes a zero with state clock_stalled while /clock does not advance (a slow replay,
    --rate well under 1): those are no control ticks; they are counted, checked zero, not compared."""
    n_cmds, n_states = len(heard.cmds), len(heard.states)
    if n_cmds != n_states:
        problems.append(f"the node published {n_cmds} commands and {n_states} statuses")
    watchdog = [k for k, s in enumerate(heard.states) if s in WATCHDOG]
    for k in watchdog:
        if k < n_cmds and any(v != 0.0 for v in heard.cmds[k]):
            problems.append(f"a {heard.states[k]} command {heard.cmds[k]} is not exactly zero")
    keep = [k for k in range(min(n_cmds, n_states)) if heard.states[k] not in WATCHDOG]
    cmds = np.array([heard.cmds[k] for k in keep], dtype=np.float64).reshape(-1, 3)
    return cmds, [heard.states[k] for k in keep], len(watchdog)


def _check_ticks(
    node_cmds: np.ndarray,
    offline_states: list[str],
    recorded_cmds: np.ndarray | None,
    ref: Reference,
    problems: list[str],
) -> None:
    """The counts agree (node, reference and bag: one command per tick, at least one tick), and every
    tick whose offline state is not a moving one (``driving``, ``recovering``) got an exact zero from
    the node."""
    nt = len(ref.ticks)
    if nt == 0:
        problems.append(
            "no control tick was compared: no /clock message of the bag reaches the node's first timer deadline "
            f"({ref.period_ns * 1e-9:g} s)"
        )
    if len(node_cmds) != nt:
        problems.append(f"the node published {len(node_cmds)} commands for {nt} ticks")
    if recorded_cmds is not None and recorded_cmds.shape[0] != nt:
        problems.append(f"the bag records {recorded_cmds.shape[0]} commands for {nt} ticks")
    for k, s in enumerate(offline_states):
        if s not in MOVING and k < len(node_cmds) and np.any(node_cmds[k] != 0.0):
            problems.append(f"tick {k}: state {s} but the node's command {node_cmds[k].tolist()} is not exactly zero")


def _account(
    tl: Timeline, ref: Reference, sent: set[int], problems: list[str]
) -> tuple[dict[int, str], dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Every message of the bag gets a fate: those published from the replay's own accounting, the rest
    (third-party bags: superseded before publishing, topics that are no input) from the timeline.
    Returns the fates by bag index, the counts per bag topic and per topic the replay made; every input
    to publish must have been published."""
    fate, synthesized, published_from = _fates_of_published(tl, ref, sent)
    counts: dict[str, dict[str, int]] = {}
    for m in tl.bag_messages:
        c = counts.setdefault(m.topic, {"in_bag": 0})
        c["in_bag"] += 1
        if m.index in fate:
            kind = fate[m.index].split(":")[0]
            c[kind] = c.get(kind, 0) + 1
    to_publish: dict[str, int] = {}
    for m, origin in zip(tl.messages, tl.origin, strict=True):
        if origin is not None and m.role == INPUT:
            topic = tl.bag_messages[origin].topic
            to_publish[topic] = to_publish.get(topic, 0) + 1
    for t, want in to_publish.items():
        counts[t]["published"] = published_from.get(t, 0)
        if published_from.get(t, 0) != want:
            problems.append(f"{t}: {published_from.get(t, 0)} of {want} messages published")
    for t, c in synthesized.items():
        if c["published"] != c["made"]:
            problems.append(f"{t} (made by the replay): {c['published']} of {c['made']} messages published")
    if tl.kind == NAV_POLICY:
        for m in tl.bag_messages:
            if m.topic not in TOPICS:
                problems.append(f"unknown topic {m.topic} in the bag")
                break
    return fate, counts, synthesized


def _fates_of_published(
    tl: Timeline, ref: Reference, sent: set[int]
) -> tuple[dict[int, str], dict[str, dict[str, int]], dict[str, int]]:
    """The timeline's fates carried back to the bag's messages (on top of those the timeline skipped),
    the counts of the messages the replay made itself (``origin`` None: made, published, by fate), and
    how many messages of each bag topic were published."""
    timeline_fates = fates(tl.messages, ref)
    fate: dict[int, str] = dict(tl.skipped)
    synthesized: dict[str, dict[str, int]] = {}
    published_from: dict[str, int] = {}
    for i, (m, origin) in enumerate(zip(tl.messages, tl.origin, strict=True)):
        kind = timeline_fates[m.index]
        if origin is None:
            c = synthesized.setdefault(m.topic, {"made": 0, "published": 0})
            c["made"] += 1
            c["published"] += i in sent
            c[kind.split(":")[0]] = c.get(kind.split(":")[0], 0) + 1
            continue
        fate[origin] = kind
        if i in sent:
            topic = tl.bag_messages[origin].topic
            published_from[topic] = published_from.get(topic, 0) + 1
    return fate, synthesized, published_from


__all__ = ["ANNOTATION", "ReplayAborted", "ReplayReport", "ambiguities", "fates", "replay_bag", "replay_timeline"]
