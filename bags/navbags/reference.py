"""The offline reference: what the policy node must publish for a bag, computed without ROS.

The bag's input messages are taken in recorded order, decoded with ``rosbags`` (an independent
CDR decoder), and handed to the node's own safety controller, :class:`navdeploy.controller.PolicyController`,
through the same message adapters the node's callbacks use (``scan_message``, ``odom_message``,
``goal_message``), built from the node's parameters by the same ``resolve_settings``. The rules
(states, watchdogs, goal frames, clamps) therefore exist once, in the controller, and its unit tests
(tests/test_ros_controller.py) carry them; what replay checks is the ROS wiring around them: QoS,
callbacks, the timer on ``/clock``, serialisation, the process.

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
from typing import Any

import numpy as np

from navbags.bagio import CLOCK, GOAL, INPUT, ODOM, SCAN, BagMessage, decode
from navdeploy.controller import PolicyController, resolve_settings


@dataclass(frozen=True)
class NodeParams:
    """The policy node parameters replay and recording set (and the reference builds its controller from)."""

    stale_timeout: float = 0.5
    odom_frame: str = "odom"
    control_period: float = 0.0  # 0: the bundle's
    goal_tolerance: float = 0.0  # 0: the bundle's
    v_max: float = 0.0  # 0: the bundle's (never above it)
    omega_max: float = 0.0
    static_goal_frames: str = ""  # "frame x y yaw; ...": poses of other goal frames in odom_frame
    scan_map: bool = True  # a goal without a path: plan on the robot's own scans (navdeploy.scan_map)

    def ros_params(self) -> dict[str, object]:
        out: dict[str, object] = {
            "stale_timeout": self.stale_timeout,
            "odom_frame": self.odom_frame,
            "control_period": self.control_period,
            "goal_tolerance": self.goal_tolerance,
            "scan_map": self.scan_map,
        }
        if self.v_max:
            out["v_max"] = self.v_max
        if self.omega_max:
            out["omega_max"] = self.omega_max
        if self.static_goal_frames:  # an empty value cannot be passed as -p name:=
            out["static_goal_frames"] = self.static_goal_frames
        return out

    def controller_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`navdeploy.controller.resolve_settings`, as the node passes them."""
        return {
            "control_period": self.control_period,
            "goal_tolerance": self.goal_tolerance,
            "v_max": self.v_max,
            "omega_max": self.omega_max,
            "stale_timeout": self.stale_timeout,
            "odom_frame": self.odom_frame,
            "static_goal_frames": self.static_goal_frames,
            "scan_map": self.scan_map,
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


def clock_ns(msg: BagMessage) -> int:
    c = decode(msg).clock
    return int(c.sec) * 1_000_000_000 + int(c.nanosec)


def load_runtime(bundle: str | Path):
    from navdeploy.runtime import PolicyRuntime

    return PolicyRuntime.load(bundle)


class ReferenceNode:
    """The node without ROS: its controller, fed the way its callbacks feed it, at the node's ROS time."""

    def __init__(self, runtime, params: NodeParams = NodeParams()) -> None:
        settings, _ = resolve_settings(runtime.contract, **params.controller_kwargs())
        self.params, self.settings = params, settings
        self.period = settings.control_period
        self.ctrl = PolicyController.from_settings(runtime, settings)
        self.now = 0.0  # the node's ROS time: the last /clock
        # bag index of the last message of each input the controller was given (what a tick sees)
        self.scan_index: int | None = None
        self.odom_index: int | None = None
        self.goal_index: int | None = None

    def on_scan(self, msg, index: int) -> None:
        self.scan_index = index
        self.ctrl.scan_message(msg, self.now)

    def on_odom(self, msg, index: int) -> None:
        self.odom_index = index
        self.ctrl.odom_message(msg, self.now)

    def on_goal(self, msg, index: int) -> None:
        self.goal_index = index
        self.ctrl.goal_message(msg)

    def tick(self) -> tuple[str, np.ndarray]:
        res = self.ctrl.tick(self.now)
        return res.state.value, np.asarray(res.cmd, dtype=np.float64)


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
            ticks.append(Tick(len(ticks), m.index, t_ns, state, cmd, *seen))
    return Reference(ticks, period_ns, usage)
