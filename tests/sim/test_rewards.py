"""Reward terms against hand-computed values, the weighted manager, and the env's reward inputs."""

from __future__ import annotations

import pytest
import torch

from navsim.config import ConfigError, RewardsCfg
from navsim.config_load import build
from navsim.rewards import REWARD_TERMS, RewardManager, RewardState
from support.simenv import NO_RANDOMIZATION, empty_rooms, nav_config, place_obstacle

F, T = False, True


def hand_state(**changes) -> RewardState:
    """Three worlds with values chosen so every term has an easy hand-computed answer."""
    values = dict(
        goal_dist=torch.tensor([2.5, 2.2, 1.0]),
        prev_goal_dist=torch.tensor([3.0, 2.0, 1.0]),
        goal_cos=torch.tensor([1.0, -0.5, 0.8]),
        v_forward=torch.tensor([0.75, 1.5, -3.0]),
        action=torch.tensor([[1.0, 0.0, 0.0], [-0.5, -0.5, 0.2], [0.0, 0.0, 0.0]]),
        prev_action=torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.5, 0.2], [0.0, 0.0, 0.0]]),
        surface_clearance=torch.tensor([0.3, 0.1, -0.05]),
        guard_cut=torch.tensor([0.0, 0.5, 1.0]),
        displacement=torch.tensor([0.1, 0.5, 0.1]),
        window_full=torch.tensor([T, T, F]),
        success=torch.tensor([T, F, F]),
        collision=torch.tensor([F, T, F]),
        timeout=torch.tensor([F, F, T]),
        out_of_bounds=torch.tensor([F, F, F]),
        v_max=1.5,
        gamma=0.99,
    )
    values.update(changes)
    return RewardState(**values)


# Unweighted values, worked out by hand from hand_state():
EXPECTED = {
    "goal": [1.0, 0.0, 0.0],  # success flags
    "progress": [0.5, -0.2, 0.0],  # d_prev - d: 3.0-2.5, 2.0-2.2, 1.0-1.0
    "face_goal": [0.5, -0.5, 0.8],  # cos * clip(|v|/1.5): 1*0.5, -0.5*1, 0.8*clip(2)=0.8
    "time": [1.0, 1.0, 1.0],
    "near_obstacle": [0.0, 0.6, 1.0],  # clip((0.25-c)/0.25): -0.2->0, 0.15/0.25, 0.3/0.25->1
    "action_smooth": [1.0, 2.0, 0.0],  # |a-a'|^2: 1, (-1)^2+(-1)^2+0, 0
    "guard_cut": [0.0, 0.5, 1.0],  # the share of v max the guard took off, as it is
    "backward": [0.0, 0.45, 0.05],  # max(0, -0.05 - a_x): a_x = 1, -0.5, (third set below: -0.1)
    "stuck": [1.0, 0.0, 0.0],  # displacement < 0.3 and window full: T, (0.5 moved), (window not full)
    "collision": [0.0, 1.0, 0.0],
    "timeout": [0.0, 0.0, 1.0],
    "out_of_bounds": [0.0, 0.0, 0.0],
}


def _state_for_backward() -> RewardState:
    s = hand_state()
    s.action = s.action.clone()
    s.action[2, 0] = -0.1
    return s


@pytest.mark.parametrize("name", list(REWARD_TERMS))
def test_each_term_matches_hand_computed_values(name):
    tdef = REWARD_TERMS[name]
    state = _state_for_backward() if name == "backward" else hand_state()
    got = tdef.fn(state, dict(RewardsCfg()[name].params))
    assert got.shape == (3,)
    assert torch.allclose(got, torch.tensor(EXPECTED[name]), atol=1e-6), (name, got)


def test_every_registered_term_has_a_hand_case():
    assert set(EXPECTED) == set(REWARD_TERMS)


def test_the_config_has_one_field_per_registered_term_in_registry_order():
    assert list(RewardsCfg()) == list(REWARD_TERMS)


def test_progress_with_potential_discount():
    got = REWARD_TERMS["progress"].fn(hand_state(), {"potential_discount": True})
    # + (1 - 0.99) * d: 0.5 + 0.025, -0.2 + 0.022, 0 + 0.01
    assert torch.allclose(got, torch.tensor([0.525, -0.178, 0.01]), atol=1e-6)


def test_face_goal_standing_still_earns_nothing():
    got = REWARD_TERMS["face_goal"].fn(hand_state(v_forward=torch.zeros(3)), {})
    assert torch.equal(got, torch.zeros(3))


def test_term_params_change_the_values():
    near = REWARD_TERMS["near_obstacle"].fn(hand_state(), {"safe_dist": 0.5})
    assert torch.allclose(near, torch.tensor([0.4, 0.8, 1.0]))  # (0.5-0.3)/0.5, 0.4/0.5, clip(1.1)
    stuck = REWARD_TERMS["stuck"].fn(hand_state(), {"window": 25, "min_move": 0.6})
    assert torch.equal(stuck, torch.tensor([1.0, 1.0, 0.0]))
    back = REWARD_TERMS["backward"].fn(hand_state(), {"thresh": 0.5})
    assert torch.allclose(back, torch.tensor([0.0, 1.0, 0.5]))


def test_manager_weighted_sum_with_the_repository_weights():
    cfg = nav_config()
    manager = RewardManager(cfg.rewards, 3, "cpu")
    total = manager.compute(hand_state())
    # world 0: 15*1 + 2*0.5 + 0.05*0.5 - 0.02 - 0.02*1 - 0.03*1                     = 15.955
    # world 1: 2*-0.2 + 0.05*-0.5 - 0.02 - 0.08*0.6 - 0.02*2 - 0.05*0.45 - 12       = -12.5555
    # world 2: 0.05*0.8 - 0.02 - 0.08*1 - 4                                          = -4.06
    assert torch.allclose(total, torch.tensor([15.955, -12.5555, -4.06]), atol=1e-5)
    assert torch.allclose(manager.last_values["collision"], torch.tensor([0.0, -12.0, 0.0]))
    assert list(manager.last_values) == list(REWARD_TERMS)  # registry order


def test_manager_disables_terms_and_takes_params_from_config():
    cfg = nav_config("rewards.time.enabled=false", "rewards.near_obstacle.params.safe_dist=0.5")
    manager = RewardManager(cfg.rewards, 3, "cpu")
    total = manager.compute(hand_state())
    assert "time" not in manager.last_values
    assert torch.allclose(manager.last_values["near_obstacle"], -0.08 * torch.tensor([0.4, 0.8, 1.0]))
    # Versus the repository weights: +0.02 (no time term), near_obstacle -0.08 * (0.4, 0.2, 0.0) more.
    expected = torch.tensor([15.955, -12.5555, -4.06]) + 0.02 - 0.08 * torch.tensor([0.4, 0.2, 0.0])
    assert torch.allclose(total, expected, atol=1e-5)


def test_manager_uses_the_default_terms_missing_from_the_data():
    manager = RewardManager(build(RewardsCfg, {"goal": {"weight": 1.0}}, "rewards", RewardsCfg()), 3, "cpu")
    manager.compute(hand_state())
    assert torch.allclose(manager.last_values["goal"], torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(manager.last_values["collision"], torch.tensor([0.0, -12.0, 0.0]))
    assert manager.params("stuck") == {"window": 25, "min_move": 0.30}


def test_episode_sums_pop_only_finished_worlds():
    manager = RewardManager(nav_config().rewards, 3, "cpu")
    manager.compute(hand_state())
    manager.compute(hand_state())
    done = torch.tensor([T, F, T])
    sums = manager.close_episodes(done)
    assert torch.allclose(sums["time"], torch.tensor([-0.04, 0.0, -0.04]))
    assert torch.allclose(sums["goal"], torch.tensor([30.0, 0.0, 0.0]))
    after = manager.close_episodes(torch.tensor([T, T, T]))
    assert torch.allclose(after["time"], torch.tensor([0.0, -0.04, 0.0]))


def test_unknown_reward_term_or_param_raises():
    with pytest.raises(ConfigError, match=r"unknown key 'rewards\.colision'"):
        build(RewardsCfg, {"colision": {"weight": -1.0}}, "rewards", RewardsCfg())
    with pytest.raises(
        ConfigError, match=r"unknown key 'rewards\.near_obstacle\.params\.safe' \(known here: safe_dist\)"
    ):
        build(RewardsCfg, {"near_obstacle": {"params": {"safe": 1.0}}}, "rewards", RewardsCfg())


# ----------------------------------------------------------------------------------------------
# The env's reward inputs: progress telescopes, the stuck window fires exactly after `window` steps.


def test_env_progress_and_time_match_the_motion(make_env):
    env = make_env(4, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", NO_RANDOMIZATION)
    env.reset(empty_rooms(env, start=(-2.0, 0.0, 0.0), goal=(2.0, 0.0)))
    terms = env.reward_manager.last_values
    total_progress = torch.zeros(env.num_envs)
    for _ in range(5):
        env.step(torch.tensor([1.0, 0.0, 0.0]).expand(env.num_envs, 3))
        total_progress += terms["progress"]
        assert torch.allclose(terms["time"], torch.full((env.num_envs,), -0.02))
    travelled = env.qpos[:, 0] - (-2.0)
    assert torch.allclose(total_progress, 2.0 * travelled, atol=1e-4)  # weight 2 * (d0 - d5)
    assert (travelled > 0.6).all()
    # Facing the goal at full speed: face_goal ~ 0.05 * cos(0) * 1.
    assert torch.allclose(terms["face_goal"], torch.full((env.num_envs,), 0.05), atol=1e-3)


def test_env_stuck_fires_after_the_window_when_not_moving(make_env):
    env = make_env(
        2,
        "env.init_at_random_ep_len=false",
        "rewards.stuck.params.window=5",
        "env.lidar.noise_std=0.0",
        NO_RANDOMIZATION,
    )
    assert env.stuck_window == 5
    env.reset(empty_rooms(env))
    actions = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])  # world 0 stands, world 1 drives
    fired = []
    for _ in range(7):
        env.step(actions)
        fired.append(env.reward_manager.last_values["stuck"].tolist())
    assert [f[0] for f in fired] == pytest.approx([0.0] * 4 + [-0.03] * 3)  # from step 5 = window on
    assert all(f[1] == 0.0 for f in fired)


def test_env_guard_cut_charges_the_speed_the_guard_takes_off(make_env):
    """A robot pushing at a post the guard holds it at is charged the planar speed the guard cuts
    (over v max); one driving away from it is not; the sent command is what the base got."""
    env = make_env(
        2,
        "env.init_at_random_ep_len=false",
        "env.lidar.noise_std=0.0",
        "rewards.guard_cut.weight=-1.0",
        NO_RANDOMIZATION,
    )
    assert env.guard is not None
    rooms = empty_rooms(env, start=(0.0, 0.0, 0.0), goal=(-3.0, 0.0))
    post = env.radius + float(env.sizes.cylinder_radius[0]) + 0.05  # 5 cm from the robot's surface
    for w in range(2):
        place_obstacle(rooms, w, 0, (post, 0.0))
    env.reset(rooms)
    forward_back = torch.tensor([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])  # world 0 at the post, world 1 away
    for _ in range(3):
        prev = env.command.clone()
        requested = env.stages.requested(forward_back, prev)
        env.step(forward_back)
        sent = env.command
        cut = torch.linalg.norm(requested[:, :2] - sent[:, :2], dim=-1) / env.dims.v_max
        assert torch.allclose(env.reward_manager.last_values["guard_cut"], -cut, atol=1e-6)
    assert env.reward_manager.last_values["guard_cut"][0] < -0.05  # still asking, still cut
    assert env.reward_manager.last_values["guard_cut"][1] == 0.0
    assert not env.last_info.collision.any()
