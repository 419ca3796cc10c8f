"""Typed configuration loaded from YAML.

Every section is a dataclass; loading walks the YAML tree and builds the dataclasses, and any key
that no field declares is an error naming the key and where it sits (``env.room.num_obstacle``).
Dotted overrides (``algorithm.learning_rate=1e-4``) go through the same checks.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from navcontract.action import ActionScaling
from navcontract.guard import GuardRule
from navcontract.scan import ScanOptions
from navcontract.spec import PolicySpec, policy_spec_from_config
from navcontract.terms import SensorDims

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO_ROOT / "conf" / "nav.yaml"


class ConfigError(ValueError):
    """A configuration value or key is wrong; the message names it and where it is."""


@dataclass
class RoomCfg:
    size: float = 8.0  # side of the square room, inside the walls [m]
    wall_thickness: float = 0.1
    num_obstacles: tuple[int, int] = (4, 12)  # inclusive range drawn per episode
    cylinder_radius: tuple[float, float] = (0.15, 0.45)
    box_half_size: tuple[float, float] = (0.15, 0.5)
    num_cylinder_slots: int = 8  # obstacle pool in the model; each episode picks from it
    num_box_slots: int = 8
    goal_distance: tuple[float, float] = (1.5, 6.0)
    clearance: float = 0.3  # free space around start and goal, from the robot's surface [m]
    obstacle_gap: float = 0.05  # min gap between obstacles
    wall_margin: float = 0.3  # min distance of obstacles / start / goal from the walls


@dataclass
class LidarCfg:
    num_beams: int = 72
    max_range: float = 6.0
    noise_std: float = 0.01  # Gaussian range noise in training [m]; truth_scan_clean has none
    # Each beam is the minimum over its sector (the robot's rule, navcontract.scan.resample_scan):
    # 0 = exact (analytic: edge rays + each geom's closest point, navsim.sectors); K >= 1 = K
    # sub-rays from sector edge to edge, 1 = the sector centre only (the readings before the
    # sector-minimum rule). Cost and error: nav-benchmark-sim --rays-per-beam (docs/simulator.md).
    rays_per_beam: int = 0
    # Field of view centred on forward [deg]; sectors outside it are filled by the runtime's rule.
    fov_deg: float = 360.0
    fov_fill: str = "nearest"  # navcontract.scan fill policy for unseen sectors: nearest, max_range, constant
    fov_fill_value: float | None = None  # [m], for fov_fill: constant


@dataclass
class RobotCfg:
    v_max: float = 1.5  # per axis and planar-norm limit [m/s]
    omega_max: float = 2.0  # [rad/s]
    limit_planar_speed: bool = True  # scale (vx, vy) down so that |v| <= v_max
    radius: float = 0.2  # cylinder shell: the MJCF, room clearances, surface distances, the contract


@dataclass
class GuardCfg:
    """The collision guard (navcontract.guard) between the policy's command and the base; the radius
    is the robot's. Off: step() is the simulator without it, bit for bit."""

    enabled: bool = True
    margin: float = 0.01  # [m] kept free beyond the robot's radius (0.03 closes clutter passages: docs/robustness.md)
    headway: float = 0.5  # [s] time headway to the nearest blocking return
    decel: float = 2.5  # [m/s^2] braking deceleration the speed cap allows for
    slide: bool = True  # a return already within the margin may be slid past, not closed in on


@dataclass
class ClutterCfg:
    """Clutter fields: posts and short wall pieces on a grid, clustered by a cellular automaton,
    in a corridor-shaped arena; start and goal at opposite ends (navsim.families)."""

    length: float = 13.0  # [m] arena along x
    width: float = 4.0  # [m] arena along y
    cell: float = 0.5  # [m] grid pitch: neighbouring occupied cells close, a free cell between two opens a passage
    fill: tuple[float, float] = (0.15, 0.4)  # occupied share of the grid at the lowest .. top level
    smoothing_steps: int = 1  # cave-generator steps: a cell is occupied when >= 5 of its 3x3 block are
    post_radius: tuple[float, float] = (0.05, 0.1)
    piece_share: float = 0.25  # share of occupied cells holding a short wall piece instead of a post
    piece_half: tuple[float, float] = (0.25, 0.04)  # [m] half length, half thickness of a wall piece
    jitter: float = 0.08  # [m] uniform offset of each obstacle from its cell centre, per axis
    end_zone: float = 1.5  # [m] obstacle-free strip at each end for the start and the goal
    num_post_slots: int = 72
    num_piece_slots: int = 24


@dataclass
class CorridorsCfg:
    """Corridors: a maze of cells (turns, dead ends) with doorways; start and goal at opposite ends."""

    cols: int = 8
    rows: int = 3
    cell: float = 1.2  # [m] corridor pitch (a corridor is cell - wall thickness wide)
    wall_thickness: float = 0.1
    loops: tuple[float, float] = (0.6, 0.1)  # share of the spanning maze's walls also opened, lowest .. top level
    doorway_share: float = 0.3  # share of openings that are doorways in a wall instead of a gap
    doorway_width: tuple[float, float] = (0.7, 0.9)  # [m]


@dataclass
class ArenaCfg:
    """Larger arenas with long goals: the rooms' obstacles in a bigger square."""

    size: float = 14.0
    num_obstacles: tuple[int, int] = (8, 16)  # top level (the lowest level has a quarter of them)
    goal_distance: tuple[float, float] = (6.0, 12.0)  # top level (the lowest starts at a third)


@dataclass
class CurriculumCfg:
    """Difficulty levels per world (legged_gym's terrain levels): up on success, down on failure."""

    enabled: bool = False  # off: every world at the top level (the family as configured)
    levels: int = 5
    start_level: int = 0


@dataclass
class WorldsCfg:
    """Which world families training and evaluation draw from, and how (navsim.families).

    With the defaults (rooms only, no curriculum, no path following) the worlds are exactly the
    rooms of ``env.room``, drawn as before; anything else draws from pools of pre-planned worlds
    (navsim.world_pool), every one checked feasible by the grid planner (navsim.grid_planner)."""

    families: dict[str, float] = field(default_factory=lambda: {"rooms": 1.0})  # family -> share of worlds
    curriculum: CurriculumCfg = field(default_factory=CurriculumCfg)
    path_following: float = 0.0  # share of episodes whose policy goal is a sub-goal along the planned path
    lookahead: float = 1.0  # [m] navcontract.subgoal: the sub-goal's distance along the path
    search_window: float = 2.0  # [m] navcontract.subgoal: how far ahead the projection may jump
    pool_size: int = 128  # pre-planned worlds per family and level
    refresh_interval: int = 32  # steps between pool refreshes (one family and level at a time)
    refresh_size: int = 8  # worlds re-drawn per refresh
    grid_resolution: float = 0.05  # [m] planner cell
    path_points: int = 48  # waypoints kept per planned path
    path_clearance: float = 0.25  # [m] the path keeps this beyond the radius where it can (0: the shortest path)
    clutter: ClutterCfg = field(default_factory=ClutterCfg)
    corridors: CorridorsCfg = field(default_factory=CorridorsCfg)
    arenas: ArenaCfg = field(default_factory=ArenaCfg)

    def active_families(self) -> list[str]:
        """Families with a share > 0, in registry order."""
        from navsim.families import FAMILIES

        return [f for f in FAMILIES if self.families.get(f, 0.0) > 0]

    def planned(self) -> bool:
        """True when worlds come from planned pools (anything but today's plain rooms)."""
        return self.active_families() != ["rooms"] or self.curriculum.enabled or self.path_following > 0


@dataclass
class EnvCfg:
    num_envs: int = 4096
    device: str = "auto"  # auto: cuda when present, else cpu
    control_period: float = 0.1
    physics_substeps: int = 5
    episode_length_s: float = 30.0
    goal_tolerance: float = 0.3
    init_at_random_ep_len: bool = True
    auto_reset: bool = True
    seed: int = 1
    room: RoomCfg = field(default_factory=RoomCfg)
    lidar: LidarCfg = field(default_factory=LidarCfg)
    robot: RobotCfg = field(default_factory=RobotCfg)
    worlds: WorldsCfg = field(default_factory=WorldsCfg)
    guard: GuardCfg = field(default_factory=GuardCfg)

    def guard_rule(self) -> GuardRule | None:
        """The guard the policy drives through, or None when it is off."""
        g = self.guard
        if not g.enabled:
            return None
        return GuardRule(radius=self.robot.radius, margin=g.margin, headway=g.headway, decel=g.decel, slide=g.slide)

    def extent_half(self) -> float:
        """Half side of the square inside the fixed walls: the rooms' size, or the largest family's."""
        from navsim.families import family_half_extent

        sizes = [self.room.size / 2.0]
        sizes += [max(family_half_extent(self, f)) for f in self.worlds.active_families()]
        return max(sizes)


@dataclass
class TermCfg:
    enabled: bool = True
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class ObservationsCfg:
    privileged_enabled: bool = True
    policy: dict[str, TermCfg] = field(default_factory=dict)
    privileged: dict[str, TermCfg] = field(default_factory=dict)


@dataclass
class RewardTermCfg:
    weight: float | None = None  # None: the registry's default weight
    enabled: bool = True
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class AlgorithmCfg:
    learning_rate: float = 3e-4
    schedule: str = "adaptive"
    desired_kl: float = 0.01
    clip_param: float = 0.2
    use_clipped_value_loss: bool = True
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.005
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    gamma: float = 0.99
    lam: float = 0.95
    max_grad_norm: float = 1.0


@dataclass
class ModelCfg:
    actor_hidden_dims: list[int] = field(default_factory=lambda: [256, 256])
    critic_hidden_dims: list[int] = field(default_factory=lambda: [256, 256])
    activation: str = "elu"
    init_noise_std: float = 1.0
    obs_normalization: bool = True


@dataclass
class RunnerCfg:
    experiment_name: str = "nav"
    run_name: str = ""
    num_steps_per_env: int = 32
    max_iterations: int = 300
    save_interval: int = 50
    logger: str = "tensorboard"
    log_root: str = "logs/rsl_rl"
    eval_episodes: int = 500
    eval_seed: int = 1_000_003


@dataclass
class CpuOverrides:
    """Applied when training runs on the CPU (no GPU): a run sized for 2 cores."""

    num_envs: int = 512
    max_iterations: int = 500
    num_mini_batches: int = 4


@dataclass
class RandTermCfg:
    """One randomisation term: on/off and its params, each a range ``[low, high]`` drawn per world
    per episode (navsim.randomization.RANDOMIZATION_TERMS defines them, their units and defaults)."""

    enabled: bool = True
    params: dict[str, tuple[float, float]] = field(default_factory=dict)


def _default_rand_terms() -> dict[str, RandTermCfg]:
    from navsim.randomization import default_term_cfgs

    return default_term_cfgs()


@dataclass
class RandomizationCfg:
    """What a real base does differently from the simulator, drawn per world per episode.

    ``enabled: false`` (or every term off) leaves the simulator exactly as without this section.
    Loading fills in the terms and params that YAML leaves out with the registry's defaults, so
    plain config data (a checkpoint's, a bundle's contract) always names every term."""

    enabled: bool = True
    # Share of episodes (per world, drawn at reset) that run without any perturbation: the
    # unperturbed simulator stays inside the training distribution.
    nominal_share: float = 0.25
    terms: dict[str, RandTermCfg] = field(default_factory=_default_rand_terms)


@dataclass
class NavConfig:
    env: EnvCfg = field(default_factory=EnvCfg)
    randomization: RandomizationCfg = field(default_factory=RandomizationCfg)
    observations: ObservationsCfg = field(default_factory=ObservationsCfg)
    rewards: dict[str, RewardTermCfg] = field(default_factory=dict)
    algorithm: AlgorithmCfg = field(default_factory=AlgorithmCfg)
    model: ModelCfg = field(default_factory=ModelCfg)
    runner: RunnerCfg = field(default_factory=RunnerCfg)
    cpu: CpuOverrides = field(default_factory=CpuOverrides)

    # The contract objects, each from its one constructor in navdeploy (plain config data in).
    def sensor_dims(self) -> SensorDims:
        return SensorDims.from_config(to_dict(self))

    def action_scaling(self) -> ActionScaling:
        return ActionScaling.from_config(to_dict(self))

    def policy_spec(self) -> PolicySpec:
        return policy_spec_from_config(to_dict(self))


REMOVED_KEYS = {
    ("env", "stuck_window"): "the stuck window is rewards.stuck.params.window",
}
"""Keys that configs stored by older versions (checkpoint infos) may still carry; dropped when a
stored config is rebuilt with :func:`config_from_data`, an error in YAML and overrides."""

STORED_BEFORE = {
    ("env", "lidar", "rays_per_beam"): 1,
    ("randomization", "enabled"): False,
    ("randomization", "nominal_share"): 0.0,
    ("env", "guard", "enabled"): False,
    ("env", "guard", "slide"): False,
    ("env", "worlds", "path_clearance"): 0.0,
}
"""Keys that configs stored by older versions lack, with the value those versions used (one ray per
beam, at the sector centre; no randomisation; no collision guard; paths as short as feasible); filled in by :func:`config_from_data` (a missing
section is created for them) so that an old checkpoint is evaluated or exported with the simulator
it was trained in, never with today's default."""


# --------------------------------------------------------------------------------------------
# Building dataclasses from plain data, strictly.


_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return build(tp, value, where)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return {str(k): _convert(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
            return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
        return list(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, where)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):
            return float(value)  # PyYAML (YAML 1.1) reads 1e-4 without a dot as a string
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def build(cls: type, data: dict[str, Any], where: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``; unknown keys raise ConfigError naming them."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            path = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"unknown key '{path}' (known here: {', '.join(sorted(names))})")
    kwargs = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else key
        kwargs[key] = _convert(hints[key], value, path)
    return cls(**kwargs)


def to_dict(obj: Any) -> Any:
    """Plain-data view of a config (tuples become lists) for YAML / JSON."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def apply_override(data: dict[str, Any], dotted: str) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to plain config data, in place."""
    if "=" not in dotted:
        raise ConfigError(f"override '{dotted}' must look like key.path=value")
    path, raw = dotted.split("=", 1)
    keys = path.strip().split(".")
    node = data
    for k in keys[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {} if k not in node else node[k]
            if not isinstance(node[k], dict):
                raise ConfigError(f"override '{path}': '{k}' is not a section")
        node = node[k]
    try:
        node[keys[-1]] = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        where = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"override '{dotted}': the value is not valid YAML ({where})") from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> NavConfig:
    """Load ``conf/nav.yaml`` (or ``path``), apply dotted overrides, validate everything."""
    path = Path(path) if path is not None else DEFAULT_CONFIG
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"{path}: not valid YAML{at}: {problem}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    for ov in overrides or []:
        apply_override(data, ov)
    return _built(data, str(path))


def _section(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    """The mapping that holds ``path[-1]`` in plain config data, or None when a level is missing."""
    node: Any = data
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def config_from_data(data: dict[str, Any], where: str = "stored config") -> NavConfig:
    """A config stored as plain data (a checkpoint's ``infos['nav_config']``), validated; keys of
    :data:`REMOVED_KEYS` that older versions wrote are dropped, anything else unknown is an error."""
    data = copy.deepcopy(data)
    for path in REMOVED_KEYS:
        section = _section(data, path)
        if section is not None:
            section.pop(path[-1], None)
    for path, value in STORED_BEFORE.items():
        node: Any = data
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.setdefault(path[-1], value)
    return _built(data, where)


def _built(data: dict[str, Any], where: str) -> NavConfig:
    """The validated NavConfig of plain data; a wrong key or value names ``where`` it came from."""
    from navsim.randomization import complete_randomization_cfg

    try:
        cfg = build(NavConfig, data)
        complete_randomization_cfg(cfg.randomization)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    validate(cfg)
    return cfg


def validate(cfg: NavConfig) -> None:
    """Cross-field checks that a type alone cannot express."""
    from navsim.observations import validate_observation_cfg
    from navsim.randomization import validate_randomization_cfg
    from navsim.rewards import validate_reward_cfg
    from navsim.sectors import SectorRays

    e = cfg.env
    positive = {
        "algorithm.learning_rate": cfg.algorithm.learning_rate,
        "env.num_envs": e.num_envs,
        "cpu.num_envs": cfg.cpu.num_envs,
        "runner.num_steps_per_env": cfg.runner.num_steps_per_env,
        "runner.save_interval": cfg.runner.save_interval,
        "algorithm.num_learning_epochs": cfg.algorithm.num_learning_epochs,
        "algorithm.num_mini_batches": cfg.algorithm.num_mini_batches,
        "cpu.num_mini_batches": cfg.cpu.num_mini_batches,
    }
    for key, value in positive.items():
        if not value > 0:  # also refuses NaN
            raise ConfigError(f"{key} must be > 0, got {value}")
    if e.physics_substeps < 1:
        raise ConfigError("env.physics_substeps must be >= 1")
    if e.control_period <= 0:
        raise ConfigError("env.control_period must be > 0")
    lo, hi = e.room.num_obstacles
    if not 0 <= lo <= hi <= e.room.num_cylinder_slots + e.room.num_box_slots:
        raise ConfigError("env.room.num_obstacles must satisfy 0 <= min <= max <= num_cylinder_slots + num_box_slots")
    if e.lidar.num_beams < 1 or e.lidar.max_range <= 0:
        raise ConfigError("env.lidar needs num_beams >= 1 and max_range > 0")
    if e.lidar.rays_per_beam < 0:
        raise ConfigError(f"env.lidar.rays_per_beam must be >= 0 (0 = exact), got {e.lidar.rays_per_beam}")
    if not 0.0 < e.lidar.fov_deg <= 360.0:
        raise ConfigError(f"env.lidar.fov_deg must be in (0, 360], got {e.lidar.fov_deg}")
    try:
        ScanOptions(fill=e.lidar.fov_fill, fill_value=e.lidar.fov_fill_value)
    except ValueError as err:
        raise ConfigError(f"env.lidar.fov_fill: {err}") from None
    try:
        SectorRays(e.lidar.num_beams, e.lidar.rays_per_beam, e.lidar.fov_deg)
    except ValueError as err:
        raise ConfigError(f"env.lidar: {err}") from None
    if e.robot.radius <= 0 or 2 * (e.robot.radius + e.room.wall_margin) >= e.room.size:
        raise ConfigError("env.robot.radius must be > 0 and the robot must fit in the room with its wall margin")
    from navsim.families import validate_worlds_cfg

    validate_worlds_cfg(e)
    validate_observation_cfg(cfg.observations)
    validate_reward_cfg(cfg.rewards)
    validate_randomization_cfg(cfg.randomization, e)
