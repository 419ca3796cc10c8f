"""Observation registry and groups: widths, order, YAML switches, shape checks, values."""

from __future__ import annotations

import dataclasses
import inspect
import math

import pytest
import torch
import yaml

from navcontract.spec import SpecError
from navcontract.terms import DEPLOYABLE, DEPLOYABLE_TERMS, SIM_ONLY, ObsContext, SensorDims
from navsim.config_load import DEFAULT_CONFIG, load_config
from navsim.observations import (
    SIM_ONLY_TERMS,
    ObservationConfigError,
    ObservationManager,
    SimTruth,
    check_actor_groups,
)
from support.simenv import empty_rooms, nav_config

DIMS = SensorDims(num_beams=72, max_range=6.0, v_max=1.5, omega_max=2.0)
POLICY_LAYOUT = [("lidar", 72), ("goal_polar", 3), ("vel_body", 2), ("omega", 1)]
PRIVILEGED_LAYOUT = [("truth_clearance", 1), ("truth_scan_clean", 72), ("truth_contact", 1), ("truth_nearest_dir", 2)]


def manager(*overrides: str, num_envs: int = 2) -> ObservationManager:
    return ObservationManager(nav_config(*overrides).observations, DIMS, num_envs, "cpu")


def hand_inputs() -> tuple[ObsContext, SimTruth]:
    """Two robots with values whose observation is easy to work out by hand."""
    scan = torch.full((2, 72), 3.0)
    scan[1, 0] = 9.0  # beyond max range: clipped to 1
    ctx = ObsContext(
        scan=scan,
        pose=torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, math.pi / 2]]),
        twist=torch.tensor([[0.75, -0.3, 1.0], [0.0, 0.0, -2.0]]),
        goal=torch.tensor([[3.0, 4.0], [1.0, 12.0]]),  # 5 m at atan2(4, 3); 11 m straight ahead
        prev_action=torch.tensor([[0.1, 0.2, 0.3], [-1.0, 0.0, 1.0]]),
        dims=DIMS,
    )
    truth = SimTruth(
        clearance=torch.tensor([0.5, 0.02]),
        scan_clean=torch.full((2, 72), 1.5),
        contact=torch.tensor([0.0, 0.0]),
        nearest_dir_body=torch.tensor([[1.0, 0.0], [0.0, -1.0]]),
    )
    return ctx, truth


def test_group_widths_78_76_and_critic_154():
    mgr = manager()
    assert mgr.group_dims() == {"policy": 78, "privileged": 76}
    groups = mgr.obs_groups()
    assert groups == {"actor": ["policy"], "critic": ["policy", "privileged"]}
    assert sum(mgr.group_dims()[g] for g in groups["critic"]) == 154
    assert mgr.term_layout("policy") == POLICY_LAYOUT
    assert mgr.term_layout("privileged") == PRIVILEGED_LAYOUT


def test_env_observations_have_the_declared_shapes(make_env):
    env = make_env(4, "env.init_at_random_ep_len=false")
    obs = env.get_observations()
    assert obs["policy"].shape == (4, 78) and obs["privileged"].shape == (4, 76)
    obs, _, _, _ = env.step(torch.zeros(4, 3))
    assert obs["policy"].shape == (4, 78) and obs["privileged"].shape == (4, 76)
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(obs["privileged"]).all()


def test_critic_is_policy_only_when_privileged_disabled():
    mgr = manager("observations.privileged_enabled=false")
    assert mgr.obs_groups() == {"actor": ["policy"], "critic": ["policy"]}


def test_privileged_group_in_the_actor_is_an_error():
    with pytest.raises(ObservationConfigError, match="privileged"):
        check_actor_groups(["policy", "privileged"])
    with pytest.raises(ObservationConfigError, match="privileged"):
        check_actor_groups(["privileged"])
    with pytest.raises(ObservationConfigError, match="unknown"):
        check_actor_groups(["policy", "camera"])
    check_actor_groups(["policy"])  # the only legal actor input


def test_provenance_is_in_the_signature():
    for t in DEPLOYABLE_TERMS.values():
        assert t.provenance == DEPLOYABLE
        assert list(inspect.signature(t.fn).parameters) == ["ctx", "params"]
    for t in SIM_ONLY_TERMS.values():
        assert t.provenance == SIM_ONLY
        assert list(inspect.signature(t.fn).parameters) == ["ctx", "truth", "params"]


def test_yaml_order_does_not_change_output_order(tmp_path):
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["observations"]["policy"] = dict(reversed(list(data["observations"]["policy"].items())))
    data["observations"]["policy"]["action_prev"] = {"enabled": True}
    data["observations"]["privileged"] = dict(reversed(list(data["observations"]["privileged"].items())))
    path = tmp_path / "nav.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert list(yaml.safe_load(path.read_text())["observations"]["policy"])[0] == "action_prev"
    mgr = ObservationManager(load_config(path).observations, DIMS, 2, "cpu")
    assert mgr.term_layout("policy") == POLICY_LAYOUT + [("action_prev", 3)]
    assert mgr.term_layout("privileged") == PRIVILEGED_LAYOUT
    ctx, truth = hand_inputs()
    out = mgr.compute(ctx, truth)
    assert out["policy"].shape == (2, 81)
    assert torch.equal(out["policy"][:, 78:], ctx.prev_action)  # action_prev last, as registered


def test_yaml_switches_terms_off_and_changes_params():
    mgr = manager(
        "observations.policy.vel_body.enabled=false", "observations.privileged.truth_scan_clean.enabled=false"
    )
    assert mgr.term_layout("policy") == [("lidar", 72), ("goal_polar", 3), ("omega", 1)]
    assert mgr.group_dims() == {"policy": 76, "privileged": 4}
    ctx, truth = hand_inputs()
    out = mgr.compute(ctx, truth)
    assert out["policy"].shape == (2, 76) and out["privileged"].shape == (2, 4)
    # distance_scale 10 instead of 5 halves the scaled goal distance (5 m -> 0.5; 11 m -> 1.1).
    scaled = manager("observations.policy.goal_polar.params.distance_scale=10.0").compute(ctx, truth)
    assert scaled["policy"][:, 72].tolist() == pytest.approx([0.5, 1.1])


@pytest.mark.parametrize(
    "override, match",
    [
        # a term cannot move to another group
        ("observations.policy.truth_clearance.enabled=true", "belongs to the 'privileged' group"),
        ("observations.privileged.lidar.enabled=true", "belongs to the 'policy' group"),
        # an unknown term or param
        ("observations.policy.sonar.enabled=true", "'sonar'"),
        ("observations.privileged.truth_contact.params.near=0.1", r"truth_contact.*near"),
    ],
)
def test_yaml_refuses_a_term_of_another_group_and_unknown_terms_or_params(override: str, match: str):
    with pytest.raises(ObservationConfigError, match=match):
        load_config(overrides=[override])


def test_groups_are_zeros_of_declared_shape_before_any_data():
    mgr = manager(num_envs=5)
    zeros = mgr.zeros()
    assert zeros["policy"].shape == (5, 78) and zeros["privileged"].shape == (5, 76)
    assert not zeros["policy"].any() and not zeros["privileged"].any()


def test_policy_values_by_hand():
    ctx, truth = hand_inputs()
    policy = manager().compute(ctx, truth)["policy"]
    expected_lidar = torch.full((2, 72), 0.5)
    expected_lidar[1, 0] = 1.0
    assert torch.allclose(policy[:, :72], expected_lidar)
    # robot 0: goal (3, 4) from the origin, yaw 0 -> d 5 m -> 1.0, sin 0.8, cos 0.6
    # robot 1: goal 11 m straight ahead (yaw 90 deg, goal on +y) -> min(2.2, 2.0), sin 0, cos 1
    assert torch.allclose(policy[:, 72:75], torch.tensor([[1.0, 0.8, 0.6], [2.0, 0.0, 1.0]]), atol=1e-6)
    assert torch.allclose(policy[:, 75:77], torch.tensor([[0.5, -0.2], [0.0, 0.0]]))  # twist / 1.5
    assert torch.allclose(policy[:, 77], torch.tensor([0.5, -1.0]))  # yaw rate / 2


def test_privileged_values_by_hand():
    ctx, truth = hand_inputs()
    priv = manager().compute(ctx, truth)["privileged"]
    assert priv[:, 0].tolist() == pytest.approx([0.5, 0.02])  # clearance / 1.0, clipped to [0, 1]
    assert torch.allclose(priv[:, 1:73], torch.full((2, 72), 0.25))  # 1.5 / 6
    assert priv[:, 73].tolist() == [0.0, 1.0]  # robot 1 is within near_dist 0.05 of a surface
    assert torch.equal(priv[:, 74:76], truth.nearest_dir_body)
    truth.contact = torch.tensor([1.0, 0.0])
    assert manager().compute(ctx, truth)["privileged"][:, 73].tolist() == [1.0, 1.0]


def test_per_step_shape_check_raises_on_a_bad_policy_term(monkeypatch):
    bad = dataclasses.replace(DEPLOYABLE_TERMS["omega"], fn=lambda ctx, params: ctx.twist[:, 1:3])  # 2 columns
    monkeypatch.setitem(DEPLOYABLE_TERMS, "omega", bad)
    ctx, truth = hand_inputs()
    with pytest.raises(SpecError, match="'omega'"):
        manager().compute(ctx, truth)


def test_per_step_shape_check_raises_on_a_bad_privileged_term():
    mgr = manager()
    tdef, params, width = mgr.privileged_terms[3]
    bad = dataclasses.replace(tdef, fn=lambda ctx, truth, params: truth.nearest_dir_body[:, :1])
    mgr.privileged_terms[3] = (bad, params, width)
    ctx, truth = hand_inputs()
    with pytest.raises(SpecError, match="'truth_nearest_dir'"):
        mgr.compute(ctx, truth)


def test_env_privileged_terms_match_the_room_geometry(make_env):
    env = make_env(2, "env.init_at_random_ep_len=false", "observations.privileged.truth_clearance.params.scale=5.0")
    rooms = empty_rooms(env, start=(3.0, 0.5, 0.0))
    rooms.start[1, 2] = math.pi / 2
    obs = env.reset(rooms)
    priv = obs["privileged"]
    # Nearest surface: the +x wall, 1 m from the centre -> 0.8 m from the shell -> 0.8 / 5.
    assert priv[:, 0].tolist() == pytest.approx([0.16, 0.16], abs=1e-5)
    assert priv[:, 73].tolist() == [0.0, 0.0]
    assert torch.allclose(priv[0, 74:76], torch.tensor([1.0, 0.0]), atol=1e-6)  # ahead
    assert torch.allclose(priv[1, 74:76], torch.tensor([0.0, -1.0]), atol=1e-6)  # to the right


def test_runner_config_refuses_privileged_actor_inputs():
    from navtrain.ppo_config import runner_cfg

    cfg = nav_config()
    good = runner_cfg(cfg, manager().obs_groups())
    assert good["obs_groups"] == {"actor": ["policy"], "critic": ["policy", "privileged"]}
    with pytest.raises(ObservationConfigError, match="privileged"):
        runner_cfg(cfg, {"actor": ["policy", "privileged"], "critic": ["policy", "privileged"]})
