"""Cross-field checks of a :class:`~navsim.config.NavConfig` that a type alone cannot express.

:func:`validate` runs them all (loading calls it on every config); each error is a ConfigError (or
the observation registry's ObservationConfigError, a ValueError) naming the key.
"""

from __future__ import annotations

from navcontract.base import BaseError
from navsim.config import ConfigError, EnvCfg, NavConfig
from navsim.contract_objects import action_scaling, base_spec, scan_options
from navsim.families import FAMILIES, active_families
from navsim.grid_planner import CAP_MARGIN
from navsim.observations import validate_observation_cfg
from navsim.randomization import validate_randomization_cfg
from navsim.sectors import SectorRays
from navsim.world_pool import CERTIFY


def validate(cfg: NavConfig) -> None:
    """Every check of this module, in order: sizes, the env, the robot base, the world families, the
    observation terms, the randomisation ranges."""
    _check_sizes(cfg)
    _check_env(cfg.env)
    _check_robot(cfg)
    _check_lidar(cfg.env)
    validate_worlds_cfg(cfg.env)
    validate_observation_cfg(cfg.observations)
    validate_randomization_cfg(cfg.randomization, cfg.env)


def _check_sizes(cfg: NavConfig) -> None:
    """Sizes and the learning rate are > 0 (NaN is refused too), the presets' as well; the action
    noise's floor lies in [0, init_noise_std)."""
    positive = {
        "algorithm.learning_rate": cfg.algorithm.learning_rate,
        "env.num_envs": cfg.env.num_envs,
        "runner.num_steps_per_env": cfg.runner.num_steps_per_env,
        "runner.save_interval": cfg.runner.save_interval,
        "algorithm.num_learning_epochs": cfg.algorithm.num_learning_epochs,
        "algorithm.num_mini_batches": cfg.algorithm.num_mini_batches,
    }
    for name, preset in cfg.presets.items():
        positive[f"presets.{name}.num_envs"] = preset.num_envs
        positive[f"presets.{name}.num_mini_batches"] = preset.num_mini_batches
    for key, value in positive.items():
        if not value > 0:  # also refuses NaN
            raise ConfigError(f"{key} must be > 0, got {value}")
    m = cfg.model
    if not 0 <= m.min_noise_std < m.init_noise_std:  # also refuses NaN
        raise ConfigError(
            f"model.min_noise_std must be >= 0 and below model.init_noise_std ({m.init_noise_std}), got {m.min_noise_std}"
        )


def _check_env(e: EnvCfg) -> None:
    if e.physics_substeps < 1:
        raise ConfigError("env.physics_substeps must be >= 1")
    if e.control_period <= 0:
        raise ConfigError("env.control_period must be > 0")
    lo, hi = e.room.num_obstacles
    if not 0 <= lo <= hi <= e.room.num_cylinder_slots + e.room.num_box_slots:
        raise ConfigError("env.room.num_obstacles must satisfy 0 <= min <= max <= num_cylinder_slots + num_box_slots")
    if e.robot.radius <= 0 or 2 * (e.robot.radius + e.room.wall_margin) >= e.room.size:
        raise ConfigError("env.robot.radius must be > 0 and the robot must fit in the room with its wall margin")


def _check_robot(cfg: NavConfig) -> None:
    """``env.robot`` is a usable base (:class:`navcontract.base.BaseSpec`); a holonomic one has one speed
    limit (its action scales every axis by ``v_max``)."""
    r = cfg.env.robot
    try:
        base = base_spec(cfg)
        action_scaling(cfg)
    except (BaseError, ValueError) as err:
        raise ConfigError(str(err)) from None
    if base.holonomic and not r.v_backward == r.v_lateral == r.v_max:
        raise ConfigError(
            f"env.robot: a holonomic base has one speed limit (its action scales every axis by v_max): "
            f"v_backward {r.v_backward} and v_lateral {r.v_lateral} must equal v_max {r.v_max}"
        )


def _check_lidar(e: EnvCfg) -> None:
    lidar = e.lidar
    if lidar.num_beams < 1 or lidar.max_range <= 0:
        raise ConfigError("env.lidar needs num_beams >= 1 and max_range > 0")
    if lidar.rays_per_beam < 0:
        raise ConfigError(f"env.lidar.rays_per_beam must be >= 0 (0 = exact), got {lidar.rays_per_beam}")
    if lidar.noise_beams < 1:
        raise ConfigError(f"env.lidar.noise_beams must be >= 1 (noisy readings per sector), got {lidar.noise_beams}")
    if not 0.0 < lidar.fov_deg <= 360.0:
        raise ConfigError(f"env.lidar.fov_deg must be in (0, 360], got {lidar.fov_deg}")
    try:
        scan_options(lidar)
    except ValueError as err:
        raise ConfigError(f"env.lidar.fov_fill: {err}") from None
    try:
        SectorRays(lidar.num_beams, lidar.rays_per_beam, lidar.fov_deg)
    except ValueError as err:
        raise ConfigError(f"env.lidar: {err}") from None


def validate_worlds_cfg(cfg: EnvCfg) -> None:
    """``env.worlds``: known families with shares, the curriculum, the path rule, the pools."""
    w = cfg.worlds
    for name, share in w.families.items():
        if name not in FAMILIES:
            raise ConfigError(f"env.worlds.families: unknown family '{name}' (known: {', '.join(FAMILIES)})")
        if not share >= 0:
            raise ConfigError(f"env.worlds.families.{name} must be >= 0, got {share}")
    if not active_families(w):
        raise ConfigError("env.worlds.families: at least one family needs a share > 0")
    c = w.curriculum
    if c.levels < 1 or not 0 <= c.start_level < c.levels:
        raise ConfigError(
            f"env.worlds.curriculum: need levels >= 1 and 0 <= start_level < levels, got {c.levels}, {c.start_level}"
        )
    if not 0.0 <= w.path_following <= 1.0:
        raise ConfigError(f"env.worlds.path_following must be in [0, 1], got {w.path_following}")
    for key in ("lookahead", "search_window", "grid_resolution"):
        if not getattr(w, key) > 0:
            raise ConfigError(f"env.worlds.{key} must be > 0, got {getattr(w, key)}")
    for key in ("pool_size", "refresh_interval", "path_points"):
        if getattr(w, key) < (2 if key == "path_points" else 1):
            raise ConfigError(f"env.worlds.{key} is too small: {getattr(w, key)}")
    if not 0.0 <= w.path_clearance <= CAP_MARGIN:
        raise ConfigError(f"env.worlds.path_clearance must be in [0, {CAP_MARGIN}] m, got {w.path_clearance}")
    if w.certify not in CERTIFY:
        raise ConfigError(f"env.worlds.certify must be one of {' | '.join(CERTIFY)}, got {w.certify!r}")
    if w.refresh_size < 0 or w.refresh_size > w.pool_size:
        raise ConfigError(f"env.worlds.refresh_size must be in [0, pool_size], got {w.refresh_size}")
    _check_family_sizes(cfg)


def _check_family_sizes(cfg: EnvCfg) -> None:
    """The active families fit the robot, their grids and the obstacle slots."""
    w = cfg.worlds
    active = active_families(w)
    k = w.corridors
    if "corridors" in active:
        if k.cols < 2 or k.rows < 1 or k.cell - k.wall_thickness <= 2 * cfg.robot.radius + 0.1:
            raise ConfigError(
                "env.worlds.corridors: need cols >= 2, rows >= 1 and corridors wider than the robot + 0.1 m"
            )
        if not k.doorway_width[0] > 2 * cfg.robot.radius or k.doorway_width[1] > k.cell - k.wall_thickness:
            raise ConfigError(
                "env.worlds.corridors.doorway_width must lie between the robot's diameter and the corridor width"
            )
    cl = w.clutter
    if "clutter" in active:
        if cl.length - 2 * cl.end_zone < cl.cell or cl.width < 2 * cl.cell:
            raise ConfigError("env.worlds.clutter: the arena is too small for its grid and end zones")
        if cl.end_zone < 2 * (cfg.robot.radius + cfg.room.clearance) + 0.2:
            raise ConfigError("env.worlds.clutter.end_zone is too short for a start pose with its clearance")
    a = w.arenas
    if "arenas" in active:
        if not 0 <= a.num_obstacles[0] <= a.num_obstacles[1] <= cfg.room.num_cylinder_slots + cfg.room.num_box_slots:
            raise ConfigError("env.worlds.arenas.num_obstacles must fit the rooms' obstacle slots")
        if 2 * (cfg.robot.radius + cfg.room.wall_margin) >= a.size:
            raise ConfigError("env.worlds.arenas.size is too small for the robot and its wall margin")
