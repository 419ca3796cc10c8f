"""Small pieces shared by the nodes: QoS profiles, stamps, a signal-safe spin loop, parameter declaration.

(A header stamp in seconds, as the policy node reads it, is ``navdeploy.inputs.stamp_seconds``.)
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

from navdeploy.node_params import EXECUTORS, PARAMS, NodeParams, Param, check_number

# Lidar drivers publish best effort; a best-effort subscription also matches reliable publishers.
SENSOR_QOS = qos_profile_sensor_data
# Odometry: best effort on the subscriber side so that either kind of publisher matches.
ODOM_SUB_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
# Goals (RViz / Nav2 publish reliable, volatile) must not be dropped.
GOAL_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
# Paths (Nav2's planner publishes reliable, volatile): only the newest one matters.
PATH_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE)
# Goal publisher of the sim: transient local, so a policy node that starts late still gets it.
GOAL_LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
CMD_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
STATUS_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
EVENT_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=100,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


def ns_to_stamp(ns: int, msg_stamp) -> None:
    msg_stamp.sec = ns // 1_000_000_000
    msg_stamp.nanosec = ns % 1_000_000_000


def run_node(
    make_node: Callable[[], Node], loop: Callable[[Node, SingleThreadedExecutor, threading.Event], None] | None = None
) -> int:
    """Init rclpy without its signal handlers, build the node, spin until SIGINT/SIGTERM.

    Our own handlers only set a flag, so the node can still publish (a final zero command) before
    the context goes down. ``loop`` replaces the plain spin loop (the sim node drives its own).

    Every failure is one line, never a traceback: a node that cannot be built (a StartupError, or
    any other exception, e.g. rclpy refusing a parameter of the wrong type) prints ``[nav_policy]
    startup failed: ...`` and returns 2; an exception while it runs prints ``[nav_policy] <node>
    failed: ...`` and returns 1, after the node's ``close`` (the policy node's last zero command).
    """
    stop = threading.Event()
    rclpy.init(signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    node = None
    code = 0
    try:
        try:
            node = make_node()
        except StartupError as exc:
            print(f"[nav_policy] startup failed: {exc}", flush=True)
            return 2
        except Exception as exc:
            print(f"[nav_policy] startup failed: {one_line(exc)}", flush=True)
            return 2
        executor = make_executor(getattr(node, "executor_kind", "single_threaded"), node)
        executor.add_node(node)
        try:
            if loop is not None:
                loop(node, executor, stop)
            else:
                while not stop.is_set() and rclpy.ok():
                    executor.spin_once(timeout_sec=0.1)
        except Exception as exc:
            print(f"[nav_policy] {node.get_name()} failed: {one_line(exc)}", flush=True)
            code = 1
        close = getattr(node, "close", None)
        if close is not None:
            close()
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
        for s, h in previous.items():
            signal.signal(s, h)
    return code


def make_executor(kind: str, node: Node) -> Executor:
    """The executor ``kind`` names (one of :data:`navdeploy.node_params.EXECUTORS`, which the node has
    checked): rclpy's events executor, or the single-threaded one, which also serves when this rclpy
    has no events executor (said once in ``node``'s log)."""
    assert kind in EXECUTORS, kind
    if kind == "events":
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:
            node.get_logger().warn(
                "executor events: this rclpy has no rclpy.experimental.EventsExecutor; spinning single_threaded"
            )
        else:
            return EventsExecutor()
    return SingleThreadedExecutor()


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and its message's lines joined."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class StartupError(RuntimeError):
    """Configuration that makes a node unable to start (missing bundle, bad parameter)."""


def declare_number(
    node: Node,
    name: str,
    default: float,
    lo: float = -math.inf,
    hi: float = math.inf,
    *,
    lo_open: bool = False,
    integer: bool = False,
) -> float:
    """Declare a float parameter that also accepts an integer from YAML or the command line
    (``v_max: 1`` would otherwise abort the node with a type error); returns it as float.

    Every numeric parameter must be finite (``.nan`` / ``.inf`` would silently disable a watchdog or
    a limit) and in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``; a whole number with ``integer``):
    StartupError naming it otherwise, which the node reports in one line before exiting non-zero."""
    from rcl_interfaces.msg import ParameterDescriptor

    value = node.declare_parameter(name, default, ParameterDescriptor(dynamic_typing=True)).value
    try:
        return check_number(name, value, lo, hi, lo_open=lo_open, integer=integer)
    except ValueError as exc:
        raise StartupError(str(exc)) from None


def declare_bool(node: Node, name: str, default: bool) -> bool:
    """Declare a bool parameter; anything but a bool (``1``, ``"yes"``) is a StartupError naming it,
    reported in one line, instead of rclpy's type exception."""
    from rcl_interfaces.msg import ParameterDescriptor

    value = node.declare_parameter(name, default, ParameterDescriptor(dynamic_typing=True)).value
    if not isinstance(value, bool):
        raise StartupError(f"parameter '{name}' must be true or false, got {value!r}")
    return value


def param_descriptor(p: Param, *, with_range: bool = True):
    """The descriptor of a table parameter: its doc and unit, its range or choices as text, and (with
    ``with_range``) the range rclpy enforces. Numbers and bools are dynamically typed, so that an
    integer is accepted for a float and a wrong type reaches :class:`NodeParams`' one-line refusal."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    d = ParameterDescriptor(
        description=p.doc + (f" [{p.unit}]" if p.unit else ""),
        additional_constraints=p.range_text or (f"one of {', '.join(p.choices)}" if p.choices else ""),
        dynamic_typing=p.type is not str,
    )
    if with_range and p.type is float:
        d.floating_point_range = [FloatingPointRange(from_value=float(p.lo), to_value=float(p.hi))]
    elif with_range and p.type is int:
        d.integer_range = [IntegerRange(from_value=int(p.lo), to_value=int(p.hi), step=1)]
    return d


def declare_node_params(node: Node) -> NodeParams:
    """Declare every parameter of the policy node's table (``navdeploy.node_params.PARAMS``) and read
    them into a :class:`NodeParams`; StartupError naming the first unusable one (table order)."""
    from rclpy.exceptions import InvalidParameterValueException

    values = {}
    for p in PARAMS:
        try:
            values[p.name] = node.declare_parameter(p.name, p.default, param_descriptor(p)).value
        except InvalidParameterValueException:
            # Out of the descriptor's range: declared without it, so that NodeParams refuses the
            # value in the node's own one-line message.
            values[p.name] = node.declare_parameter(p.name, p.default, param_descriptor(p, with_range=False)).value
    try:
        return NodeParams(**values)
    except ValueError as exc:
        raise StartupError(str(exc)) from None
