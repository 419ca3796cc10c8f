"""The offline reference: what the policy node must publish for a bag, computed without ROS.

The bag's input messages are taken in recorded order, decoded with ``rosbags`` (an independent
CDR decoder), and handed to the node's own command gate, :class:`navdeploy.gate.CommandGate`,
through the same message adapters the node's callbacks use (``scan_message``, ``odom_message``,
``goal_message``), built from the node's parameters (:class:`NodeParams`, the node's own parameter
table) by the same :func:`navdeploy.settings.resolve_settings`. The rules (states, watchdogs, goal
frames, clamps) therefore exist once, in the gate, and its unit tests (tests/runtime/test_controller.py)
carry them; what replay checks is the ROS wiring around them: QoS, callbacks, the timer on
``/clock``, serialisation, the process.

What stays here is the part of the node that is ROS, restated: the control timer. Every ``/clock``
message that reaches the node's next timer deadline is a control tick. Under ``use_sim_time`` the
node's timer is created at ROS time 0, so its deadlines lie on the grid ``n * period``; a clock
message at time ``t >= next`` fires it once and moves ``next`` to the first grid point after ``t``
(rcl skips missed periods). Between ticks the node's ROS time is the last clock message's, which is
also the time a message without a header stamp is taken at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from navbags.bagio import CLOCK, GOAL, INPUT, ODOM, SCAN, BagMessage, decode
from navdeploy import node_params
from navdeploy.gate import CommandGate
from navdeploy.settings import resolve_settings

ALWAYS_PASSED = ("stale_timeout", "odom_frame", "control_period", "goal_tolerance", "scan_map", "scan_map_worker")
"""The parameters a recording or replay always passes to the node (and records in the bag), at their
default too; any other only when it differs from its default."""


@dataclass(frozen=True)
class NodeParams(node_params.NodeParams):
    """The policy node's parameters (``navdeploy.node_params``: every name, default and range) as the
    bag tools set them on the node's command line, and the reference resolves them. Two defaults are
    the bag tools' own, so that the node's commands, like the reference's, depend only on the
    messages: ``scan_map_worker`` false (the node plans on its scan map inline), and ``clock_timeout``
    60 s (the most it takes): a replay or recording holds /clock while it waits for each command,
    and a zero of the node's wall-time clock watchdog would also restart the velocity smoother from
    rest, which the reference, knowing only the messages, cannot do."""

    scan_map_worker: bool = False
    clock_timeout: float = 60.0

    def ros_params(self) -> dict[str, object]:
        """``-p name:=value`` of the node: :data:`ALWAYS_PASSED`, then every other parameter that
        differs from its default, except an empty string (which cannot be passed as ``-p name:=``)."""
        out: dict[str, object] = {name: getattr(self, name) for name in ALWAYS_PASSED}
        for name, value in self.changed().items():
            if name not in out and value != "":
                out[name] = value
        return out


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
    stamps: tuple[float | None, float | None] = (None, None)  # of the scan and odometry read (the gate's)


@dataclass
class Reference:
    ticks: list[Tick]
    period_ns: int
    usage: dict[int, list[int]] = field(default_factory=dict)  # input bag index -> ticks that saw it


def clock_ns(msg: BagMessage) -> int:
    c = decode(msg).clock
    return int(c.sec) * 1_000_000_000 + int(c.nanosec)


def load_runtime(bundle: str | Path):
    from navdeploy.runtime import PolicyRuntime

    return PolicyRuntime.load(bundle)


class ReferenceNode:
    """The node without ROS: its command gate, fed the way its callbacks feed it, at the node's ROS time."""

    def __init__(self, runtime, params: NodeParams = NodeParams()) -> None:
        settings, _ = resolve_settings(runtime.contract, params, runtime)
        self.params, self.settings = params, settings
        self.period = settings.control_period
        self.gate = CommandGate.from_settings(runtime, settings)
        self.now = 0.0  # the node's ROS time: the last /clock
        # bag index of the last message of each input the gate was given (what a tick sees)
        self.scan_index: int | None = None
        self.odom_index: int | None = None
        self.goal_index: int | None = None

    def on_scan(self, msg, index: int) -> None:
        self.scan_index = index
        self.gate.scan_message(msg, self.now)

    def on_odom(self, msg, index: int) -> None:
        self.odom_index = index
        self.gate.odom_message(msg, self.now)

    def on_goal(self, msg, index: int) -> None:
        self.goal_index = index
        self.gate.goal_message(msg)

    def tick(self) -> tuple[str, np.ndarray]:
        res = self.gate.tick(self.now)
        return res.state.value, np.asarray(res.cmd, dtype=np.float64)

    def stamps(self) -> tuple[float | None, float | None]:
        return self.gate.input_stamps()


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
            seen = (node.scan_index, node.odom_index, node.goal_index)
            for i in (m.index, *seen):
                if i is not None:
                    usage[i].append(len(ticks))
            ticks.append(Tick(len(ticks), m.index, t_ns, state, cmd, *seen, stamps=node.stamps()))
    return Reference(ticks, period_ns, usage)
