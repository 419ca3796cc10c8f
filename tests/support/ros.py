"""Helpers of the ROS 2 tests: the two ROS packages, bundles, a launch stand-in, an install prefix.

Processes and DDS settings come from :mod:`navbags.rosproc` (one implementation, shared with the bag
tools and the latency benchmark), re-exported here:

- :class:`DomainLease` picks a ROS_DOMAIN_ID no other test process on this machine holds (a file
  lock per id), so concurrent test runs never hear each other.
- :func:`ros_env` (``node_env``) is the environment of every spawned node: that domain, Fast DDS on
  a UDPv4 transport bound to 127.0.0.1 with the built-in transports (and shared memory) off, and
  ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST as well.
- :class:`NodeProc` runs a node with its output in a log file; ``stop()`` sends SIGTERM, then
  SIGKILL; :func:`node_processes` stops every one put in it.
- :class:`RosSide` is an rclpy node of the test process in its own context on the same domain, with
  ``spin_until`` that waits on conditions (discovery counts, messages), never on sleeps.

Here:

- :func:`entry_point_script` finds a node's console script and checks which ROS package declares it.
- :func:`record_launch` runs a launch file's ``generate_launch_description()`` against a recording
  stand-in of the ``launch`` / ``launch_ros`` API and returns the nodes it would start, with
  parameters and remappings resolved, and its process-exit handlers; :func:`node_command` turns
  one node into the command line that launch_ros would run (parameter dicts become a params file,
  as launch_ros does). What the stand-in models, and only that, follows the launch sources:
  an undeclared ``name:=value`` argument is ignored (``ros2 launch`` passes it on, nothing reads
  it); an ``OpaqueFunction`` runs with a context holding the arguments (``launch_configurations``)
  and its entities are launched in its place, and an exception in it is :class:`LaunchFailed`
  (launch's one line "Caught exception in launch ...", return code 1); a typed ``ParameterValue``
  of a substitution is coerced as ``launch.utilities.type_utils.coerce_to_type`` does (str as is,
  ``int(text)``, ``float(text)``, bool ``1`` / ``0`` (Iron and later) or a YAML boolean, nothing
  else), a plain string or substitution is YAML-parsed, a plain int, float or bool goes as it is;
  an ``OnProcessExit`` handler's ``on_exit(event, context)`` runs as LaunchService runs it
  (:meth:`RecordedLaunch.process_exited`): a returned ``Shutdown`` shuts the launch down with code
  0, an exception shuts it down with code 1, and from then on the context says ``is_shutdown``.
- :func:`install_share_prefix` lays the ROS packages' data files out as an install prefix.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import math
import os
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from navbags.rosproc import LOCK_DIR, DomainLease, NodeProc, RosSide, node_env, node_processes, ros_args  # noqa: F401
from navbags.rosproc import loopback_env as loopback_settings

REPO = Path(__file__).resolve().parents[2]
ROS_SRC = REPO / "ros2_ws" / "src"
PKG_SRC = ROS_SRC / "nav_policy"  # the robot package: policy node, launch files, policy.yaml
SIM_PKG_SRC = ROS_SRC / "nav_policy_sim"  # the simulation package: sim node, sim.yaml
PACKAGES = {"nav_policy": PKG_SRC, "nav_policy_sim": SIM_PKG_SRC}
FIXTURE_BUNDLE = REPO / "tests" / "fixtures" / "bundle"

# The test process's own participants follow the same rules (read when the first one is created).
os.environ.update(loopback_settings())


def require_ros() -> None:
    """Fail loudly, saying how to install, when the ROS 2 wheels are missing."""
    try:
        import rclpy  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise AssertionError(
            f"rclpy is not importable ({exc}). Install the ROS 2 wheels: pip install ros-rclpy "
            "ros-rmw-fastrtps-cpp ros-sensor-msgs ros-geometry-msgs ros-nav-msgs ros-std-msgs "
            "(or run scripts/setup.sh)"
        ) from exc


def entry_point_script(name: str, package: str = "nav_policy") -> Path:
    """The console script ``name`` of the ROS package ``package`` (fails saying how to install)."""
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group="console_scripts")}
    ep = eps.get(name)
    src = PACKAGES.get(package, ROS_SRC / package).relative_to(REPO)
    assert ep is not None and ep.dist is not None and ep.dist.name == package, (
        f"console script '{name}' of {package} is not installed"
        + (f" (it comes from {ep.dist.name})" if ep is not None and ep.dist is not None else "")
        + f": pip install --no-deps -e {src} (scripts/setup.sh does it)"
    )
    path = Path(sys.prefix) / "bin" / name
    if not path.is_file():
        found = shutil.which(name)
        assert found, f"console script '{name}' not found in {sys.prefix}/bin nor on PATH"
        path = Path(found)
    return path


ros_env = node_env  # loopback DDS, the leased domain, unbuffered output (+ extra variables)


# ----------------------------------------------------------------------------------------------
# Bundles


def fixture_bundle() -> Path:
    """The lead's trained bundle fixture (tests/fixtures/bundle); fails loudly when absent."""
    ok = (FIXTURE_BUNDLE / "policy.onnx").is_file() and (FIXTURE_BUNDLE / "contract.json").is_file()
    assert ok, (
        f"trained bundle fixture missing: {FIXTURE_BUNDLE} needs policy.onnx + contract.json "
        "(train: python training/train.py; export: python deploy/export.py --checkpoint PATH --out tests/fixtures/bundle)"
    )
    return FIXTURE_BUNDLE


def write_goal_seeking_bundle(
    out: Path, response: Any = None, path_following: Any = None, guard: Any = None, turn: float = 0.0
) -> Path:
    """A hand-made bundle whose 'policy' drives straight at the goal (body frame), no learning.

    A linear layer reads goal_polar's sin/cos and outputs vx = 2 cos, vy = 2 sin (the runtime clips
    to [-1, 1] and scales), so the robot side can be tested without a trained network. With
    ``response`` (a ``navcontract.response.RobotResponse``) the contract carries that
    ``robot_response`` section (format 2); without it, none (format 1). With ``path_following`` (a
    ``navcontract.subgoal.TrainedPathFollowing``) it carries that ``path_following`` section, with
    ``guard`` (a ``navcontract.guard.GuardRule``) that ``guard`` section and the contract's robot radius
    (the guard's). ``turn`` > 0 also turns toward the goal: wz = clip(turn sin(bearing)) omega_max.
    """
    from navcontract.bundle import make_contract, read_contract
    from navtrain.onnx_graph import MlpWeights, write_bundle

    fixture = read_contract(FIXTURE_BUNDLE)  # the observation, limits and period of conf/nav.yaml
    spec = fixture.spec
    sl = spec.slices()["goal_polar"]
    w = np.zeros((3, spec.obs_dim), dtype=np.float32)
    w[0, sl.start + 2] = 2.0  # cos -> forward
    w[1, sl.start + 1] = 2.0  # sin -> left
    w[2, sl.start + 1] = turn  # sin -> yaw rate
    weights = MlpWeights(
        mean=np.zeros(spec.obs_dim, dtype=np.float32),
        std=np.ones(spec.obs_dim, dtype=np.float32),
        eps=0.0,
        layers=[(w, np.zeros(3, dtype=np.float32))],
        activation="identity",
    )
    contract = make_contract(
        spec,
        fixture.scaling,
        fixture.control_period,
        fixture.goal_tolerance,
        0.0,
        extra={"source": {"kind": "hand-made goal-seeking test policy"}},
        response=response,
        path_following=path_following,
        robot_radius=None if guard is None else guard.radius,
        guard=guard,
    )
    write_bundle(out, weights, contract)
    return out


# ----------------------------------------------------------------------------------------------
# Launch stand-in


class _Sub:
    """Base of the recorded substitutions."""


@dataclass
class LaunchConfiguration(_Sub):
    variable_name: str
    default: Any = None


@dataclass
class EnvironmentVariable(_Sub):
    name: str
    default_value: Any = ""


@dataclass
class ParameterValue:
    value: Any
    value_type: Any = None


@dataclass
class DeclareLaunchArgument:
    name: str
    default_value: Any = None
    description: str = ""
    choices: Any = None


@dataclass
class Node:
    package: str | None = None
    executable: str | None = None
    name: str | None = None
    namespace: str | None = None
    parameters: list[Any] = field(default_factory=list)
    remappings: list[tuple[Any, Any]] = field(default_factory=list)
    arguments: list[Any] = field(default_factory=list)
    output: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class OnProcessExit:
    target_action: Any = None
    on_exit: Any = None


@dataclass
class RegisterEventHandler:
    event_handler: Any


@dataclass
class Shutdown:
    reason: str = ""


@dataclass
class LogInfo:
    msg: Any = ""


@dataclass
class OpaqueFunction:
    """``launch.actions.OpaqueFunction``: ``function(context, *args, **kwargs)`` runs when launch reaches
    it, after the arguments before it; the entities it returns are launched in its place."""

    function: Any
    args: Any = None
    kwargs: Any = None


@dataclass
class LaunchContext:
    """The attributes of ``launch.LaunchContext`` the launch files read."""

    launch_configurations: dict[str, str]
    is_shutdown: bool = False


class LaunchFailed(Exception):
    """What ``ros2 launch`` does when an action raises while the launch runs (an OpaqueFunction that
    refuses its arguments): LaunchService logs one line and returns 1. ``line`` is that line."""

    def __init__(self, exc: BaseException) -> None:
        self.line = f"[ERROR] [launch]: Caught exception in launch (see debug for traceback): {exc}"
        self.return_code = 1
        self.cause = exc
        super().__init__(self.line)


@dataclass
class ProcessExited:
    """The event launch emits when a process ends (the attributes a handler reads)."""

    action: Any
    name: str
    returncode: int


@dataclass
class LaunchReaction:
    """What LaunchService does after an exit handler ran: shut down or not, with which return code."""

    shutdown: bool
    return_code: int
    reason: str


class LaunchDescription:
    def __init__(self, entities: list[Any] | None = None) -> None:
        self.entities = list(entities or [])

    def add_action(self, action: Any) -> None:
        self.entities.append(action)


def _node_ctor(*args: Any, **kwargs: Any) -> Node:
    known = {f for f in Node.__dataclass_fields__ if f != "extra"}
    extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in known}
    return Node(*args, **kwargs, extra=extra)


def _fake_modules() -> dict[str, types.ModuleType]:
    mods = {}
    for name in (
        "launch",
        "launch.actions",
        "launch.substitutions",
        "launch_ros",
        "launch_ros.actions",
        "launch_ros.parameter_descriptions",
        "launch.event_handlers",
    ):
        mods[name] = types.ModuleType(name)
    mods["launch"].LaunchDescription = LaunchDescription
    mods["launch.actions"].DeclareLaunchArgument = DeclareLaunchArgument
    mods["launch.actions"].RegisterEventHandler = RegisterEventHandler
    mods["launch.actions"].Shutdown = Shutdown
    mods["launch.actions"].LogInfo = LogInfo
    mods["launch.actions"].OpaqueFunction = OpaqueFunction
    mods["launch"].LaunchContext = LaunchContext
    mods["launch.event_handlers"].OnProcessExit = OnProcessExit
    mods["launch"].event_handlers = mods["launch.event_handlers"]
    mods["launch.substitutions"].LaunchConfiguration = LaunchConfiguration
    mods["launch.substitutions"].EnvironmentVariable = EnvironmentVariable
    mods["launch_ros.actions"].Node = _node_ctor
    mods["launch_ros.parameter_descriptions"].ParameterValue = ParameterValue
    mods["launch"].actions = mods["launch.actions"]
    mods["launch"].substitutions = mods["launch.substitutions"]
    mods["launch_ros"].actions = mods["launch_ros.actions"]
    mods["launch_ros"].parameter_descriptions = mods["launch_ros.parameter_descriptions"]
    return mods


@dataclass
class RecordedNode:
    package: str
    executable: str
    name: str
    param_files: list[Path]
    params: dict[str, Any]  # the dict entries, resolved and typed
    remappings: list[tuple[str, str]]
    action: Any = None  # the launch file's Node object (what event handlers compare with)


@dataclass
class RecordedLaunch:
    arguments: dict[str, DeclareLaunchArgument]
    nodes: list[RecordedNode]
    ignored: list[str] = field(default_factory=list)  # undeclared arguments given (launch ignores them)
    exit_handlers: list[OnProcessExit] = field(default_factory=list)

    context: LaunchContext | None = None

    def process_exited(self, node_name: str, returncode: int) -> LaunchReaction:
        """Run the exit handlers that target ``node_name`` as LaunchService does for its ProcessExited
        event. No handler: launch carries on (until every process has ended). Once a reaction shut the
        launch down, the context says so (``is_shutdown``) to the handlers of later exits."""
        node = next(n for n in self.nodes if n.name == node_name)
        event = ProcessExited(node.action, f"{node.executable}-1", returncode)
        context = self.context or LaunchContext({})
        for handler in self.exit_handlers:
            if handler.target_action is not None and handler.target_action is not node.action:
                continue
            try:
                entities = handler.on_exit(event, context) if callable(handler.on_exit) else handler.on_exit
            except Exception as exc:  # LaunchService: "Caught exception in launch", return code 1
                context.is_shutdown = True
                return LaunchReaction(True, 1, str(exc))
            for ent in entities or []:
                if isinstance(ent, Shutdown):
                    context.is_shutdown = True
                    return LaunchReaction(True, 0, ent.reason)
        return LaunchReaction(False, 0, "")


def _resolve(value: Any, args: dict[str, str]) -> Any:
    if isinstance(value, LaunchConfiguration):
        if value.variable_name not in args:
            raise KeyError(f"launch configuration '{value.variable_name}' is neither declared nor given")
        return args[value.variable_name]
    if isinstance(value, EnvironmentVariable):
        return os.environ.get(value.name, _resolve(value.default_value, args))
    if isinstance(value, list | tuple):
        return "".join(str(_resolve(v, args)) for v in value)
    return value


def _coerce(text: str, data_type: Any) -> Any:
    """``launch.utilities.type_utils.coerce_to_type`` for the scalar types (same rules, same errors):
    str as is, ``int(text)``, ``float(text)``; a bool is ``'1'`` / ``'0'`` (Iron and later), else a
    YAML boolean (``true``, ``False``, ``yes``, ``off``, ...) and nothing else."""
    if data_type is None:
        return yaml.safe_load(text) if text else text
    if data_type is str:
        return text
    if data_type in (int, float):
        return data_type(text)  # ValueError as in launch
    if text == "1":
        text = "true"
    elif text == "0":
        text = "false"
    output = yaml.safe_load(text) if text else text
    if isinstance(output, bool):
        return output
    raise ValueError(f"Cannot convert value '{text}' to '{data_type}'")


def _typed(value: Any, args: dict[str, str]) -> Any:
    """What launch_ros does with a parameter value: substitutions and plain strings are YAML-parsed
    unless typed (``ParameterValue``); a typed plain value must already have its type; other values
    (int, float, bool) go as they are."""
    if isinstance(value, ParameterValue):
        if not isinstance(value.value, _Sub | list | tuple):
            if value.value_type is not None and not isinstance(value.value, value.value_type):
                raise TypeError(f"value='{value.value}' is not an instance of {value.value_type}")
            return value.value
        text = _resolve(value.value, args)
        return _coerce(str(text), value.value_type) if isinstance(text, str) else text
    if isinstance(value, _Sub | list | tuple | str):
        text = _resolve(value, args)
        return yaml.safe_load(text) if isinstance(text, str) else text
    return value


@contextlib.contextmanager
def _launch_api(mods: dict[str, types.ModuleType], ament_prefix: Path | None) -> Iterator[None]:
    """The launch API stand-in in ``sys.modules`` and ``ament_prefix`` on AMENT_PREFIX_PATH, for a while."""
    saved_mods = {k: sys.modules.get(k) for k in mods}
    saved_env = os.environ.get("AMENT_PREFIX_PATH")
    try:
        sys.modules.update(mods)
        if ament_prefix is not None:
            os.environ["AMENT_PREFIX_PATH"] = str(ament_prefix)
        yield
    finally:
        for k, v in saved_mods.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        if saved_env is None:
            os.environ.pop("AMENT_PREFIX_PATH", None)
        else:
            os.environ["AMENT_PREFIX_PATH"] = saved_env


def record_launch(
    path: Path, overrides: dict[str, str] | None = None, ament_prefix: Path | None = None
) -> RecordedLaunch:
    """Run ``generate_launch_description()`` of ``path`` against the recording stand-in.

    ``overrides`` play the ``name:=value`` launch arguments; undeclared ones are ignored, as by
    ``ros2 launch`` (listed in ``ignored``). ``ament_prefix`` is put on AMENT_PREFIX_PATH while the
    file runs.
    """
    mods = _fake_modules()
    with _launch_api(mods, ament_prefix):
        ns: dict[str, Any] = {"__file__": str(path), "__name__": "launch_file"}
        exec(compile(Path(path).read_text(), str(path), "exec"), ns)
        ld = ns["generate_launch_description"]()
    assert isinstance(ld, LaunchDescription), f"{path}: generate_launch_description() returned {type(ld)}"
    declared = {a.name: a for a in ld.entities if isinstance(a, DeclareLaunchArgument)}
    overrides = dict(overrides or {})
    ignored = sorted(set(overrides) - set(declared))
    args: dict[str, str] = {}
    for name, decl in declared.items():
        args[name] = overrides[name] if name in overrides else str(_resolve(decl.default_value, args))
    context = LaunchContext({**overrides, **args})
    entities = _launched(ld.entities, context, mods, ament_prefix)
    nodes = [_recorded_node(ent, args) for ent in entities if isinstance(ent, Node)]
    handlers = [
        e.event_handler
        for e in entities
        if isinstance(e, RegisterEventHandler) and isinstance(e.event_handler, OnProcessExit)
    ]
    return RecordedLaunch(declared, nodes, ignored, handlers, context)


def _launched(entities: list[Any], context: LaunchContext, mods: dict, ament_prefix: Path | None) -> list[Any]:
    """The entities as launch runs them: each OpaqueFunction's function called with the context (the
    launch API stand-in and ``ament_prefix`` in place) and its entities put in its place; an exception
    in one is :class:`LaunchFailed`, as LaunchService reports it."""
    out: list[Any] = []
    for ent in entities:
        if not isinstance(ent, OpaqueFunction):
            out.append(ent)
            continue
        with _launch_api(mods, ament_prefix):
            try:
                more = ent.function(context, *(ent.args or ()), **(ent.kwargs or {}))
            except Exception as exc:
                raise LaunchFailed(exc) from exc
        out += _launched(list(more or []), context, mods, ament_prefix)
    return out


def _recorded_node(ent: Node, args: dict[str, str]) -> RecordedNode:
    files, params = [], {}
    for entry in ent.parameters:
        if isinstance(entry, dict):
            params.update({k: _typed(v, args) for k, v in entry.items()})
        else:
            files.append(Path(str(_resolve(entry, args))))
    remaps = [(str(_resolve(a, args)), str(_resolve(b, args))) for a, b in ent.remappings]
    return RecordedNode(ent.package, ent.executable, ent.name, files, params, remaps, ent)


def node_command(node: RecordedNode, workdir: Path) -> list[str]:
    """The command line launch_ros would run for ``node`` (dict parameters via a params file): the
    executable is the console script of ``node.package`` (checked), as ``lib/<package>/`` holds it."""
    cmd = [str(entry_point_script(node.executable, node.package)), "--ros-args"]
    if node.name:
        cmd += ["-r", f"__node:={node.name}"]
    for f in node.param_files:
        cmd += ["--params-file", str(f)]
    if node.params:
        pfile = workdir / f"{node.name or node.executable}_launch_params.yaml"
        pfile.write_text(yaml.safe_dump({"/**": {"ros__parameters": node.params}}))
        cmd += ["--params-file", str(pfile)]
    for a, b in node.remappings:
        cmd += ["-r", f"{a}:={b}"]
    return cmd


def install_share_prefix(workdir: Path, packages: tuple[str, ...] = tuple(PACKAGES)) -> Path:
    """Build each ROS package's wheel (no network) and lay its data files out as one install prefix.

    Returns the prefix: <prefix>/share/ament_index/... and <prefix>/share/<package>/... exactly as
    a regular (non-editable) pip install or colcon places them. Each package's console-script entry
    points are written to ``<workdir>/entry_points/<package>.txt``.
    """
    import zipfile

    prefix = workdir / "prefix"
    (workdir / "entry_points").mkdir(parents=True, exist_ok=True)
    for package in packages:
        wheel_dir = workdir / "wheel" / package
        # Build from a copy (symlinks resolved, as colcon's copy does): no build/ or egg-info left in
        # the source tree, and no stale build/lib from an earlier build ends up in the wheel.
        src = workdir / "src" / package
        shutil.copytree(PACKAGES[package], src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(src)]
        # Offline with the venv's setuptools first; an isolated build (fetches setuptools) otherwise.
        proc = subprocess.run([*base, "--no-build-isolation"], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            proc = subprocess.run(base, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"pip wheel of {package} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        (wheel,) = wheel_dir.glob(f"{package}-*.whl")
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                parts = Path(info.filename).parts
                if len(parts) > 2 and parts[0].endswith(".data") and parts[1] == "data":
                    target = prefix.joinpath(*parts[2:])
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(z.read(info))
                elif parts[-1] == "entry_points.txt":
                    (workdir / "entry_points" / f"{package}.txt").write_bytes(z.read(info))
    return prefix


@contextlib.contextmanager
def leased_node(cmd: list[str], log: Path) -> Iterator[NodeProc]:
    """Start ``cmd`` as a node on a leased domain, its output in ``log``; on exit the node stops and
    the domain is released."""
    lease = DomainLease()
    try:
        with node_processes() as procs:
            proc = NodeProc(cmd, lease.domain_id, log)
            procs.append(proc)
            yield proc
    finally:
        lease.release()


def run_node(cmd: list[str], log: Path, timeout: float = 60.0) -> tuple[int, str]:
    """Run ``cmd`` as a node on a leased domain until it exits by itself (``timeout`` seconds at
    most): its exit code and everything it printed."""
    with leased_node(cmd, log) as proc:
        code = proc.popen.wait(timeout)
        return code, proc.output()


def goal_ahead(goal_pub: Any, x: float = 3.0) -> None:
    """Publish a goal ``x`` metres ahead of the origin of ``odom``."""
    from geometry_msgs.msg import PoseStamped

    g = PoseStamped()
    g.header.frame_id, g.pose.position.x = "odom", float(x)
    goal_pub.publish(g)


def sim_tick(
    pubs: tuple[Any, Any, Any],
    t: float,
    ranges: Any,
    *,
    scan_frame: str = "base_link",
    base_frame: str = "base_link",
    range_max: float = 6.0,
) -> None:
    """One tick at simulated time ``t`` on ``pubs`` (/clock, /scan, /odom of :func:`input_publishers`): a
    360-degree scan of ``ranges`` from -pi in ``scan_frame``, the robot at rest at the origin of odom,
    then /clock = t."""
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan

    clock_pub, scan_pub, odom_pub = pubs
    n = len(ranges)
    s = LaserScan(angle_min=-math.pi, angle_increment=2 * math.pi / n, range_min=0.05, range_max=float(range_max))
    s.header.frame_id, s.ranges = scan_frame, [float(r) for r in ranges]
    s.header.stamp.sec, s.header.stamp.nanosec = int(t), int(round((t % 1.0) * 1e9))
    o = Odometry()
    o.header.frame_id, o.child_frame_id, o.header.stamp = "odom", base_frame, s.header.stamp
    o.pose.pose.orientation.w = 1.0
    c = Clock()
    c.clock = s.header.stamp
    scan_pub.publish(s)
    odom_pub.publish(o)
    clock_pub.publish(c)


def input_publishers(node: Any, goal_qos: Any = None, clock: bool = False) -> tuple[Any, Any, Any, Any]:
    """Publishers of the policy node's inputs on the test-side ``node``: (/clock, /scan, /odom,
    /goal_pose). /scan has the sensor-data QoS, /odom depth 10; /clock (depth 10) only with
    ``clock`` and /goal_pose only with a ``goal_qos``, else None."""
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan

    from nav_policy.ros_common import SENSOR_QOS

    clock_pub = node.create_publisher(Clock, "/clock", 10) if clock else None
    scan_pub = node.create_publisher(LaserScan, "/scan", SENSOR_QOS)
    odom_pub = node.create_publisher(Odometry, "/odom", 10)
    goal_pub = node.create_publisher(PoseStamped, "/goal_pose", goal_qos) if goal_qos is not None else None
    return clock_pub, scan_pub, odom_pub, goal_pub


def status_subscription(node: Any, status: list[dict[str, Any]], depth: int) -> Any:
    """Subscribe the test-side ``node`` to /nav_policy/status: each message lands in ``status``, parsed."""
    from std_msgs.msg import String

    return node.create_subscription(String, "/nav_policy/status", lambda m: status.append(json.loads(m.data)), depth)


class PolicyNodeRig:
    """``policy_node`` (command line ``cmd``) in its own process on a leased domain, and a test-side
    node ``peer`` beside it that publishes the node's inputs (``scan_pub``, ``odom_pub``, ``goal_pub``
    with the goal QoS, ``clock_pub`` with ``clock``) and collects its status (``status``);
    ``close()`` stops both and releases the domain."""

    def __init__(self, tmp: Path, cmd: list[str], peer: str, *, clock: bool = False, status_depth: int = 50) -> None:
        from nav_policy.ros_common import GOAL_QOS

        self.lease = DomainLease()
        self.proc = NodeProc(cmd, self.lease.domain_id, tmp / "policy_node.log")
        self.tn = RosSide(self.lease.domain_id, peer)
        self.clock_pub, self.scan_pub, self.odom_pub, self.goal_pub = input_publishers(self.tn.node, GOAL_QOS, clock)
        self.status: list[dict[str, Any]] = []
        self.status_sub = status_subscription(self.tn.node, self.status, status_depth)

    def close(self) -> None:
        self.tn.close()
        self.proc.stop()
        self.lease.release()

    def stamp(self, msg: Any) -> None:
        """Stamp ``msg`` with the test side's ROS time (wall time)."""
        msg.header.stamp = self.tn.node.get_clock().now().to_msg()


@dataclass
class LiveNode:
    """A policy node running in its own process and a test-side ROS node on the same domain."""

    proc: NodeProc
    procs: list[NodeProc]
    peer: RosSide


@contextlib.contextmanager
def policy_node_with_peer(tmp_path: Path, params: dict[str, Any], peer_name: str) -> Iterator[LiveNode]:
    """Start ``policy_node`` with ``params`` on a leased domain and a test-side node ``peer_name``
    beside it; on exit the peer closes, the node stops and the domain is released."""
    cmd = [str(entry_point_script("policy_node")), *ros_args(params)]
    lease = DomainLease()
    try:
        with node_processes() as procs:
            proc = NodeProc(cmd, lease.domain_id, tmp_path / "policy.log")
            procs.append(proc)
            peer = RosSide(lease.domain_id, peer_name)
            try:
                yield LiveNode(proc, procs, peer)
            finally:
                peer.close()
    finally:
        lease.release()


def json_messages(msgs: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(m.data) for m in msgs]


def finite_within(cmd: tuple[float, float, float], v_max: float, w_max: float, tol: float = 1e-6) -> bool:
    vx, vy, wz = cmd
    return (
        all(math.isfinite(v) for v in cmd)
        and abs(vx) <= v_max + tol
        and abs(vy) <= v_max + tol
        and math.hypot(vx, vy) <= v_max + tol
        and abs(wz) <= w_max + tol
    )
