"""The command gate's settings: the node's parameters resolved over the bundle's contract.

:func:`resolve_settings` takes the typed parameters (:class:`navdeploy.node_params.NodeParams`, whose
construction already checked every type and range) and the contract, and returns the
:class:`GateSettings` the gate (:mod:`navdeploy.gate`) is built from, with the warnings to log. The
node (``nav_policy.policy_node``) and the bag replay (``navbags.reference``, ``navbags.timeline``)
both call it, so both resolve the same parameters to the same settings. The rules:

- the robot base is the bundle's (``Contract.base``); the ``robot_base`` parameter (a preset name
  or a base file, :func:`navcontract.base.load_base`) declares the base the node runs on, and a
  declared base whose drive or footprint radius differs from the bundle's is refused
  (:func:`resolve_base`);
- a numeric parameter of 0 takes the contract's value; for each command limit (``v_max``,
  ``omega_max``) the smaller of the node's and the contract's wins; a diff-drive base's backward
  limit is the contract's, at most ``v_max``, and its commands have no lateral part;
- the velocity smoother's acceleration limits (:func:`resolve_accel_limits`): a value > 0 replaces
  the contract's ``robot_response.accel_limit`` (warned about when outside the trained range), 0
  takes it; a bundle without the section has none; ``velocity_smoother`` false turns it off;
- the path-following rule (:func:`resolve_path_rule`), the collision guard (:func:`resolve_guard`:
  the last stage, after the clamp and the smoother, so the smoother's limit never delays the
  guard's braking) and the scan map (:func:`resolve_scan_map`), each with one line saying where it
  came from;
- one clearance between planner and guard: with the guard on, the scan map plans with the guard's
  passing clearance on the contract's beams (:meth:`navcontract.guard.GuardRule.passing_clearance`,
  ``GateSettings.plan_clearance``; :mod:`navdeploy.scan_map` adds half a cell), and its log line
  states the rule with its numbers; without a guard it plans with the robot's radius as before;
- the blocked watch, the progress checker and the recovery (:func:`resolve_progress`,
  :mod:`navdeploy.progress`), with one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from navcontract.base import DIFF_DRIVE, HOLONOMIC, BaseError, BaseSpec, load_base
from navcontract.bundle import implied_reaction
from navcontract.guard import GUARD_SECTION, GuardRule, default_guard, states_unseen_clearance
from navcontract.scan import LidarMount, ScanOptions
from navcontract.subgoal import LookaheadRule
from navdeploy.inputs import Transform2D, parse_goal_frames
from navdeploy.node_params import PARAM, NodeParams, check_number
from navdeploy.progress import ProgressRule
from navdeploy.scan_map import ScanMapCfg, clearance_text
from navdeploy.smoother import AccelLimits

RADIUS_TOLERANCE = 1e-6
"""[m] A declared base's radius may differ from the bundle's by this much (the YAML's rounding)."""


@dataclass(frozen=True)
class Limits:
    """The command limits. ``holonomic``: ``vx, vy`` each in ``[-v_max, v_max]`` (and ``|v| <= v_max``
    with ``limit_planar_speed``); ``diff_drive``: ``vx`` in ``[-backward, v_max]``, ``vy`` 0."""

    v_max: float
    omega_max: float
    limit_planar_speed: bool = True
    drive: str = HOLONOMIC
    v_backward: float | None = None  # [m/s] diff drive: the backward limit (None: v_max)

    @property
    def holonomic(self) -> bool:
        return self.drive != DIFF_DRIVE

    @property
    def backward(self) -> float:
        return self.v_max if self.v_backward is None else min(self.v_backward, self.v_max)


@dataclass(frozen=True)
class GateSettings:
    """The command gate's configuration, resolved from the node's parameters and the bundle's contract."""

    control_period: float  # [s] the node's timer period
    goal_tolerance: float  # [m]
    limits: Limits
    stale_timeout: float  # [s]
    odom_frame: str
    goal_frames: dict[str, Transform2D]
    scan_options: ScanOptions
    clock_timeout: float  # [s wall]
    limit_sources: tuple[str, ...] = ()  # one line per limit: its value and which side set it
    accel_limits: AccelLimits = field(default_factory=AccelLimits)  # the velocity smoother's; none: off
    path_rule: LookaheadRule = field(default_factory=LookaheadRule)  # sub-goal of a path (navcontract.subgoal)
    map_path_rule: LookaheadRule = field(default_factory=LookaheadRule)  # sub-goal of the scan map's paths
    path_source: str = ""  # one line: the path rule's values and which side set each
    guard: GuardRule | None = None  # the collision guard on driving commands (navcontract.guard); None: off
    max_range: float = math.inf  # [m] the contract's lidar max_range: a beam at it is no return (the guard)
    guard_source: str = ""  # one line: the guard in use, or why there is none
    scan_map: ScanMapCfg | None = None  # goal without a path: plan on the robot's own scans; None: off
    robot_radius: float | None = None  # [m] the footprint radius of the contract's base (the scan map plans for it)
    scan_map_source: str = ""  # one line: the scan map in use, or why there is none
    scan_map_worker: bool = False  # the scan map's update and planning on a worker process (navdeploy.scan_worker)
    plan_clearance: float | None = None  # [m] the guard's passing clearance the scan map plans with; None: no guard
    progress: ProgressRule | None = None  # blocked, stuck and recovery (navdeploy.progress); None: off
    progress_source: str = ""  # one line: the blocked watch, the progress checker and the recovery
    base: BaseSpec | None = None  # the robot base the bundle was trained for (None: the contract states no radius)
    lidar_mount: LidarMount | None = None  # where the robot's lidar sits on the body (None: the centre, as trained)
    lidar_source: str = ""  # one line: the lidar's mount


def resolve_settings(
    contract: Any, params: NodeParams | None = None, driver: Any = None
) -> tuple[GateSettings, list[str]]:
    """``params`` (default: every parameter at the table's default) over ``contract`` (see the module
    docstring). ``driver``: what drives behind the gate; the sub-goal distance along the scan map's
    paths it asks for (its ``path_lookahead``: the DWA's, :attr:`navdeploy.dwa.DwaPlanner.path_lookahead`;
    none, or no driver: the bundle's, as the policy was trained) is taken where ``path_lookahead`` is 0; a path on the plan topic keeps the
    path rule (the DWA with a 2 m sub-goal along given corridor paths reached half the goals it
    reaches with the policy's 0.7 m: docs/baseline.md). Returns the settings and warnings to log; raises
    ValueError naming the parameter when one is unusable with this contract (the node refuses to
    start with that one line)."""
    params = NodeParams() if params is None else params
    warnings: list[str] = []
    sources: list[str] = []
    base, base_source = resolve_base(contract, params.robot_base, warnings=warnings)
    period, tol, limits = resolve_limits(contract, params, warnings=warnings, sources=sources)
    sources.append(base_source)
    scan_options = resolve_scan_options(contract, params, warnings=warnings)
    mount, mount_source = resolve_lidar_mount(params)
    try:
        frames = parse_goal_frames(params.static_goal_frames)
    except ValueError as exc:
        raise ValueError(f"parameter 'static_goal_frames': {exc}") from exc
    accel = resolve_accel_limits(
        contract,
        params.velocity_smoother,
        params.max_accel_linear,
        params.max_accel_angular,
        warnings=warnings,
        sources=sources,
    )
    rule, path_source = resolve_path_rule(contract, params.path_lookahead, params.path_search_window, warnings=warnings)
    map_rule = rule
    driver_lookahead = getattr(driver, "path_lookahead", None)
    if driver_lookahead is not None and params.path_lookahead == 0:
        map_rule = replace(rule, lookahead=float(driver_lookahead))
        path_source += (
            f"; the scan map's sub-goals {map_rule.lookahead:g} m ahead (the driver's own: the DWA's "
            "path_lookahead_s x v_max)"
        )
    guard_rule, guard_source = resolve_guard(contract, params.guard, warnings=warnings)
    map_cfg, radius, map_source = resolve_scan_map(contract, params.scan_map, params.scan_map_worker, guard_rule)
    clearance = plan_clearance(contract, guard_rule) if map_cfg is not None else None
    progress = resolve_progress(params)
    settings = GateSettings(
        control_period=period,
        goal_tolerance=tol,
        limits=limits,
        stale_timeout=params.stale_timeout,
        odom_frame=params.odom_frame,
        goal_frames=frames,
        scan_options=scan_options,
        clock_timeout=params.clock_timeout,
        limit_sources=tuple(sources),
        accel_limits=accel,
        path_rule=rule,
        map_path_rule=map_rule,
        path_source=path_source,
        guard=guard_rule,
        max_range=float(contract.max_range) if guard_rule is not None else math.inf,
        guard_source=guard_source,
        scan_map=map_cfg,
        robot_radius=radius,
        scan_map_source=map_source,
        scan_map_worker=params.scan_map_worker,
        base=base,
        plan_clearance=clearance,
        progress=progress,
        progress_source=progress.describe(),
        lidar_mount=mount,
        lidar_source=mount_source,
    )
    return settings, warnings


def resolve_limits(
    contract: Any, params: NodeParams, *, warnings: list[str], sources: list[str]
) -> tuple[float, float, Limits]:
    """The control period, goal tolerance and command limits: a parameter of 0 takes the contract's
    value; a limit above the contract's is capped to it (warned about). ``sources`` gets one line per
    limit saying which side set it. The resolved period must lie in (0, 10] s."""

    def pick(name: str, value: float, default: float, unit: str, cap: bool) -> float:
        if value == 0:
            if cap:
                sources.append(f"{name} {default:g} {unit} (bundle contract; node parameter 0 = the bundle's)")
            return default
        if cap and value > default:
            warnings.append(f"{name}={value:g} exceeds the bundle's {default:g}; using {default:g}")
            sources.append(f"{name} {default:g} {unit} (bundle contract, below node parameter {value:g})")
            return default
        if cap:
            sources.append(f"{name} {value:g} {unit} (node parameter, below the bundle's {default:g})")
        return value

    period = pick("control_period", params.control_period, float(contract.control_period), "s", cap=False)
    check_number("control_period", period, 0.0, 10.0, lo_open=True)
    tol = pick("goal_tolerance", params.goal_tolerance, float(contract.goal_tolerance), "m", cap=False)
    scaling = contract.scaling
    v_max = pick("v_max", params.v_max, float(contract.v_max), "m/s", cap=True)
    omega_max = pick("omega_max", params.omega_max, float(contract.omega_max), "rad/s", cap=True)
    if scaling.drive != DIFF_DRIVE:
        return period, tol, Limits(v_max, omega_max, bool(scaling.limit_planar_speed))
    limits = Limits(v_max, omega_max, False, DIFF_DRIVE, float(scaling.backward))
    sources.append(f"v_backward {limits.backward:g} m/s (bundle contract's {scaling.backward:g}, at most v_max)")
    return period, tol, limits


def _describe(base: BaseSpec) -> str:
    back = f", backward {base.v_backward:g} m/s" if not base.holonomic else ""
    return (
        f"{base.name} ({base.drive}, radius {base.radius:g} m, {base.v_forward:g} m/s{back}, {base.omega_max:g} rad/s)"
    )


def resolve_base(contract: Any, robot_base: str, *, warnings: list[str]) -> tuple[BaseSpec | None, str]:
    """The base the node runs: the bundle's (``Contract.base``: its ``base`` section, or the holonomic
    disc of a contract without one; None without a footprint radius), checked against the base the
    ``robot_base`` parameter declares (``""``: none declared; else a preset name or a base file).
    Returns the bundle's base and one line for the log. Raises ValueError naming the parameter when
    the declared base cannot be read, or its drive or radius (beyond :data:`RADIUS_TOLERANCE`)
    differs from the bundle's; warns when its speed limits are below the bundle's."""
    robot_base = PARAM["robot_base"].check(robot_base)
    bundle: BaseSpec | None = getattr(contract, "base", None)
    drive = contract.scaling.drive
    said = _describe(bundle) if bundle is not None else f"{drive}, radius not stated"
    if not robot_base:
        return bundle, f"base {said} (bundle contract; node parameter robot_base not set)"
    try:
        declared = load_base(robot_base)
    except BaseError as exc:
        raise ValueError(f"parameter 'robot_base': {exc}") from None
    if declared.drive != drive:
        raise ValueError(
            f"parameter 'robot_base': {declared.name} is {declared.drive}, the bundle's policy drives a "
            f"{drive} base ({said}): use a bundle trained for this base"
        )
    if bundle is None:
        warnings.append(f"robot_base {declared.name}: the bundle states no radius, only its drive was checked")
    elif abs(declared.radius - bundle.radius) > RADIUS_TOLERANCE:
        raise ValueError(
            f"parameter 'robot_base': {declared.name} has radius {declared.radius:g} m, the bundle's base "
            f"{bundle.radius:g} m ({said}): use a bundle trained for this footprint"
        )
    slower = [
        f"{k} {getattr(declared, k):g}"
        for k in ("v_forward", "v_backward", "omega_max")
        if bundle is not None and getattr(declared, k) < getattr(bundle, k)
    ]
    if slower:
        warnings.append(
            f"robot_base {declared.name} is slower than the bundle's base ({', '.join(slower)}): "
            "set v_max / omega_max to what the base can do"
        )
    return bundle, f"base {said} (bundle contract; matches node parameter robot_base {robot_base})"


def resolve_scan_options(contract: Any, params: NodeParams, *, warnings: list[str]) -> ScanOptions:
    """The scan rules (:class:`navcontract.scan.ScanOptions`) from the parameters; ``max_fill_gap``
    must not exceed the contract's number of beams, ``fill_value`` counts only with fill 'constant'."""
    gap = check_number("max_fill_gap", params.max_fill_gap, 0.0, float(contract.num_beams))
    try:
        scan_options = ScanOptions(
            fill=params.fill,
            fill_value=params.fill_value if params.fill == "constant" else None,
            below_min=params.below_min,
            min_valid_share=params.min_valid_share,
            min_coverage=params.min_coverage,
            max_fill_gap=int(gap),
            self_radius=params.self_radius,
        )
    except ValueError as exc:
        raise ValueError(f"scan parameters: {exc}") from exc
    radius = getattr(contract, "robot_radius", None)
    if radius is not None and params.self_radius > float(radius):
        raise ValueError(
            f"parameter 'self_radius' {params.self_radius:g} m is beyond the robot's radius {float(radius):g} m: "
            "it would drop obstacles outside the footprint"
        )
    if params.fill == "constant" and params.fill_value == 0.0:
        warnings.append(
            "fill 'constant' with fill_value 0: every unseen sector reads as an obstacle touching the robot"
        )
    return scan_options


def resolve_lidar_mount(params: NodeParams) -> tuple[LidarMount | None, str]:
    """The lidar's mount on the body from the ``lidar_*`` parameters (None: at the centre, facing
    forward, upright, as the policy was trained), and one line that states it."""
    mount = LidarMount(params.lidar_x, params.lidar_y, params.lidar_yaw, params.lidar_upside_down)
    if mount.identity:
        return None, "lidar at the centre of the body, facing forward, upright (as trained; node parameters lidar_*)"
    return mount, (
        f"lidar at x {mount.x:g} m, y {mount.y:g} m, yaw {math.degrees(mount.yaw):.1f} deg"
        f"{', upside down' if mount.upside_down else ''} on the body (node parameters lidar_*): its readings "
        "are taken into the body frame before the scan rules"
    )


def plan_clearance(contract: Any, guard: GuardRule | None) -> float | None:
    """The clearance the scan map plans with: the passing clearance of the guard the node applies on
    the contract's beams (:meth:`GuardRule.passing_clearance`), or None without a guard."""
    if guard is None:
        return None
    return guard.passing_clearance(int(contract.num_beams))


def resolve_progress(params: NodeParams) -> ProgressRule:
    """The blocked watch, progress checker and recovery (:mod:`navdeploy.progress`) from the parameters."""
    return ProgressRule(**{f.name: getattr(params, f.name) for f in fields(ProgressRule)})  # named alike


def resolve_scan_map(
    contract: Any, enabled: bool, worker: bool = False, guard: GuardRule | None = None
) -> tuple[ScanMapCfg | None, float | None, str]:
    """The scan map (a goal without a path is driven along a path planned on the robot's own scans):
    on when the parameter is and the contract states ``robot.radius``; ``worker``: updated and
    planned on a worker process; ``guard``: the guard the node applies (the map plans with its
    passing clearance, :func:`plan_clearance`). Returns its configuration (None: off), the radius and
    one line for the log, which states the clearance rule with its numbers."""
    base = getattr(contract, "base", None)
    radius = None if base is None else float(base.radius)
    if not enabled:
        return None, radius, "scan map off (parameter scan_map false): a goal without a path is driven to directly"
    if radius is None:
        return None, None, "scan map off: the bundle does not state robot.radius (exported before it)"
    cfg = ScanMapCfg()
    beams = int(contract.num_beams)
    rule = clearance_text(cfg, radius, plan_clearance(contract, guard), guard, beams)
    return (
        cfg,
        radius,
        f"scan map on (goal without a path: {cfg.resolution:g} m cells, replan every "
        f"{cfg.replan_period:g} s; {rule}; "
        f"{'on a worker process the control tick never waits for' if worker else 'inline at each tick'})",
    )


def resolve_guard(contract: Any, enabled: bool, *, warnings: list[str]) -> tuple[GuardRule | None, str]:
    """The collision guard from the node's ``guard`` parameter and the contract's ``guard`` section:
    the section's rule when both are there; with the parameter on and no section (a policy trained
    without the guard), :func:`untrained_guard`; with the parameter off, None. Returns the rule and one line for the log
    (with the unseen clearance, and whether the section states it or the default stands in:
    :data:`navcontract.guard.UNSEEN_CLEARANCE`, applied either way); appends a warning when the
    parameter turns off a guard the policy was trained with. The guard is the last stage (after the
    clamp and the velocity smoother), for every driver."""
    enabled = PARAM["guard"].check(enabled)
    trained: GuardRule | None = getattr(contract, "guard", None)
    if trained is None:
        if not enabled:
            return None, "guard off (node parameter guard false; the policy was trained without one)"
        return untrained_guard(contract, warnings)
    if not enabled:
        warnings.append("guard off, but the policy was trained driving through it: nothing slows it near obstacles")
        return None, "guard off (node parameter guard false)"
    section = (getattr(contract, "raw", None) or {}).get(GUARD_SECTION)
    unseen = "" if states_unseen_clearance(section) else ", the default: the bundle's guard section does not state it"
    smoother = "after the velocity smoother in training too" if trained.after_smoother else "trained without a smoother"
    return trained, (
        f"guard radius {trained.radius:g} m, margin {trained.margin:g} m, headway {trained.headway:g} s, "
        f"decel {trained.decel:g} m/s^2, slide {'on' if trained.slide else 'off'}, unseen clearance "
        f"{trained.unseen_clearance:g} m (unseen sectors are occupied: no motion into them{unseen}), "
        f"keep sight {'on' if trained.keep_sight else 'off'}"
        f"{'' if section is not None and 'keep_sight' in section else ' (the default)'}, "
        f"reaction {trained.reaction:.2g} s, momentum {'on' if trained.momentum else 'off'}"
        f"{f' (sweep lag {trained.sweep_lag:g} s)' if trained.sweep_lag > 0 else ''}"
        f"{' (per-axis path, brakes along the motion)' if trained.axis_brake else ''}"
        f"{'' if section is not None and 'momentum' in section else ' (the default)'}, "
        f"{steering(trained)}, last stage ({smoother}; bundle contract)"
    )


def steering(rule: GuardRule) -> str:
    """The log's words for the guard's steering (:mod:`navcontract.steer`)."""
    if rule.steer <= 0.0:
        return "steering off"
    return f"steering up to {rule.steer:g} deg before the smoother (a holonomic base)"


UNGUARDED = "no guard: the bundle states neither a guard section nor robot.radius"
"""The warning for a bundle the node cannot guard (a policy trained without the guard, exported
before the contract stated the robot's radius)."""


def untrained_guard(contract: Any, warnings: list[str]) -> tuple[GuardRule | None, str]:
    """The guard for a bundle without a ``guard`` section (a policy trained without one):
    :func:`navcontract.guard.default_guard` on the contract's radius, reaction time and trained
    acceleration limit; None, warned about, when the contract states no radius."""
    base = getattr(contract, "base", None)
    if base is None:
        warnings.append(UNGUARDED)
        return None, "guard none (the bundle has no guard section and no robot.radius to guard with)"
    response = getattr(contract, "response", None)
    accel = None if response is None else response.accel_limit_linear
    rule = default_guard(float(base.radius), implied_reaction(contract.raw, response), accel)
    return rule, (
        f"guard default (the bundle has no guard section: the policy was trained without it): radius "
        f"{rule.radius:g} m, margin {rule.margin:g} m, headway {rule.headway:g} s, decel {rule.decel:g} m/s^2, "
        f"reaction {rule.reaction:.2g} s, slide on, unseen clearance {rule.unseen_clearance:g} m, momentum on, last stage"
    )


def resolve_path_rule(
    contract: Any, lookahead: float, search_window: float, *, warnings: list[str]
) -> tuple[LookaheadRule, str]:
    """The path-following rule from the node's parameters and the contract's ``path_following``
    section, as ``goal_tolerance`` is resolved: a parameter of 0 takes the bundle's trained value
    (:class:`LookaheadRule`'s default in a bundle without the section), a value > 0 replaces it
    (warned about when it differs from a rule the policy was trained to follow). Returns the rule and
    one line for the log saying where each value came from; appends warnings to ``warnings``."""
    given = (
        ("path_lookahead", PARAM["path_lookahead"].check(lookahead)),
        ("path_search_window", PARAM["path_search_window"].check(search_window)),
    )
    trained = getattr(contract, "path_following", None)
    base = trained.rule if trained is not None else LookaheadRule()
    values: list[float] = []
    parts: list[str] = []
    for (name, value), default in zip(given, (base.lookahead, base.search_window), strict=True):
        if value > 0:
            values.append(value)
            origin = "node parameter" + (f"; the bundle's {default:g} m" if trained is not None else "")
            if trained is not None and trained.trained_share > 0 and value != default:
                warnings.append(
                    f"{name}={value:g} m differs from the {default:g} m the policy was trained to follow paths with"
                )
        else:
            values.append(default)
            if trained is not None:
                origin = "bundle contract; node parameter 0 = the bundle's"
            else:
                origin = "default; the bundle has no path_following section"
        parts.append(f"{name} {values[-1]:g} m ({origin})")
    if trained is None:
        tail = "trained rule not stated (bundle exported before the path_following section)"
    elif trained.trained_share > 0:
        tail = f"the policy followed planned paths in {trained.trained_share * 100:g}% of its training episodes"
    else:
        tail = "the policy was trained without path following (share 0)"
    return LookaheadRule(*values), f"{', '.join(parts)}; {tail}"


def resolve_accel_limits(
    contract: Any,
    enabled: bool,
    linear: float,
    angular: float,
    *,
    warnings: list[str],
    sources: list[str],
) -> AccelLimits:
    """The velocity smoother's limits from the node's parameters and the contract's
    ``robot_response`` (see the module docstring); appends what to log to ``warnings`` and ``sources``."""
    enabled = PARAM["velocity_smoother"].check(enabled)
    lin = PARAM["max_accel_linear"].check(linear)
    ang = PARAM["max_accel_angular"].check(angular)
    response = getattr(contract, "response", None)
    if not enabled:
        sources.append("velocity smoother off (node parameter velocity_smoother false)")
        if lin or ang:
            warnings.append("max_accel_linear / max_accel_angular are ignored: velocity_smoother is false")
        if response is not None and (response.accel_linear or response.accel_angular):
            warnings.append(
                "velocity smoother off, but the policy was trained with acceleration limits: "
                "the base itself must not accelerate faster than " + response.describe()
            )
        return AccelLimits()
    if response is None:
        absent = "none (the bundle has no robot_response section: format 1)"
    else:
        absent = "none (the policy was trained without an acceleration limit)"
    picked: list[float | None] = []
    for name, value, trained, unit in (
        ("max_accel_linear", lin, response.accel_linear if response else None, "m/s^2"),
        ("max_accel_angular", ang, response.accel_angular if response else None, "rad/s^2"),
    ):
        if value > 0:
            picked.append(value)
            sources.append(f"{name} {value:g} {unit} (node parameter)")
            if trained is not None and not trained[0] <= value <= trained[1]:
                warnings.append(
                    f"{name}={value:g} {unit} is outside the range the policy was trained with "
                    f"({trained[0]:g}-{trained[1]:g} {unit})"
                )
        elif trained is not None:
            picked.append(trained[0])
            sources.append(
                f"{name} {trained[0]:g} {unit} (bundle contract: the lowest trained, of {trained[0]:g}-{trained[1]:g})"
            )
        else:
            picked.append(None)
            sources.append(f"{name} {absent}")
    return AccelLimits(*picked)
