"""The contract objects of a training config: the one place the training config meets the contract.

The robot side (``navcontract``, ``navdeploy``, the ROS 2 node) never reads a training config; it
reads the bundle's contract. This module builds every typed contract object from a typed
:class:`~navsim.config.NavConfig` (attributes, not keys): the sensor constants and the observation
spec the policy reads, the robot base (:func:`base_spec`), the action scaling, the collision guard,
the robot's response (and the command smoother's limits it gives), the path-following rule it was
trained with, the scan rule for unseen sectors, and the whole contract of a bundle
(:func:`bundle_contract`). Training, evaluation and export take them from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from navcontract.action import ActionScaling
from navcontract.base import DEFAULT_BASE, DIFF_DRIVE, BaseError, BaseSpec, load_base
from navcontract.bundle import make_contract
from navcontract.guard import GuardRule, response_reaction
from navcontract.response import RobotResponse
from navcontract.scan import ScanOptions
from navcontract.spec import PolicySpec, policy_spec_from_terms
from navcontract.subgoal import TrainedPathFollowing
from navcontract.terms import SensorDims
from navdeploy.smoother import AccelLimits
from navsim.config import EnvCfg, LidarCfg, NavConfig, ObservationsCfg

RANDOMIZATION = "randomization.terms"
"""Where the trained ranges sit in the config (the errors of :func:`robot_response` name them)."""

ROBOT_KEYS = {"v_forward": "v_max"}
"""Keys of a base file (:meth:`navcontract.base.BaseSpec.keys`) that ``env.robot`` names otherwise."""


def robot_key(base_key: str) -> str:
    """The ``env.robot`` field of a base file's key."""
    return ROBOT_KEYS.get(base_key, base_key)


def robot_fields(base: BaseSpec) -> dict[str, Any]:
    """Every ``env.robot`` field a base gives (all but ``base`` itself)."""
    return {robot_key(k): getattr(base, k) for k in BaseSpec.keys()}


def base_spec(cfg: NavConfig) -> BaseSpec:
    """The robot base of ``env.robot`` (the contract's ``base`` section), named after ``env.robot.base``:
    the preset's (or base file's) name when every value is the file's, ``<name>+overrides`` when the
    config changed any, ``<name>+unverified`` when the file cannot be read here (a stored config of a
    base file on another machine). BaseError naming the ``env.robot`` key if a value is unusable."""
    r = cfg.env.robot
    values = {k: getattr(r, robot_key(k)) for k in BaseSpec.keys()}
    try:
        preset: BaseSpec | None = load_base(r.base)
    except BaseError:
        preset = None
    if preset is None:
        name = f"{Path(r.base).stem}+unverified"
    elif values == {k: getattr(preset, k) for k in BaseSpec.keys()}:
        name = preset.name
    else:
        name = f"{preset.name}+overrides"
    try:
        return BaseSpec.checked(values, name=name, where="env.robot")
    except BaseError as err:
        raise BaseError(str(err).replace("env.robot.v_forward", "env.robot.v_max")) from None


def sensor_dims(cfg: NavConfig) -> SensorDims:
    """The constants the observation terms scale by: ``env.lidar`` and ``env.robot``."""
    e = cfg.env
    return SensorDims(
        num_beams=int(e.lidar.num_beams),
        max_range=float(e.lidar.max_range),
        v_max=float(e.robot.v_max),
        omega_max=float(e.robot.omega_max),
    )


def base_overrides(base: BaseSpec) -> list[str]:
    """Dotted config overrides that make ``env.robot`` the given base (a bundle's ``Contract.base``):
    its preset (the name before ``+``, when it is a preset or file this machine has; else the
    holonomic disc) with every field stated, so the values are the base's whatever the file says."""
    root = base.name.split("+")[0]
    try:
        load_base(root)
    except BaseError:
        root = DEFAULT_BASE
    return [f"env.robot.base={root}", *(f"env.robot.{k}={v}" for k, v in robot_fields(base).items())]


def action_scaling(cfg: NavConfig) -> ActionScaling:
    """Raw action -> body-frame command: ``env.robot`` (a diff drive's backward limit too)."""
    r = cfg.env.robot
    return ActionScaling(
        v_max=float(r.v_max),
        omega_max=float(r.omega_max),
        limit_planar_speed=bool(r.limit_planar_speed),
        drive=r.drive,
        v_backward=float(r.v_backward) if r.drive == DIFF_DRIVE else None,
    )


def policy_terms(observations: ObservationsCfg) -> dict[str, dict[str, Any]]:
    """``observations.policy`` as the contract's table of terms (``{name: {enabled, params}}``)."""
    return {name: {"enabled": t.enabled, "params": dict(t.params)} for name, t in observations.policy.items()}


def policy_spec(cfg: NavConfig) -> PolicySpec:
    """The policy observation spec (its fingerprint is the bundle's): the terms of
    ``observations.policy`` over :func:`sensor_dims`."""
    return policy_spec_from_terms(policy_terms(cfg.observations), sensor_dims(cfg))


def guard_geometry(env: EnvCfg) -> GuardRule:
    """The guard's rule as ``env.guard`` and the robot's radius state it, on or off, without what
    the base response adds (its reaction time): what decides where the robot may pass
    (:meth:`navcontract.guard.GuardRule.passing_clearance`)."""
    g = env.guard
    return GuardRule(
        radius=env.robot.radius,
        margin=g.margin,
        headway=g.headway,
        decel=g.decel,
        slide=g.slide,
        unseen_clearance=g.unseen_clearance,
        momentum=g.momentum,
        steer=g.steer,
        sweep_lag=g.sweep_lag,
        axis_brake=g.axis_brake,
        keep_sight=g.keep_sight,
    )


def guard_rule(cfg: NavConfig) -> GuardRule | None:
    """The guard the policy drives through (:func:`guard_geometry`, after the command smoother when
    ``env.smoother`` is on, reacting in :func:`navcontract.guard.reaction_time` of the control
    period and the trained base response), or None when off."""
    env = cfg.env
    if not env.guard.enabled:
        return None
    return replace(
        guard_geometry(env),
        after_smoother=env.smoother.enabled,
        reaction=response_reaction(env.control_period, robot_response(cfg)),
    )


def smoother_limits(cfg: NavConfig) -> AccelLimits:
    """The env's command smoother (``env.smoother``): the limits the robot's velocity smoother uses by
    default, the contract's ``robot_response.accel_limit``; none (the identity) when off or when the
    randomisation trains no acceleration limit."""
    if not cfg.env.smoother.enabled:
        return AccelLimits()
    response = robot_response(cfg)
    return AccelLimits(response.accel_limit_linear, response.accel_limit_angular)


def scan_options(lidar: LidarCfg) -> ScanOptions:
    """How the robot fills the sectors outside the field of view: ``env.lidar.fov_fill``."""
    return ScanOptions(fill=lidar.fov_fill, fill_value=lidar.fov_fill_value)


def robot_response(cfg: NavConfig) -> RobotResponse:
    """How the base answered in training (the contract's ``robot_response``): the ranges of the
    enabled base terms of ``randomization`` over the physics substep ``env.control_period /
    env.physics_substeps``. ResponseError naming the config key if a value is unusable."""
    e = cfg.env
    substep = (e.control_period / e.physics_substeps, "env.control_period / env.physics_substeps")
    rand = cfg.randomization
    if not rand.enabled:
        return RobotResponse.checked(False, substep)
    on = {name: term.params for name, term in rand.terms.items() if term.enabled}

    def trained(term: str, key: str) -> tuple[Any, str]:
        value = on[term][key] if term in on else None
        return value, f"{RANDOMIZATION}.{term}.params.{key}"

    return RobotResponse.checked(
        True,
        substep,
        sorted(on),  # config order does not survive JSON written with sorted keys
        {
            "accel_linear": trained("accel_limit", "linear"),
            "accel_angular": trained("accel_limit", "angular"),
            "actuator_tau": trained("actuator_lag", "tau"),
            "command_latency": trained("command_latency", "substeps"),
            "observation_latency": trained("observation_latency", "substeps"),
            "control_jitter": trained("control_jitter", "substeps"),
        },
    )


def path_following(cfg: NavConfig) -> TrainedPathFollowing:
    """The path-following rule training used (``env.worlds.lookahead``, ``.search_window``, and
    the share ``.path_following``); PathFollowingError naming the key if a value is unusable."""
    w = cfg.env.worlds
    return TrainedPathFollowing.checked(
        "env.worlds", w.lookahead, w.search_window, w.path_following, share_key="path_following"
    )


def simulator_lidar(cfg: NavConfig) -> dict[str, Any]:
    """How the simulator rendered the scan: the contract's record ``lidar.simulator``."""
    lidar = cfg.env.lidar
    out: dict[str, Any] = {
        "rule": "each beam: the minimum over its sector (the robot's rule)",
        "rays_per_beam": lidar.rays_per_beam,
        "fov_fill": lidar.fov_fill,
        "noise_std": lidar.noise_std,
    }
    if lidar.noise_beams > 1:  # a sector's noise: the minimum of this many draws
        out["noise_beams"] = lidar.noise_beams
    return out


@dataclass(frozen=True)
class ContractObjects:
    """The typed sections of a bundle's contract that come from the training config."""

    spec: PolicySpec
    base: BaseSpec
    scaling: ActionScaling
    response: RobotResponse
    path_following: TrainedPathFollowing
    guard: GuardRule | None

    @classmethod
    def of(cls, cfg: NavConfig) -> ContractObjects:
        """Every object of ``cfg``; ResponseError / PathFollowingError / BaseError / ValueError naming the key."""
        return cls(
            spec=policy_spec(cfg),
            base=base_spec(cfg),
            scaling=action_scaling(cfg),
            response=robot_response(cfg),
            path_following=path_following(cfg),
            guard=guard_rule(cfg),
        )


def bundle_contract(cfg: NavConfig, normalizer_eps: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The contract (plain JSON data) of a bundle trained with ``cfg``, with the policy's
    normaliser ``eps`` and further top-level keys ``extra`` (the exporter's ``source``)."""
    objects = ContractObjects.of(cfg)
    return make_contract(
        objects.spec,
        objects.scaling,
        cfg.env.control_period,
        cfg.env.goal_tolerance,
        normalizer_eps,
        extra,
        robot_radius=cfg.env.robot.radius,
        trained_fov=math.radians(cfg.env.lidar.fov_deg),
        sim_lidar=simulator_lidar(cfg),
        response=objects.response,
        path_following=objects.path_following,
        guard=objects.guard,
        base=objects.base,
    )
