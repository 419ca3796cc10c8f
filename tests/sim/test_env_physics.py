"""Physics of the batched env: velocity actuators, action contract, walls, per-world layouts."""

from __future__ import annotations

import math

import pytest
import torch

from navcontract.action import action_to_command
from support.simenv import EXACT_EPISODES, NO_GUARD, NO_RANDOMIZATION, empty_rooms, place_obstacle

YAWS = torch.linspace(-math.pi, math.pi, 17)[:16]  # 16 different headings, one per world


def _rotate(v: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack([c * v[:, 0] - s * v[:, 1], s * v[:, 0] + c * v[:, 1]], dim=-1)


def _start_with_yaws(env, yaws: torch.Tensor) -> None:
    rooms = empty_rooms(env)
    rooms.start[:, 2] = yaws
    env.reset(rooms)


def _hold(env, actions: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        env.step(actions)


@pytest.mark.parametrize(
    "action",
    [(0.5, 0.0, 0.0), (0.0, -0.7, 0.0), (-1.0, 0.0, 0.0), (0.4, 0.3, 0.0), (0.03, 0.0, 0.0)],
    ids=["forward", "left", "full-reverse", "diagonal", "creep"],
)
def test_translation_reaches_body_frame_command_within_1pct(obstacle_free_env, action):
    env = obstacle_free_env
    _start_with_yaws(env, YAWS)
    a = torch.tensor(action).expand(env.num_envs, 3).clone()
    cmd = action_to_command(a, env.scaling)
    _hold(env, a, 3)  # 0.3 s, thirty time constants of the 0.01 s actuator lag
    twist = env.body_twist()
    speed = torch.linalg.norm(cmd[:, :2], dim=-1)
    err = torch.linalg.norm(twist[:, :2] - cmd[:, :2], dim=-1)
    assert (err <= 0.01 * speed).all(), (twist[:, :2], cmd[:, :2])
    assert twist[:, 2].abs().max() < 1e-4  # no spurious rotation
    # The heading did not move, and the world-frame velocity is the rotated body command.
    assert torch.allclose(env.qpos[:, 2], YAWS, atol=1e-4)
    world = _rotate(cmd[:, :2], YAWS)
    assert (torch.linalg.norm(env.qvel[:, :2] - world, dim=-1) <= 0.01 * speed).all()


@pytest.mark.parametrize("wz_action", [1.0, -0.5, 0.1])
def test_yaw_rate_reaches_command_within_1pct(obstacle_free_env, wz_action):
    env = obstacle_free_env
    _start_with_yaws(env, YAWS)
    a = torch.tensor([0.0, 0.0, wz_action]).expand(env.num_envs, 3).clone()
    _hold(env, a, 3)
    wz_cmd = wz_action * env.env_cfg.robot.omega_max
    assert (env.qvel[:, 2] - wz_cmd).abs().max() <= 0.01 * abs(wz_cmd)
    assert env.qvel[:, :2].abs().max() < 1e-4  # turning in place does not translate
    # First-order lag: tau = I_zz / kv = (0.5 * 1 kg * 0.2^2) / 2 = 0.01 s, so after t >> tau the
    # heading trails the ideal wz * t by wz * tau.
    turned = torch.remainder(env.qpos[:, 2] - YAWS + math.pi, 2 * math.pi) - math.pi
    expected = wz_cmd * (3 * env.env_cfg.control_period - 0.01)
    assert torch.allclose(turned, torch.full_like(turned, expected), atol=0.01 * abs(expected) + 1e-4)


def test_held_body_command_drives_an_arc_like_a_real_base(obstacle_free_env):
    """The body-frame command is rotated into the world-frame actuators before every substep, so a
    held (v, w) drives a circle of radius v / w about a fixed centre, as a base holding a Twist does."""
    env = obstacle_free_env
    _start_with_yaws(env, YAWS)
    a = torch.tensor([0.6, 0.0, 0.5]).expand(env.num_envs, 3).clone()
    cmd = action_to_command(a, env.scaling)  # 0.9 m/s forward, 1.0 rad/s left
    radius = float(cmd[0, 0] / cmd[0, 2])
    p0 = env.qpos[:, :2].clone()
    yaw0 = env.qpos[:, 2].clone()
    centre = p0 + radius * torch.stack([-torch.sin(yaw0), torch.cos(yaw0)], dim=-1)
    # Holding the command per 0.1 s step (the old, straight-chord behaviour) drifts outwards by about
    # (v dt)^2 / 2r per step, 15 % over these 30 steps; the per-substep rotation stays on the circle
    # up to the 20 ms substep discretisation (~1 %).
    for _ in range(30):  # 3 s: almost half a circle
        env.step(a)
        dist = torch.linalg.norm(env.qpos[:, :2] - centre, dim=-1)
        assert ((dist - radius).abs() <= 0.02 * radius).all(), dist
    # The body-frame twist is the command, up to the heading change within one 20 ms substep
    # (1 rad/s x 0.02 s plus the 10 ms actuator lag: ~0.03 rad of sideways slip).
    twist = env.body_twist()
    assert torch.allclose(twist[:, 0], cmd[:, 0], rtol=0.01)
    assert torch.allclose(twist[:, 2], cmd[:, 2], rtol=0.01)
    assert (twist[:, 1].abs() <= 0.035 * cmd[:, 0]).all()


def test_action_clip_and_planar_speed_limit(obstacle_free_env):
    env = obstacle_free_env
    _start_with_yaws(env, YAWS)
    v_max = env.env_cfg.robot.v_max
    a = torch.tensor([3.0, 3.0, 0.0]).expand(env.num_envs, 3).clone()  # beyond the [-1, 1] clip
    _hold(env, a, 3)
    twist = env.body_twist()
    speed = torch.linalg.norm(twist[:, :2], dim=-1)
    # The diagonal is limited to v_max (not sqrt(2) v_max), heading 45 degrees left of forward.
    assert torch.allclose(speed, torch.full_like(speed, v_max), rtol=0.01)
    assert torch.allclose(twist[:, 0], twist[:, 1], rtol=0.01)
    _hold(env, torch.tensor([0.0, 0.0, -5.0]).expand(env.num_envs, 3), 3)
    omega_max = env.env_cfg.robot.omega_max
    assert torch.allclose(env.qvel[:, 2], torch.full_like(speed, -omega_max), rtol=0.01)
    assert env.qvel[:, :2].abs().max() < 1e-3


def test_walls_stop_the_robot_and_count_as_collision(make_env):
    env = make_env(4, *EXACT_EPISODES, NO_RANDOMIZATION, NO_GUARD)
    rooms = empty_rooms(env, start=(1.0, 0.0, 0.0))
    rooms.start[:, 2] = torch.tensor([0.0, math.pi / 2, math.pi, -math.pi / 2])  # face +x, +y, -x, -y
    env.reset(rooms)
    half = env.env_cfg.room.size / 2
    gaps = [half - 1.0, half, half + 1.0, half]  # centre to the wall ahead: 3, 4, 5 and 4 m
    # Beam 36 points forward (body angle 0) and reads the wall ahead.
    assert env.scan_clean[:, 36].tolist() == pytest.approx(gaps, abs=1e-3)
    first_hit = [None] * 4
    for k in range(40):
        env.step(torch.tensor([1.0, 0.0, 0.0]).expand(4, 3))
        for w in range(4):
            if first_hit[w] is None and bool(env.last_info.collision[w]):
                first_hit[w] = k + 1
    radius = env.env_cfg.robot.radius
    # Every robot hit its wall, about when the 1.5 m/s drive covers the gap, and stayed inside.
    for w, gap in enumerate(gaps):
        expected = (gap - radius) / (env.env_cfg.robot.v_max * env.env_cfg.control_period)
        assert first_hit[w] is not None and abs(first_hit[w] - expected) <= 1.5, (w, first_hit[w], expected)
    assert (env.qpos[:, :2].abs() <= half - radius + 0.02).all()
    assert env.last_info.collision.all()


def test_each_world_collides_only_with_its_own_obstacles(make_env):
    env = make_env(8, *EXACT_EPISODES, NO_RANDOMIZATION, NO_GUARD)
    rooms = empty_rooms(env, start=(0.0, 0.0, 0.0), goal=(-3.0, 0.0))
    place_obstacle(rooms, 0, 0, (0.25, 0.0))  # cylinder slot 0 overlaps the robot in world 0 only
    place_obstacle(rooms, 3, env.geometry.num_slots - 1, (1.5, 0.0), yaw=0.3)  # a box ahead, world 3
    env.reset(rooms)
    env.step(torch.zeros(env.num_envs, 3))
    hit = env.last_info.collision
    assert hit[0] and not hit[1:].any()
    # The lidar sees the per-world layouts too: world 0 and 3 read short ranges ahead, world 1 the wall.
    ahead = env.scan_clean[:, 36]
    assert ahead[0] < 0.5 and ahead[3] < 1.5 and ahead[1] == pytest.approx(env.env_cfg.room.size / 2, abs=1e-3)
    others = torch.tensor([1, 2, 4, 5, 6, 7])
    assert torch.equal(env.scan_clean[others], env.scan_clean[1].expand(len(others), -1))
    assert not torch.equal(env.scan_clean[0], env.scan_clean[1])
    assert not torch.equal(env.scan_clean[3], env.scan_clean[1])
    # Driving world 3 forward makes it collide with its box, while world 1 passes freely.
    for _ in range(12):
        env.step(torch.tensor([0.5, 0.0, 0.0]).expand(env.num_envs, 3))
        if env.last_info.collision[3]:
            break
    assert env.last_info.collision[3] and not env.last_info.collision[1]


def test_warp_trajectories_match_c_mujoco_rollout_on_the_same_rooms(make_env):
    """The benchmark's C MuJoCo reference (rollout + mj_multiRay on the one-room C MuJoCo world of
    navsim.sim_world, one model per world) reproduces NavEnv worlds."""
    import numpy as np

    from navsim.benchmark import CReference

    # NO_GUARD: the C reference steps the raw command
    env = make_env(16, *EXACT_EPISODES, NO_RANDOMIZATION, NO_GUARD, seed=5)
    ref = CReference(env, nthread=2)
    rng = np.random.default_rng(0)
    collided = np.zeros(env.num_envs, dtype=bool)
    try:
        for _ in range(10):
            action = rng.uniform(-1, 1, (env.num_envs, 3))
            env.step(torch.tensor(action, dtype=torch.float32))
            ref.physics(action)
            collided |= env.last_info.collision.numpy()
        ranges = ref.rays()
    finally:
        ref.close()
    free = ~collided
    assert free.sum() >= 8
    pose_c = ref.state[:, ref.qpos_slice]
    moved = np.linalg.norm(pose_c[:, :2] - env.rooms.start[:, :2].numpy(), axis=1)
    assert (moved[free] > 0.05).all()
    assert np.abs(pose_c - env.qpos.double().numpy())[free].max() < 1e-4
    assert np.abs(ranges - env.scan_clean.double().numpy())[free].max() < 1e-3
    if collided.any():  # contacts resolve slightly differently, but C MuJoCo also stops there
        assert np.abs(pose_c[:, :2] - env.qpos[:, :2].double().numpy())[collided].max() < 0.02
