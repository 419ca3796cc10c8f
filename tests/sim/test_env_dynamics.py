"""Terminations, truncation, dones, auto-reset and determinism of NavEnv.step."""

from __future__ import annotations

import pytest
import torch

from support.simenv import NO_RANDOMIZATION, empty_rooms, place_obstacle

N = 8
ZERO = torch.zeros(N, 3)


@pytest.fixture(scope="module")
def env(make_env):
    """8 worlds, auto-reset on, episode lengths not randomised, noise-free lidar, instant base."""
    return make_env(N, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", NO_RANDOMIZATION, seed=4)


@pytest.fixture(scope="module")
def env_no_reset(make_env):
    return make_env(
        N,
        "env.init_at_random_ep_len=false",
        "env.auto_reset=false",
        "env.lidar.noise_std=0.0",
        NO_RANDOMIZATION,
        seed=4,
    )


def _crash_room(env, crash_worlds=(), at_goal_worlds=()):
    """Empty rooms; ``crash_worlds`` get a cylinder over the robot; ``at_goal_worlds`` start on the goal."""
    rooms = empty_rooms(env, start=(0.0, 0.0, 0.0), goal=(3.0, 0.0))
    for w in crash_worlds:
        place_obstacle(rooms, w, 0, (0.25, 0.0))
    for w in at_goal_worlds:
        rooms.goal[w] = torch.tensor([0.1, 0.0])  # inside the 0.3 m tolerance
    return rooms


def test_collision_takes_priority_over_success(env_no_reset):
    env = env_no_reset
    env.reset(_crash_room(env, crash_worlds=[0, 2], at_goal_worlds=[0, 1]))
    _, rewards, dones, extras = env.step(ZERO)
    info = env.last_info
    # world 0: goal within tolerance AND contact -> collision only; world 1: success; world 2: collision.
    assert info.collision[:3].tolist() == [True, False, True]
    assert info.success[:3].tolist() == [False, True, False]
    assert dones[:3].tolist() == [1, 1, 1] and not dones[3:].any()
    terms = env.reward_manager.last_values
    assert terms["goal"][:3].tolist() == [0.0, 15.0, 0.0]
    assert terms["collision"][:3].tolist() == [-12.0, 0.0, -12.0]
    assert not extras["time_outs"].any()
    ended = dones.bool()
    reasons = extras["termination"]
    assert reasons["success"][ended].tolist() == [False, True, False]  # the 3 finished episodes
    assert reasons["collision"][ended].tolist() == [True, False, True]
    # rsl_rl's extras["log"]: one value per episode ending now, averaged by its logger.
    log = extras["log"]
    assert log["Episode_Termination/success"].tolist() == [0.0, 1.0, 0.0]
    assert log["Episode_Termination/collision"].tolist() == [1.0, 0.0, 1.0]
    assert log["Episode_Termination/success"].mean() == pytest.approx(1 / 3)
    assert log["Episode_Reward/goal"].tolist() == [0.0, 15.0, 0.0]
    assert log["Episode/length_s"].tolist() == pytest.approx([0.1, 0.1, 0.1])
    assert rewards[0] < -11 and rewards[1] > 14
    # A step that ends no episode logs nothing (no empty tensors for rsl_rl to average).
    env.reset(_crash_room(env, crash_worlds=[], at_goal_worlds=[]))
    assert "log" not in env.step(ZERO)[3]


def test_truncation_sets_time_outs_and_termination_does_not(env):
    env.reset(_crash_room(env, crash_worlds=[1, 3]))
    last = env.max_episode_length - 1
    env.episode_length_buf[:2] = last  # world 0: truncated; world 1: truncated and collided
    _, _, dones, extras = env.step(ZERO)
    time_outs = extras["time_outs"]
    assert time_outs.dtype == torch.bool
    assert time_outs.tolist() == [True] + [False] * (N - 1)
    assert dones.tolist() == [1, 1, 0, 1] + [0] * (N - 4)
    ended = dones.bool()  # worlds 0, 1, 3 finished, in world order
    reasons = extras["termination"]
    assert reasons["timeout"][ended].tolist() == [True, False, False]
    assert reasons["collision"][ended].tolist() == [False, True, True]
    assert extras["episode_length_s"][ended].tolist() == pytest.approx([30.0, 30.0, 0.1])
    assert not extras["episode_length_s"][~ended].any()
    # Only the truncated world pays the timeout penalty.
    assert env.reward_manager.last_values["timeout"].tolist() == [-4.0] + [0.0] * (N - 1)


def test_auto_reset_restarts_only_finished_worlds(env):
    env.reset(_crash_room(env, crash_worlds=[2]))
    for _ in range(2):
        env.step(torch.tensor([0.5, 0.0, 0.0]).expand(N, 3))  # world 2 crashes on the first step
    before_rooms = env.rooms.index(torch.arange(N))
    before_pose = env.pose()
    env.episode_length_buf[5] = env.max_episode_length - 1  # world 5 times out on this step
    action = torch.tensor([0.5, 0.0, 0.0]).expand(N, 3)
    obs, _, dones, _ = env.step(action)
    finished = torch.zeros(N, dtype=torch.bool)
    finished[5] = True
    assert dones.bool().tolist() == finished.tolist()
    # The finished world got a fresh room and starts it: its pose is the new start, length 0.
    assert not torch.equal(env.rooms.slot_pos[5], before_rooms.slot_pos[5])
    assert torch.allclose(env.pose()[5], env.rooms.start[5])
    assert env.episode_length_buf[5] == 0
    # Its final pose before the reset is kept in last_info.
    assert env.last_info.pose[5, 0] > before_pose[5, 0]
    # Everyone else keeps its room and moves on.
    others = ~finished
    for name in ("slot_pos", "slot_active", "start", "goal"):
        assert torch.equal(getattr(env.rooms, name)[others], getattr(before_rooms, name)[others])
    assert (env.episode_length_buf[others] > 0).all()
    moved = env.pose()[others, :2] - before_pose[others, :2]
    heading = torch.stack([torch.cos(before_pose[others, 2]), torch.sin(before_pose[others, 2])], dim=-1)
    assert ((moved * heading).sum(dim=-1) > 0.02).all()  # each drove forward along its own heading
    # The observation of world 5 already belongs to the new episode (goal bearing of the new room).
    d = torch.linalg.norm(env.rooms.goal[5] - env.rooms.start[5, :2])
    assert obs["policy"][5, 72] == pytest.approx(min(float(d) / 5.0, 2.0), abs=1e-5)
    assert obs["policy"][5, 75:78].abs().max() == 0  # standing still at the start


def test_auto_reset_can_be_switched_off(env_no_reset):
    env = env_no_reset
    assert env.auto_reset is False
    env.reset(_crash_room(env, crash_worlds=[2]))
    rooms = env.rooms.index(torch.arange(N))
    _, _, dones, _ = env.step(ZERO)
    assert dones.tolist() == [0, 0, 1] + [0] * (N - 3)
    pose_after = env.pose()
    # Nothing was reset: same rooms, the collided world is still where it was, lengths keep counting.
    assert torch.equal(env.rooms.slot_pos, rooms.slot_pos)
    assert env.episode_length_buf.tolist() == [1] * N
    assert torch.allclose(env.last_info.pose, pose_after)
    _, _, dones, _ = env.step(ZERO)
    assert dones[2] == 1 and env.episode_length_buf[2] == 2
    # Evaluation can still reset explicitly.
    env.reset()
    assert env.episode_length_buf.tolist() == [0] * N
    assert torch.allclose(env.pose(), env.rooms.start)


def test_reset_observation_is_from_the_start_pose(env):
    rooms = _crash_room(env)
    rooms.start[:, 2] = 0.5
    obs = env.reset(rooms)
    policy = obs["policy"]
    gx, gy = 3.0, 0.0  # goal in the world frame from (0, 0), yaw 0.5 -> bearing -0.5
    assert torch.allclose(policy[:, 72], torch.full((N,), 3.0 / 5.0))
    assert torch.allclose(policy[:, 73], torch.full((N,), torch.sin(torch.tensor(-0.5)).item()), atol=1e-6)
    assert torch.allclose(policy[:, 74], torch.full((N,), torch.cos(torch.tensor(-0.5)).item()), atol=1e-6)
    assert gx > gy


def test_randomized_episode_lengths_spread_over_the_episode(make_env):
    env = make_env(64, "env.lidar.noise_std=0.0", seed=2)
    env.randomize_episode_lengths()
    lengths = env.episode_length_buf
    assert lengths.min() >= 0 and lengths.max() < env.max_episode_length
    assert len(set(lengths.tolist())) > 40


def _rollout(make_env, seed: int, steps: int = 15, launched: bool = False):
    env = make_env(8, seed=seed)  # repository config: lidar noise on, random rooms, randomisation on
    if launched:  # every substep's kernels launched one by one instead of the recorded graph's replay
        env._simulate = env._substeps
    env.randomize_episode_lengths()
    env.episode_length_buf[0] = env.max_episode_length - 5  # at least one timeout and auto-reset
    gen = torch.Generator().manual_seed(123)
    out = [env.get_observations()["policy"].clone()]
    rewards, dones = [], []
    for _ in range(steps):
        obs, rew, done, _ = env.step(torch.randn(8, 3, generator=gen) * 0.8)
        out.append(torch.cat([obs["policy"], obs["privileged"]], dim=1))
        rewards.append(rew)
        dones.append(done)
    return out, torch.stack(rewards), torch.stack(dones)


def test_same_seed_same_rollout_and_different_seed_differs(make_env):
    obs_a, rew_a, done_a = _rollout(make_env, seed=9)
    obs_b, rew_b, done_b = _rollout(make_env, seed=9)
    assert done_a.sum() > 0  # the rollout crossed episode boundaries (auto-resets from the spare ring)
    assert all(torch.equal(a, b) for a, b in zip(obs_a, obs_b, strict=True))
    assert torch.equal(rew_a, rew_b) and torch.equal(done_a, done_b)
    obs_c, rew_c, _ = _rollout(make_env, seed=10)
    assert not torch.equal(obs_a[0], obs_c[0])
    assert not torch.equal(rew_a, rew_c)


def test_the_recorded_physics_graph_steps_as_launching_each_kernel_does(make_env):
    """NavEnv records its physics substeps as a Warp graph on the first step and replays it (on the
    CPU too): bit for bit the rollout of launching the same kernels one by one, resets included."""
    obs_a, rew_a, done_a = _rollout(make_env, seed=9)
    obs_b, rew_b, done_b = _rollout(make_env, seed=9, launched=True)
    assert done_a.sum() > 0
    assert all(torch.equal(a, b) for a, b in zip(obs_a, obs_b, strict=True))
    assert torch.equal(rew_a, rew_b) and torch.equal(done_a, done_b)


def test_a_reseeded_env_draws_from_the_new_seed_whatever_ran_before(make_env):
    """NavEnv.reseed: the worlds, the sensor noise and the randomisation are drawn from the new seed
    with the env's offsets, whatever ran before (an evaluation batch replays by itself)."""
    env = make_env(4, seed=5)
    for _ in range(3):
        env.step(torch.full((4, 3), 0.5))
    env.reseed(9)
    for gen, offset in ((env.gen, 0), (env.noise_gen, 7919), (env.randomization.gen, 104_729)):
        assert torch.equal(
            torch.rand(5, generator=gen), torch.rand(5, generator=torch.Generator().manual_seed(9 + offset))
        )
    assert env.seed == 9


def test_benchmark_times_the_recorded_graph_beside_launching_each_kernel(tmp_path, capsys):
    import json

    from navsim.benchmark import main

    out = tmp_path / "bench.json"
    argv = ["--num-envs", "16", "--steps", "3", "--warmup", "1", "--no-reference", "--launch-cost", "--json", str(out)]
    assert main(argv) == 0
    row = json.loads(out.read_text())["results"]["16"]
    for key in ("env_steps_per_s", "physics_steps_per_s"):
        assert row[key] > 0 and row[key.replace("_per_s", "_per_s_launched")] > 0
    assert "physics graph at 16 worlds: NavEnv.step" in capsys.readouterr().out
