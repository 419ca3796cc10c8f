"""The contract objects of a training config (navsim.contract_objects): the one place the training
config meets the contract. The robot side reads only the bundle; these are what training writes."""

from __future__ import annotations

import json
import re

import pytest

from navcontract.action import ActionScaling
from navcontract.bundle import parse_contract, read_contract
from navcontract.response import ResponseError, RobotResponse
from navcontract.subgoal import LookaheadRule, PathFollowingError, TrainedPathFollowing
from navcontract.terms import SensorDims
from navdeploy.runtime import ContractError, PolicyRuntime
from navsim.config import ConfigError, NavConfig
from navsim.config_load import config_from_data, load_config, to_dict
from navsim.contract_objects import (
    ContractObjects,
    action_scaling,
    bundle_contract,
    guard_rule,
    path_following,
    policy_spec,
    robot_response,
    sensor_dims,
)
from support.paths import FIXTURE_BUNDLE

A_LIN, A_ANG = 2.5, 3.2  # the low ends of conf/nav.yaml's accel_limit ranges


def test_dims_and_scaling_follow_the_config() -> None:
    cfg = load_config()
    assert sensor_dims(cfg) == SensorDims(num_beams=72, max_range=6.0, v_max=1.5, omega_max=2.0)
    assert action_scaling(cfg) == ActionScaling(v_max=1.5, omega_max=2.0, limit_planar_speed=True)
    cfg = load_config(overrides=["env.robot.v_max=1.0"])
    assert sensor_dims(cfg).v_max == action_scaling(cfg).v_max == 1.0


def test_the_committed_bundle_is_the_spec_of_conf_nav_yaml() -> None:
    contract = read_contract(FIXTURE_BUNDLE)
    cfg = load_config()
    assert policy_spec(cfg).fingerprint() == contract.fingerprint == "23cb46e4de12b7e0"
    assert contract.scaling == action_scaling(cfg)
    assert PolicyRuntime.load(FIXTURE_BUNDLE, spec=policy_spec(cfg)).contract.fingerprint == contract.fingerprint
    with pytest.raises(ContractError, match="num_beams: bundle 72 vs runtime 360"):
        PolicyRuntime.load(FIXTURE_BUNDLE, spec=policy_spec(load_config(overrides=["env.lidar.num_beams=360"])))


def test_guard_rule_is_the_configured_guard_with_the_robot_radius() -> None:
    rule = guard_rule(load_config(overrides=["env.robot.radius=0.25"]))
    assert (rule.radius, rule.margin, rule.headway, rule.decel, rule.slide) == (0.25, 0.01, 0.5, 2.5, True)
    # conf/nav.yaml: control period 0.1 s + latency budget (2 + 2 + 1 substeps of 0.02 s) + tau up to 0.12 s
    assert rule.reaction == pytest.approx(0.1 + 0.1 + 0.12)
    assert guard_rule(load_config(overrides=["randomization.enabled=false"])).reaction == pytest.approx(0.1)
    assert guard_rule(load_config(overrides=["env.guard.enabled=false"])) is None


# --------------------------------------------------------------------------- robot_response


def test_robot_response_of_the_randomisation() -> None:
    """conf/nav.yaml's base terms become the section's ranges; how a section reads and round-trips
    is the contract's own test (tests/runtime/test_velocity_smoother.py)."""
    cfg = load_config()
    got = robot_response(cfg)
    assert got == RobotResponse(
        randomized=True,
        physics_substep=pytest.approx(0.02),
        terms=tuple(sorted(cfg.randomization.terms)),
        accel_linear=(A_LIN, 6.0),
        accel_angular=(A_ANG, 8.0),
        actuator_tau=(0.02, 0.12),
        command_latency=(0, 2),
        observation_latency=(0, 2),
        control_jitter=(0, 1),
    )
    assert got.accel_limit_linear == A_LIN and got.latency_budget == pytest.approx((2 + 2 + 1) * 0.02)


@pytest.mark.parametrize(
    "overrides",
    [
        ["randomization.enabled=false"],
        [f"randomization.terms.{t}.enabled=false" for t in NavConfig().randomization.terms],
    ],
    ids=["disabled", "every-term-off"],
)
def test_no_base_randomisation_means_nothing_trained(overrides: list[str]) -> None:
    r = robot_response(load_config(overrides=overrides))
    assert r.accel_limit_linear is None and r.accel_limit_angular is None and r.actuator_tau is None
    assert r.latency_budget == 0.0 and r.randomized == (overrides[0] != "randomization.enabled=false")


def test_a_stored_config_without_the_section_trained_nothing() -> None:
    data = to_dict(load_config())
    del data["randomization"]
    r = robot_response(config_from_data(data))
    assert not r.randomized and r.terms == () and r.latency_budget == 0.0


def test_terms_switched_off_leave_their_ranges_out() -> None:
    cfg = load_config(
        overrides=["randomization.terms.accel_limit.enabled=false", "randomization.terms.command_latency.enabled=false"]
    )
    r = robot_response(cfg)
    assert r.randomized and "accel_limit" not in r.terms and "observation_latency" in r.terms
    assert r.accel_limit_linear is None and r.accel_limit_angular is None
    assert r.latency_budget == pytest.approx((2 + 1) * 0.02)


@pytest.mark.parametrize(
    "term, param, value, needle",
    [
        ("accel_limit", "linear", (0.0, 6.0), "randomization.terms.accel_limit.params.linear"),
        ("accel_limit", "linear", (6.0, 2.5), "randomization.terms.accel_limit.params.linear"),
        ("actuator_lag", "tau", (float("nan"), 0.1), "randomization.terms.actuator_lag.params.tau"),
        ("command_latency", "substeps", (0.0, 1.5), "whole substeps"),
    ],
)
def test_unusable_ranges_are_refused_naming_the_config_key(term: str, param: str, value, needle: str) -> None:
    cfg = NavConfig()  # unvalidated: loading would refuse these first
    setattr(cfg.randomization.terms[term].params, param, value)
    with pytest.raises(ResponseError, match=re.escape(needle)):
        robot_response(cfg)


# --------------------------------------------------------------------------- path_following


def test_path_following_of_env_worlds() -> None:
    cfg = load_config()
    w = cfg.env.worlds
    got = path_following(cfg)
    assert (got.rule.lookahead, got.rule.search_window, got.trained_share) == (w.lookahead, w.search_window, 0.0)
    cfg = load_config(
        overrides=["env.worlds.lookahead=0.7", "env.worlds.search_window=3", "env.worlds.path_following=0.25"]
    )
    assert path_following(cfg) == TrainedPathFollowing(LookaheadRule(0.7, 3.0), 0.25)


def test_a_stored_config_without_env_worlds_never_followed_a_path() -> None:
    data = to_dict(load_config())
    del data["env"]["worlds"]
    assert path_following(config_from_data(data)) == TrainedPathFollowing(LookaheadRule(), 0.0)


@pytest.mark.parametrize(
    "key, value, needle",
    [
        ("lookahead", -0.5, "env.worlds.lookahead = -0.5 must be finite and >= 0"),
        ("search_window", 0.0, "env.worlds.search_window = 0.0 must be finite and > 0"),
        ("path_following", 1.5, "env.worlds.path_following = 1.5 must be finite and >= 0 and <= 1"),
    ],
)
def test_unusable_rule_is_refused_naming_the_config_key(key: str, value: float, needle: str) -> None:
    cfg = NavConfig()  # unvalidated: loading would refuse these first
    setattr(cfg.env.worlds, key, value)
    with pytest.raises(PathFollowingError, match=re.escape(needle)):
        path_following(cfg)


# --------------------------------------------------------------------------- the whole contract


def test_bundle_contract_carries_every_section_and_parses() -> None:
    cfg = load_config()
    data = bundle_contract(cfg, 1e-8, {"source": {"nav_config": to_dict(cfg)}})
    contract = parse_contract(json.loads(json.dumps(data)))
    objects = ContractObjects.of(cfg)
    assert contract.spec == objects.spec and contract.scaling == objects.scaling
    assert contract.response == objects.response and contract.path_following == objects.path_following
    assert contract.guard == objects.guard and contract.robot_radius == cfg.env.robot.radius
    assert data["lidar"]["simulator"]["rays_per_beam"] == cfg.env.lidar.rays_per_beam
    assert "noise_beams" not in data["lidar"]["simulator"]  # one draw per sector: as every bundle before it
    assert config_from_data(data["source"]["nav_config"]) == cfg


def test_a_sectors_noise_of_several_beams_is_recorded_and_zero_beams_refused() -> None:
    cfg = load_config(overrides=["env.lidar.noise_beams=10"])
    data = bundle_contract(cfg, 1e-8, {"source": {"nav_config": to_dict(cfg)}})
    assert data["lidar"]["simulator"]["noise_beams"] == 10
    with pytest.raises(ConfigError, match=r"env\.lidar\.noise_beams must be >= 1"):
        load_config(overrides=["env.lidar.noise_beams=0"])
