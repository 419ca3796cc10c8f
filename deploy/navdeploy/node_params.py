"""The policy node's parameters: one table, and everything that states them built from it.

Each :class:`Param` of :data:`PARAMS` names one node parameter: its type, default, range (numbers),
unit and a one-line doc. From the table:

- the node (``nav_policy.policy_node``) declares every parameter in a loop, with a descriptor that
  carries its doc and range, and reads them into a :class:`NodeParams`;
- :class:`NodeParams` is the typed object of all parameters, its defaults the table's; it checks
  each value's type and range on construction (``ValueError`` naming the parameter, one line).
  The node turns that into its one-line startup refusal; the bag tools build the same object
  (``navbags.reference``), so node and replay resolve the same settings (``navdeploy.settings``);
- :func:`render_yaml` is ``ros2_ws/src/nav_policy/config/policy.yaml``, and :func:`render_markdown`
  the parameter table of ``docs/ros2.md`` (between :data:`DOCS_BEGIN` and :data:`DOCS_END`); tests
  assert both committed files are these renderings. ``python -m navdeploy.node_params --yaml FILE
  --docs FILE`` rewrites them.

A numeric parameter the contract also states (period, tolerance, limits, acceleration limits, path
rule) defaults to 0, which means "the bundle's contract value".

Choices (``controller``, ``below_min``, ``fill``) are listed here for the docs and the descriptor;
the value is checked where it gets its meaning: the driver's name by the node, the scan rules by
``navcontract.scan.ScanOptions``, the declared robot base (``robot_base``) by
``navdeploy.settings.resolve_base``.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any

import numpy as np

from navcontract.base import preset_names
from navcontract.scan import (
    BELOW_MIN_RULES,
    DEFAULT_MAX_FILL_GAP,
    DEFAULT_MIN_COVERAGE,
    DEFAULT_MIN_VALID_SHARE,
    FILL_POLICIES,
)

DRIVERS = ("policy", "dwa")

EXECUTORS = ("events", "single_threaded")
"""rclpy executors the policy node can spin on (parameter ``executor``)."""
"""What drives behind the command gate (parameter ``controller``): the bundle's policy or the DWA baseline."""


def check_number(
    name: str, value: Any, lo: float, hi: float = math.inf, *, lo_open: bool = False, integer: bool = False
) -> float:
    """``value`` as a finite float in [lo, hi] (``(lo, hi]`` with ``lo_open``; a whole number with
    ``integer``); ValueError naming the parameter otherwise (NaN and infinities included)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ValueError(f"parameter '{name}' must be a number, got {value!r}")
    v = float(value)
    below = v <= lo if lo_open else v < lo
    if not math.isfinite(v) or below or v > hi or (integer and v != int(v)):
        kind = "a whole number" if integer else "finite"
        raise ValueError(f"parameter '{name}' must be {kind} and in {format_range(lo, hi, lo_open)}, got {value}")
    return v


def format_range(lo: float, hi: float, lo_open: bool = False) -> str:
    return f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"


@dataclass(frozen=True)
class Param:
    """One node parameter. ``lo``/``hi`` bound a number (``lo_open``: ``lo`` itself excluded);
    ``heading`` opens a group of parameters (a comment line in the YAML); ``details`` adds to
    ``doc`` in the docs' table only."""

    name: str
    type: type  # str | float | int | bool
    default: Any
    doc: str
    unit: str = ""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    choices: tuple[str, ...] = ()
    heading: str = ""
    details: str = ""

    @property
    def numeric(self) -> bool:
        return self.type in (int, float)

    @property
    def range_text(self) -> str:
        """``[0, 100]``, ``(0, 60]``; empty for a parameter that is not a number."""
        if self.lo is None or self.hi is None:
            return ""
        return format_range(self.lo, self.hi, self.lo_open)

    def check(self, value: Any) -> Any:
        """``value`` as this parameter's type (an integer is taken for a float, a whole float for an
        integer); ValueError naming the parameter when it has another type or lies outside the range."""
        if self.type is bool:
            if not isinstance(value, bool | np.bool_):
                raise ValueError(f"parameter '{self.name}' must be true or false, got {value!r}")
            return bool(value)
        if self.type is str:
            if not isinstance(value, str):
                raise ValueError(f"parameter '{self.name}' must be a string, got {value!r}")
            return value
        assert self.lo is not None and self.hi is not None, self.name
        v = check_number(self.name, value, self.lo, self.hi, lo_open=self.lo_open, integer=self.type is int)
        return int(v) if self.type is int else v


_SMOOTHER = (
    "Velocity smoother (navdeploy.smoother): per-axis acceleration limit on driving commands; never delays a stop."
)
_GUARD = "Collision guard (navcontract.guard): slows (vx, vy) toward returns of the policy's own scan, as in training."
_SCAN_MAP = (
    "Scan map (navdeploy.scan_map): a goal without a path is driven along a path planned on a map of the robot's "
    "own scans."
)
_PROGRESS = (
    "Blocked, stuck and recovery (navdeploy.progress): a path the guard keeps refusing is re-planned; a robot "
    "without progress backs off and re-plans, a few times at most."
)
_SCAN_RULES = "Scan rules (docs/deploy_contract.md): what the policy sees of any lidar, and when it must not drive."
_PATH = "Path following (navcontract.subgoal): the policy's goal is a sub-goal sliding along the path."

_TOPICS = (  # parameter, default topic, what the node reads or writes there
    ("scan_topic", "/scan", "sensor_msgs/LaserScan, subscribed best effort (sensor-data QoS)"),
    ("odom_topic", "/odom", "nav_msgs/Odometry"),
    ("goal_topic", "/goal_pose", "geometry_msgs/PoseStamped (RViz / Nav2 convention)"),
    ("plan_topic", "/plan", "nav_msgs/Path (Nav2's planner): follow it; an empty path or a new goal pose ends it"),
    (
        "cmd_vel_topic",
        "/cmd_vel",
        "geometry_msgs/Twist (TwistStamped with enable_stamped_cmd_vel), body frame, SI units",
    ),
)

PARAMS: tuple[Param, ...] = (
    Param(
        "bundle_path",
        str,
        "",
        'folder with policy.onnx + contract.json; "": $NAV_POLICY_BUNDLE, else the bundle installed for '
        "robot_base (jackal), else the installed default bundle",
        details="A folder that is not there (or holds no bundle) stops the node at startup (exit code 2, with a "
        "message that says why).",
    ),
    Param(
        "controller",
        str,
        "policy",
        "the driver behind the command gate: policy (the bundle's ONNX policy) | dwa (the dynamic-window "
        "baseline, same contract and safety layer)",
        choices=DRIVERS,
        details="`dwa`: `navdeploy.dwa` (docs/baseline.md), built from the same bundle's contract, behind the same "
        "command gate, topics and status. Anything else is refused at startup. Launch argument `controller:=` "
        "of both launch files.",
    ),
    Param(
        "dwa_params_file",
        str,
        "",
        'DWA parameters YAML (unknown keys refused); "": the defaults shipped in navdeploy/dwa.yaml',
    ),
    Param(
        "robot_base",
        str,
        "",
        f"the base this robot is: a preset name ({', '.join(preset_names())}) or a base YAML file; "
        '"": the bundle\'s base, unchecked',
        details="Set, the node refuses to start (one line) when its drive or footprint radius differs from the base "
        "the bundle's policy was trained for (its contract's `base` section; docs/bases.md). The startup log's "
        "`limits:` line names the base the node runs. Launch argument `robot_base:=` of robot.launch.py.",
    ),
    *(Param(name, str, topic, doc) for name, topic, doc in _TOPICS),
    Param(
        "enable_stamped_cmd_vel",
        bool,
        False,
        "true: the command as geometry_msgs/TwistStamped (stamp: the node's ROS time, frame_id: base_frame), "
        "as Nav2 with its enable_stamped_cmd_vel; false: geometry_msgs/Twist",
        details="Launch argument `enable_stamped_cmd_vel:=` of both launch files (sim.launch.py sets it on the sim "
        "node too, which then reads TwistStamped).",
    ),
    Param(
        "status_topic",
        str,
        "/nav_policy/status",
        "std_msgs/String, JSON: state, reason, scan_fault, coverage_deg, filled_sectors, ...",
    ),
    Param(
        "policy_scan_topic",
        str,
        "/nav_policy/policy_scan",
        "sensor_msgs/LaserScan: the 72 beams the policy sees (intensity 1 = filled)",
    ),
    Param(
        "cmd_arrow_topic",
        str,
        "/nav_policy/cmd_arrow",
        "geometry_msgs/PoseStamped in base_frame along the command (RViz)",
    ),
    Param(
        "executor",
        str,
        "events",
        "the rclpy executor the node spins on: events (rclpy's events executor) | single_threaded",
        choices=EXECUTORS,
        details="`events` hands each arrived message, clock tick and timer to its callback from a C++ event queue; "
        "`single_threaded` rebuilds a wait set in Python for every one of them (the time from a scan's arrival "
        "to its command, both ways: docs/ros2.md, Latency benchmark). An rclpy without the events executor "
        "(`rclpy.experimental.EventsExecutor`) runs `single_threaded` and says so in the log. Anything else is "
        "refused at startup.",
    ),
    Param(
        "realtime_priority",
        int,
        0,
        "SCHED_FIFO priority of the node's threads, 1-99, so that a tick preempts ordinary processes on a loaded "
        "computer; 0: the OS's ordinary scheduler",
        "",
        0,
        99,
        details="Set at startup on every thread of the node's process (`navdeploy.priority`); the scan map's worker "
        "process starts under the ordinary scheduler and gives way to the tick. Needs CAP_SYS_NICE or a real-time "
        "limit (`ulimit -r`, e.g. `@robot - rtprio 99` in /etc/security/limits.conf) of at least the priority; "
        "without it the node runs on at ordinary priority and its startup line says so. The startup line states "
        "the scheduling either way.",
    ),
    Param("control_period", float, 0.0, "the timer period; 0: the bundle's control period", "s", 0.0, 10.0),
    Param("goal_tolerance", float, 0.0, "goal reached radius; 0: the bundle's success radius", "m", 0.0, 100.0),
    Param(
        "v_max",
        float,
        0.0,
        "planar speed limit; 0: the bundle's; a value above it is capped to it",
        "m/s",
        0.0,
        100.0,
        details="The startup log says which side set each limit (`limits: v_max 1 m/s (node parameter, below the "
        "bundle's 1.5); omega_max 2 rad/s (bundle contract, ...)`).",
    ),
    Param(
        "omega_max",
        float,
        0.0,
        "yaw rate limit; 0: the bundle's; a value above it is capped to it",
        "rad/s",
        0.0,
        100.0,
    ),
    Param(
        "stale_timeout",
        float,
        0.5,
        "scan or odometry older than this (or stamped that far in the future) -> zero command",
        "s",
        0.0,
        60.0,
        lo_open=True,
        details="A stamp in the future is a clock that jumped back.",
    ),
    Param(
        "clock_timeout",
        float,
        1.0,
        "use_sim_time: /clock not advancing this long (wall time) -> zero command, clock_stalled",
        "s",
        0.0,
        60.0,
        lo_open=True,
        details="Keep it above the sim's wall time per tick: at `real_time_factor` 0.1 a tick takes 1 s.",
    ),
    Param(
        "velocity_smoother",
        bool,
        True,
        "false: commands go out as the policy gives them (clamped to v_max / omega_max)",
        heading=_SMOOTHER,
    ),
    Param(
        "max_accel_linear",
        float,
        0.0,
        "per linear axis; 0: the bundle's robot_response.accel_limit (none in a bundle without it)",
        "m/s^2",
        0.0,
        1e4,
        details="A value > 0 replaces the contract's, with a warning when it is outside the trained range.",
    ),
    Param(
        "max_accel_angular",
        float,
        0.0,
        "yaw rate; 0: the bundle's",
        "rad/s^2",
        0.0,
        1e4,
        details="A value > 0 replaces the contract's, likewise.",
    ),
    Param(
        "guard",
        bool,
        True,
        "false: no guard (warned about when the policy was trained with one)",
        heading=_GUARD,
        details="On: the collision guard the bundle's policy was trained with (its `guard` section; below); for a "
        "bundle without one, the default guard on its robot radius (navcontract.guard.default_guard).",
    ),
    Param(
        "scan_map",
        bool,
        True,
        "false: a goal without a path is driven to directly (a path on plan_topic always wins)",
        heading=_SCAN_MAP,
        details="On: each new scan is folded into an occupancy map in `odom_frame` and the goal is driven to "
        "along a path planned on it (`navdeploy.scan_map`: 5 cm cells, 30 m window that moves with the robot; "
        "with the guard on, the path keeps the guard's passing clearance (its radius + margin + the lidar sector's "
        "spread there) plus half a cell, plus 1.5 cm where there is room, from mapped returns, so a path the map "
        "certifies is one the guard lets the robot drive; without a guard the robot's radius plus 1.5 cm, and the "
        "radius less 1 cm only where nothing wider leads to the goal; the startup log states the numbers; replanned every second and at once when a newly seen return comes 2 cm "
        "inside the path's clearance ahead; the sub-goal taken along it by the path-following rule, pulled back "
        "along the path where the straight line to it would cut a corner into a mapped return, and never "
        "closer to the robot than the goal tolerance + 0.2 m; docs/worlds.md). "
        "The status's `subgoal` and `path_remaining` show it. A path that keeps only the least clearance gives "
        "way to one with the full clearance when that is no longer (without a guard, whatever its length). "
        "Where no path leaves the robot's position (it drove into a pocket narrower than the clearance a path "
        "keeps) the path backs out along the robot's own trail (its last 3 m) to the nearest point with a "
        "path, and the status reason starts with `backing out`. For as long as the goal stands, the point it "
        "backed out from and every mapped return that blocked the path in use are kept as returns, even where "
        "later scans clear their cells (the map does not send the robot back to a pocket or a gap it found "
        "closed); where these memories and the returns raised for the guard leave no path at all, they are "
        "dropped and the map plans again on what it shows. When neither the robot nor its trail has a "
        "path on the map (the goal inside a mapped obstacle, the robot boxed in) the goal itself is the "
        "policy's goal. Off for a bundle that does not state `robot.radius`.",
    ),
    Param(
        "scan_map_worker",
        bool,
        True,
        "true: the map is updated and planned on in a worker process the control tick never waits for (the "
        "tick follows the newest plan); false: inline at each tick",
        details="On: each tick hands its new scan to the worker (`navdeploy.scan_worker`) and follows the newest "
        "path that came back; until the first plan of a goal comes back the goal itself is the policy's goal. "
        "Off: the tick updates the map and plans itself, so the sub-goal of every tick depends only on the "
        "messages (the evaluation's rule; the bag tools set it false to compare the node with their reference "
        "tick by tick), at the cost of the planning time in the tick.",
    ),
    Param(
        "blocked_time",
        float,
        1.0,
        "the guard holding the command toward the scan map's sub-goal under blocked_speed this long marks the "
        "path blocked (the return raised in the map) and re-plans at once; 0: off",
        "s",
        0.0,
        60.0,
        heading=_PROGRESS,
        details="The status reason of that tick starts with `replanning`. Only while the scan map has a path and "
        "the guard is on.",
    ),
    Param(
        "blocked_speed",
        float,
        0.05,
        "a guarded planar speed under this counts as held by the guard (the driver must ask at least this toward "
        "the sub-goal)",
        "m/s",
        0.0,
        10.0,
        lo_open=True,
    ),
    Param(
        "progress_time",
        float,
        5.0,
        "no progress_distance of progress toward the goal or along the path in use this long -> state stuck and a "
        "recovery; 0: off",
        "s",
        0.0,
        600.0,
        details="Only driving ticks count; a fault, no goal or the goal reached restart the clock. Stuck: a zero "
        "command for one tick, then state `recovering` (below), then a new plan.",
    ),
    Param(
        "progress_distance",
        float,
        0.2,
        "progress: this much closer to the goal than ever before, or this much further along the path",
        "m",
        0.0,
        100.0,
        lo_open=True,
    ),
    Param(
        "recovery_speed",
        float,
        0.1,
        "the back-off's planar speed, away from the returns within 1 m, the nearest weighing most (a diff drive "
        "backs, or drives forward when they lie behind; a back-off the guard would hold turns to where it lets "
        "the robot out); smoothed and guarded",
        "m/s",
        0.0,
        10.0,
        lo_open=True,
    ),
    Param("recovery_time", float, 1.0, "how long one back-off lasts (state recovering)", "s", 0.0, 60.0, lo_open=True),
    Param(
        "max_recoveries",
        int,
        3,
        "recoveries without getting progress_distance closer to the goal; then stuck with zero until a new goal "
        "or path",
        "",
        0,
        100,
    ),
    Param(
        "below_min",
        str,
        "obstacle",
        "obstacle | invalid: a reading under range_min (0.0 included) is an object at range_min, or dropped",
        choices=BELOW_MIN_RULES,
        heading=_SCAN_RULES,
    ),
    Param(
        "fill",
        str,
        "nearest",
        "nearest | max_range | constant: sectors without a valid reading",
        choices=FILL_POLICIES,
    ),
    Param("fill_value", float, 0.0, "the value of fill 'constant'", "m", 0.0, 1000.0),
    Param(
        "min_valid_share",
        float,
        DEFAULT_MIN_VALID_SHARE,
        "fewer valid (non-NaN) readings than this share -> zero command (blind_scan)",
        "",
        0.0,
        1.0,
    ),
    Param(
        "min_coverage",
        float,
        DEFAULT_MIN_COVERAGE,
        "the scan must cover this share of the trained field of view (low_coverage)",
        "",
        0.0,
        1.0,
    ),
    Param(
        "max_fill_gap",
        int,
        DEFAULT_MAX_FILL_GAP,
        "longest run of filled sectors (5 deg each) allowed in the front half (blind_scan)",
        "sectors",
        0,
        1000,
        details="At most the contract's number of beams.",
    ),
    Param(
        "lidar_x",
        float,
        0.0,
        "the lidar's origin in base_frame, forward of its centre",
        "m",
        -5.0,
        5.0,
        details="The policy was trained with the lidar at the centre of the body, facing forward, upright; "
        "lidar_x, lidar_y, lidar_yaw and lidar_upside_down state where the robot's lidar sits instead, and its "
        "readings are taken into base_frame before the scan rules (rule 0 of docs/deploy_contract.md): each "
        "return's distance and bearing from the centre, its beam's arc to the sectors it overlaps. The scan map "
        "casts each reading from the lidar's own origin. All four at 0 / false: the scan is base_frame's.",
    ),
    Param("lidar_y", float, 0.0, "the lidar's origin in base_frame, left of its centre", "m", -5.0, 5.0),
    Param(
        "lidar_yaw",
        float,
        0.0,
        "the direction of the lidar's angle 0 in base_frame, counter-clockwise from forward",
        "rad",
        -2.0 * math.pi,
        2.0 * math.pi,
    ),
    Param(
        "lidar_upside_down",
        bool,
        False,
        "true: the lidar is mounted upside down (its angles run clockwise in base_frame)",
    ),
    Param(
        "self_radius",
        float,
        0.0,
        "returns nearer than this to base_frame's centre are the robot's own parts and dropped; 0: none",
        "m",
        0.0,
        5.0,
        details="A lidar that sees a mast, the standoffs of a top plate or a cable reads them as obstacles "
        "touching the robot, and the guard holds it still; such returns are dropped like NaN readings (rule 3 "
        "of docs/deploy_contract.md, after the lidar's mount). At most the bundle's robot radius: a return "
        "inside the footprint cannot be an obstacle the robot has not already touched.",
    ),
    Param("odom_frame", str, "odom", "goals, paths and odometry must be in this frame (or a static goal frame)"),
    Param("base_frame", str, "base_link", "the robot's body frame (scan, command arrow, policy scan)"),
    Param(
        "static_goal_frames",
        str,
        "",
        '"frame x y yaw; ..." poses of other frames in odom_frame (goals and paths in them are transformed)',
        details="A goal or path in any other frame is rejected.",
    ),
    Param(
        "path_lookahead",
        float,
        0.0,
        "the sub-goal's arc length ahead of the robot's projection onto the path; 0: the bundle's "
        "path_following.lookahead (1.0 in a bundle without the section)",
        "m",
        0.0,
        100.0,
        heading=_PATH,
        details="The contract's value is the training config's `env.worlds.lookahead`. A value > 0 replaces the contract's (warned about when the policy was trained to follow paths "
        "with another one).",
    ),
    Param(
        "path_search_window",
        float,
        0.0,
        "how far ahead of its last progress the projection may move (never back); 0: the bundle's "
        "path_following.search_window (2.0 in a bundle without the section)",
        "m",
        0.0,
        100.0,
        details="A value > 0 replaces the contract's, likewise.",
    ),
)

PARAM: dict[str, Param] = {p.name: p for p in PARAMS}
"""The table by name."""


def _check_all(self) -> None:
    for p in PARAMS:
        object.__setattr__(self, p.name, p.check(getattr(self, p.name)))


def _changed(self) -> dict[str, Any]:
    """The parameters whose value is not the table's default, by name, in the table's order."""
    return {p.name: getattr(self, p.name) for p in PARAMS if getattr(self, p.name) != p.default}


NodeParams = make_dataclass(
    "NodeParams",
    [(p.name, p.type, field(default=p.default)) for p in PARAMS],
    frozen=True,
    namespace={
        "__module__": __name__,
        "__doc__": "Every policy node parameter, typed, with the table's defaults (navdeploy.node_params.PARAMS); "
        "construction checks each value's type and range (ValueError naming the parameter).",
        "__post_init__": _check_all,
        "changed": _changed,
    },
)


# ------------------------------------------------------------------------------- renderings

YAML_HEADER = (
    "# Parameters of the policy node (ROS 2 params file), rendered from the table in "
    "deploy/navdeploy/node_params.py:\n"
    "# edit the table, then `python -m navdeploy.node_params --yaml <this file>`. Ranges: docs/ros2.md or\n"
    '# `ros2 param describe /policy_node <name>`. Zero means "take the bundle\'s contract value".\n'
)
DOCS_BEGIN = "<!-- node-params:begin -->"
DOCS_END = "<!-- node-params:end -->"


def yaml_value(value: Any) -> str:
    """A default as YAML: ``true``, ``0.5``, ``2``, ``/scan``, ``""`` (quoted where a bare word would not read back)."""
    import yaml

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if text and yaml.safe_load(text) == text and ":" not in text and "#" not in text:
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_yaml() -> str:
    """``config/policy.yaml``: every parameter with its default and a comment: [unit] doc."""
    lines = [YAML_HEADER.rstrip("\n"), "/**:", "  ros__parameters:"]
    for p in PARAMS:
        if p.heading:
            lines.append(f"    # {p.heading}")
        unit = f"[{p.unit}] " if p.unit else ""
        lines.append(f"    {f'{p.name}: {yaml_value(p.default)}':<32}  # {unit}{p.doc}")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _md_default(p: Param) -> str:
    if p.type is bool:
        return "`true`" if p.default else "`false`"
    if p.type is str:
        return f"`{p.default}`" if p.default else '`""`'
    return f"`{p.default:g}`"


def render_markdown() -> str:
    """The docs' parameter table (without the markers): parameter, type, default, unit, range, meaning."""
    rows = [
        "| parameter | type | default | unit | range | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for p in PARAMS:
        meaning = p.doc + (f". {p.details}" if p.details else "")
        rng = p.range_text or (" \\| ".join(f"`{c}`" for c in p.choices) if p.choices else "")
        rows.append(f"| `{p.name}` | {p.type.__name__} | {_md_default(p)} | {p.unit} | {rng} | {_cell(meaning)} |")
    return "\n".join(rows) + "\n"


def docs_section(text: str) -> str:
    """What ``text`` holds between :data:`DOCS_BEGIN` and :data:`DOCS_END` (ValueError when they are missing)."""
    begin, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if begin < 0 or end < begin:
        raise ValueError(f"no {DOCS_BEGIN} ... {DOCS_END} section")
    return text[begin + len(DOCS_BEGIN) : end].strip("\n") + "\n"


def with_docs_section(text: str) -> str:
    """``text`` with its marked section replaced by :func:`render_markdown`."""
    docs_section(text)  # both markers are there
    head, rest = text.split(DOCS_BEGIN, 1)
    _, tail = rest.split(DOCS_END, 1)
    return f"{head}{DOCS_BEGIN}\n{render_markdown()}{DOCS_END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write the renderings of the policy node's parameter table.")
    ap.add_argument("--yaml", type=Path, help="the params file to write (ros2_ws/src/nav_policy/config/policy.yaml)")
    ap.add_argument("--docs", type=Path, help="a Markdown file whose node-params section to rewrite (docs/ros2.md)")
    a = ap.parse_args(argv)
    if a.yaml is None and a.docs is None:
        sys.stdout.write(render_yaml())
    if a.yaml is not None:
        a.yaml.write_text(render_yaml())
    if a.docs is not None:
        a.docs.write_text(with_docs_section(a.docs.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
