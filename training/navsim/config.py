"""The configuration schema: one typed dataclass per section, and its defaults.

This module is the one place the defaults live: ``NavConfig()`` is the default configuration, and
``conf/nav.yaml`` restates it (``tests/sim/test_config_defaults.py`` checks every value it states).
It holds the schema only and imports nothing of the simulator: loading YAML and stored configs
(:mod:`navsim.config_load`), cross-field checks (:mod:`navsim.config_check`), the contract objects
of a config (:mod:`navsim.contract_objects`) and the quantities derived from the world families
(:mod:`navsim.families`) live beside it.

Term tables (``rewards``, ``randomization.terms``) are dataclasses with one field per registered
term, in registry order, that read like mappings (``cfg.rewards["stuck"].params["window"]``); each
term's params are a dataclass of their own, so a key no field declares is an error naming it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from navcontract.guard import DEFAULT_DECEL, DEFAULT_HEADWAY, DEFAULT_MARGIN, UNSEEN_CLEARANCE

Range = tuple[float, float]


class ConfigError(ValueError):
    """A configuration value or key is wrong; the message names it and where it is."""


class Table(Mapping):
    """A dataclass read as a mapping of its fields (name -> value), in field order; equal to any
    mapping with the same items. Subclasses are ``@dataclass(eq=False)`` so that this equality holds."""

    def __getitem__(self, name: str) -> Any:
        if name not in self._names():
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self))


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
    # The robot's lidar beams per sector: the node takes each sector's minimum of that many noisy
    # readings, which reads short of the surface (about 1.5 std for 10 beams). A sector's noise is
    # the minimum of this many draws (1: one draw on the sector minimum), navsim.scan_faults.
    noise_beams: int = 1
    # Each beam is the minimum over its sector (the robot's rule, navcontract.scan.resample_scan):
    # 0 = exact (analytic: edge rays + each geom's closest point, navsim.sectors); K >= 1 = K
    # sub-rays from sector edge to edge, 1 = the sector centre only. Cost and error:
    # nav-benchmark-sim --rays-per-beam (docs/simulator.md).
    rays_per_beam: int = 0
    # Field of view centred on forward [deg]; sectors outside it are filled by the runtime's rule.
    fov_deg: float = 360.0
    fov_fill: str = "nearest"  # navcontract.scan fill policy for unseen sectors: nearest, max_range, constant
    fov_fill_value: float | None = None  # [m], for fov_fill: constant


@dataclass
class RobotCfg:
    """The robot base (``navcontract.base``): ``base`` names a preset (``navcontract/bases/<name>.yaml``)
    or a base YAML file, which gives every other field; the fields a config states refine it
    (:mod:`navsim.config_load`). The defaults are the ``holonomic_disc`` preset's values."""

    base: str = "holonomic_disc"  # preset name or path of a base YAML file
    drive: str = "holonomic"  # holonomic: action (vx, vy, wz); diff_drive: action (v, wz), no sideways motion
    v_max: float = 1.5  # [m/s] forward limit; holonomic: the limit of every axis and of the planar norm
    v_backward: float = 1.5  # [m/s] backward limit (holonomic: v_max)
    v_lateral: float = 1.5  # [m/s] sideways limit (holonomic: v_max; diff_drive: 0)
    omega_max: float = 2.0  # [rad/s]
    limit_planar_speed: bool = True  # holonomic: scale (vx, vy) down so that |v| <= v_max
    radius: float = 0.2  # cylinder shell: the MJCF, room clearances, surface distances, the contract
    accel_linear: float = 3.0  # [m/s^2] what the base can do (recorded in the contract's base section)
    accel_angular: float = 4.0  # [rad/s^2]


@dataclass
class GuardCfg:
    """The collision guard (navcontract.guard) between the policy's command and the base; the radius
    is the robot's. Off: step() is the simulator without it, bit for bit."""

    enabled: bool = True
    margin: float = (
        DEFAULT_MARGIN  # [m] kept free beyond the robot's radius (0.03 closes clutter passages: docs/robustness.md)
    )
    headway: float = DEFAULT_HEADWAY  # [s] time headway to the nearest blocking return (at least e x the reaction time)
    decel: float = DEFAULT_DECEL  # [m/s^2] braking deceleration the speed cap allows for
    slide: bool = True  # a return already within the margin may be slid past, not closed in on
    unseen_clearance: float = UNSEEN_CLEARANCE  # [m] an unseen sector (outside the field of view, no reading) counts as a return this far beyond the margin
    momentum: bool = True  # zero the planar command while the base's velocity, turning from the observed one to the command, would pass one it cannot stop from
    steer: float = 0.0  # [deg] a holonomic command is turned within this span toward the direction the guard lets out fastest (navcontract.steer; 0: off)
    sweep_lag: float = 0.0  # [s] rule step 5 judges each velocity on the way from where a base lagging this much will be (0: from where it is)
    axis_brake: bool = False  # rule step 5b: also judge the path of a base limited per axis, and stop by braking along the measured velocity
    keep_sight: bool = (
        True  # rule step 0b: cap a turn that would carry a return nearer than the unseen range out of sight
    )


@dataclass
class SmootherCfg:
    """The env's command smoother (navdeploy.smoother's rule), between the clamp and the guard, as the
    robot's velocity smoother runs by default: its limits are the contract's
    ``robot_response.accel_limit`` (the low ends of ``randomization.terms.accel_limit``), so none
    without that term. Off: step() is the simulator without it, bit for bit."""

    enabled: bool = True


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
    rooms of ``env.room``, drawn without the planner; anything else draws from pools of pre-planned worlds
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
    path_clearance: float = (
        0.25  # [m] the path keeps this beyond the certified clearance where it can (0: the shortest path)
    )
    certify: str = (
        "guard"  # a world is feasible for: guard (the robot passing at env.guard's passing clearance) | radius
    )
    clutter: ClutterCfg = field(default_factory=ClutterCfg)
    corridors: CorridorsCfg = field(default_factory=CorridorsCfg)
    arenas: ArenaCfg = field(default_factory=ArenaCfg)


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
    smoother: SmootherCfg = field(default_factory=SmootherCfg)


@dataclass
class TermCfg:
    enabled: bool = True
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class ObservationsCfg:
    privileged_enabled: bool = True
    policy: dict[str, TermCfg] = field(default_factory=dict)
    privileged: dict[str, TermCfg] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Rewards: the weight and params of every term of navsim.rewards.REWARD_TERMS.


@dataclass(eq=False)
class RewardParams(Table):
    """Params of a reward term; this base class is the term without any."""


@dataclass(eq=False)
class ProgressParams(RewardParams):
    potential_discount: bool = False  # add (1 - gamma) * distance: the potential-based form


@dataclass(eq=False)
class NearObstacleParams(RewardParams):
    safe_dist: float = 0.25  # [m] from the robot's surface; closer is penalised, linearly


@dataclass(eq=False)
class BackwardParams(RewardParams):
    thresh: float = -0.05  # forward action below this (dimensionless, in [-1, 1]) is penalised


@dataclass(eq=False)
class StuckParams(RewardParams):
    window: int = 25  # [control steps] the window the displacement is measured over
    min_move: float = 0.30  # [m] a smaller net displacement over a full window counts as stuck


@dataclass
class RewardTermCfg:
    weight: float
    enabled: bool = True
    params: RewardParams = field(default_factory=RewardParams)


def _reward(weight: float, params: type[RewardParams] = RewardParams) -> Any:
    return field(default_factory=lambda: RewardTermCfg(weight, params=params()))


@dataclass(eq=False)
class RewardsCfg(Table):
    """Every reward term (navsim.rewards), in registry order."""

    goal: RewardTermCfg = _reward(15.0)
    progress: RewardTermCfg = _reward(2.0, ProgressParams)
    face_goal: RewardTermCfg = _reward(0.05)
    time: RewardTermCfg = _reward(-0.02)
    near_obstacle: RewardTermCfg = _reward(-0.08, NearObstacleParams)
    action_smooth: RewardTermCfg = _reward(-0.02)
    guard_cut: RewardTermCfg = _reward(0.0)
    backward: RewardTermCfg = _reward(-0.05, BackwardParams)
    stuck: RewardTermCfg = _reward(-0.03, StuckParams)
    collision: RewardTermCfg = _reward(-12.0)
    timeout: RewardTermCfg = _reward(-4.0)
    out_of_bounds: RewardTermCfg = _reward(-12.0)


# --------------------------------------------------------------------------------------------
# PPO, model, runner and the sizing presets.


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
    # The action noise never falls below this (per action, in the [-1, 1] action units): a learned
    # std that collapses makes every update's KL large, the adaptive learning rate falls to its floor
    # and learning stops. 0: no floor (rsl_rl's 1e-6).
    min_noise_std: float = 0.05
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


CPU_PRESET = "cpu"
"""The preset a training run without a GPU takes (navtrain.train_cli)."""


@dataclass
class SizingPreset:
    """A named sizing of a training run: it replaces env.num_envs, runner.max_iterations and
    algorithm.num_mini_batches when chosen."""

    num_envs: int
    max_iterations: int
    num_mini_batches: int


def _default_presets() -> dict[str, SizingPreset]:
    return {CPU_PRESET: SizingPreset(num_envs=512, max_iterations=500, num_mini_batches=4)}  # 2 cores


# --------------------------------------------------------------------------------------------
# Randomisation: the trained range [low, high] of every param of navsim.randomization's terms
# (their units, bounds and severities live in that registry).


@dataclass(eq=False)
class RandParams(Table):
    """Params of a randomisation term, each a range ``[low, high]`` drawn per world per episode."""


@dataclass(eq=False)
class ActuatorLagParams(RandParams):
    tau: Range = (0.02, 0.12)  # [s] first-order time constant


@dataclass(eq=False)
class AccelLimitParams(RandParams):
    linear: Range = (2.5, 6.0)  # [m/s^2] per body axis (vx, vy)
    angular: Range = (3.2, 8.0)  # [rad/s^2]


@dataclass(eq=False)
class SubstepsParams(RandParams):
    substeps: Range = (0.0, 2.0)  # [physics substeps], whole numbers


@dataclass(eq=False)
class LidarNoiseParams(RandParams):
    std: Range = (0.005, 0.03)  # [m]


@dataclass(eq=False)
class LidarBiasParams(RandParams):
    offset: Range = (-0.02, 0.02)  # [m]
    scale: Range = (0.98, 1.02)


@dataclass(eq=False)
class ProbParams(RandParams):
    prob: Range = (0.0, 0.05)  # per beam per scan


@dataclass(eq=False)
class LidarYawParams(RandParams):
    deg: Range = (-2.0, 2.0)  # [deg]


@dataclass(eq=False)
class OdomTwistParams(RandParams):
    noise_std: Range = (0.0, 0.05)  # [m/s, rad/s]
    scale: Range = (0.95, 1.05)


@dataclass
class RandTermCfg:
    """One randomisation term: on/off and its params."""

    enabled: bool = True
    params: RandParams = field(default_factory=RandParams)


def _rand(params: type[RandParams], **ranges: Range) -> Any:
    return field(default_factory=lambda: RandTermCfg(True, params(**ranges)))


@dataclass(eq=False)
class RandTermsCfg(Table):
    """Every randomisation term (navsim.randomization), in registry order."""

    actuator_lag: RandTermCfg = _rand(ActuatorLagParams)
    accel_limit: RandTermCfg = _rand(AccelLimitParams)
    command_latency: RandTermCfg = _rand(SubstepsParams, substeps=(0.0, 2.0))
    observation_latency: RandTermCfg = _rand(SubstepsParams, substeps=(0.0, 2.0))
    control_jitter: RandTermCfg = _rand(SubstepsParams, substeps=(0.0, 1.0))
    lidar_noise: RandTermCfg = _rand(LidarNoiseParams)
    lidar_bias: RandTermCfg = _rand(LidarBiasParams)
    lidar_dropout: RandTermCfg = _rand(ProbParams, prob=(0.0, 0.05))
    lidar_spurious: RandTermCfg = _rand(ProbParams, prob=(0.0, 0.01))
    lidar_yaw: RandTermCfg = _rand(LidarYawParams)
    odom_twist: RandTermCfg = _rand(OdomTwistParams)


@dataclass
class RandomizationCfg:
    """What a real base does differently from the simulator, drawn per world per episode.

    ``enabled: false`` (or every term off) leaves the simulator exactly as without this section."""

    enabled: bool = True
    # Share of episodes (per world, drawn at reset) that run without any perturbation: the
    # unperturbed simulator stays inside the training distribution.
    nominal_share: float = 0.25
    terms: RandTermsCfg = field(default_factory=RandTermsCfg)


@dataclass
class NavConfig:
    env: EnvCfg = field(default_factory=EnvCfg)
    randomization: RandomizationCfg = field(default_factory=RandomizationCfg)
    observations: ObservationsCfg = field(default_factory=ObservationsCfg)
    rewards: RewardsCfg = field(default_factory=RewardsCfg)
    algorithm: AlgorithmCfg = field(default_factory=AlgorithmCfg)
    model: ModelCfg = field(default_factory=ModelCfg)
    runner: RunnerCfg = field(default_factory=RunnerCfg)
    presets: dict[str, SizingPreset] = field(default_factory=_default_presets)
