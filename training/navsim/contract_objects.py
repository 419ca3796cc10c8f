"""The contract objects of a training config: the one place the training config meets the contract.

The robot side (``navcontract``, ``navdeploy``, the ROS 2 node) never reads a training config; it
reads the bundle's contract. This module builds every typed contract object from a typed
:class:`~navsim.config.NavConfig` (attributes, not keys): the sensor constants and the observation
spec the policy reads, the action scaling, the collision guard, the robot's response (and the
command smoother's limits it gives), the path-following rule it was trained with, the scan rule for
unseen sectors, and the whole contract
of a bundle (:func:`bundle_contract`). Training, evaluation and export take them from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from navcontract.action import ActionScaling
from navcontract.bundle import make_contract
from navcontract.guard import GuardRule
from navcontract.response import RobotResponse
from navcontract.scan import ScanOptions
from navcontract.spec import PolicySpec, policy_spec_from_terms
from navcontract.subgoal import TrainedPathFollowing
from navcontract.terms import SensorDims
from navdeploy.smoother import AccelLimits
from navsim.config import EnvCfg, LidarCfg, NavConfig, ObservationsCfg

RANDOMIZATION = "randomization.terms"
"""Where the trained ranges sit in the config (the errors of :func:`robot_response` name them)."""


def sensor_dims(cfg: NavConfig) -> SensorDims:
    """The constants the observation terms scale by: ``env.lidar`` and ``env.robot``."""
    e = cfg.env
    return SensorDims(
        num_beams=int(e.lidar.num_beams),
        max_range=float(e.lidar.max_range),
        v_max=float(e.robot.v_max),
        omega_max=float(e.robot.omega_max),
    )


def action_scaling(cfg: NavConfig) -> ActionScaling:
    """Raw action -> body-frame command: ``env.robot``."""
    r = cfg.env.robot
    return ActionScaling(
        v_max=float(r.v_max), omega_max=float(r.omega_max), limit_planar_speed=bool(r.limit_planar_speed)
    )


def policy_terms(observations: ObservationsCfg) -> dict[str, dict[str, Any]]:
    """``observations.policy`` as the contract's table of terms (``{name: {enabled, params}}``)."""
    return {name: {"enabled": t.enabled, "params": dict(t.params)} for name, t in observations.policy.items()}


def policy_spec(cfg: NavConfig) -> PolicySpec:
    """The policy observation spec (its fingerprint is the bundle's): the terms of
    ``observations.policy`` over :func:`sensor_dims`."""
    return policy_spec_from_terms(policy_terms(cfg.observations), sensor_dims(cfg))


def guard_rule(env: EnvCfg) -> GuardRule | None:
    """The guard the policy drives through (``env.guard`` with the robot's radius, after the command
    smoother when ``env.smoother`` is on), or None when off."""
    g = env.guard
    if not g.enabled:
        return None
    return GuardRule(
        radius=env.robot.radius,
        margin=g.margin,
        headway=g.headway,
        decel=g.decel,
        slide=g.slide,
        unseen_clearance=g.unseen_clearance,
        after_smoother=env.smoother.enabled,
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
    return {
        "rule": "each beam: the minimum over its sector (the robot's rule)",
        "rays_per_beam": lidar.rays_per_beam,
        "fov_fill": lidar.fov_fill,
        "noise_std": lidar.noise_std,
    }


@dataclass(frozen=True)
class ContractObjects:
    """The typed sections of a bundle's contract that come from the training config."""

    spec: PolicySpec
    scaling: ActionScaling
    response: RobotResponse
    path_following: TrainedPathFollowing
    guard: GuardRule | None

    @classmethod
    def of(cls, cfg: NavConfig) -> ContractObjects:
        """Every object of ``cfg``; ResponseError / PathFollowingError / ValueError naming the key."""
        return cls(
            spec=policy_spec(cfg),
            scaling=action_scaling(cfg),
            response=robot_response(cfg),
            path_following=path_following(cfg),
            guard=guard_rule(cfg.env),
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
    )
