"""The batched 72-beam lidar (planar Warp kernel) against C MuJoCo's mj_multiRay, and its layout."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from conftest import empty_rooms, place_obstacle
from navdeploy.scan import beam_angles
from navsim.robot import OBSTACLE_HALF_HEIGHT
from navsim.sim_world import Room, SimWorld, compile_world_model

NUM_WORLDS = 16


def c_mujoco_scan(world: SimWorld, env, w: int) -> np.ndarray:
    """Ranges of world ``w`` of ``env`` cast by C MuJoCo (the one-room world of navsim.sim_world):
    same MJCF, same obstacles, same pose, same beams."""
    world.reset(Room.from_batch(env.rooms, w), pose=env.qpos[w, :3].double().numpy())
    return world.scan(noise=False)


@pytest.fixture(scope="module")
def random_room_env(make_env):
    env = make_env(NUM_WORLDS, "env.init_at_random_ep_len=false", "env.auto_reset=false", seed=11)
    return env


def test_lidar_matches_c_mujoco_multiray_within_1mm(random_room_env):
    env = random_room_env
    world = SimWorld(env.nav_cfg)
    gen = torch.Generator().manual_seed(3)
    compared = 0
    hits = 0
    for _ in range(2):  # the start poses, then poses after a few random moves (yaw changes too)
        warp = env.scan_clean.double().numpy()
        for w in range(env.num_envs):
            ref = c_mujoco_scan(world, env, w)
            np.testing.assert_allclose(warp[w], ref, atol=1e-3, rtol=0, err_msg=f"world {w}")
            compared += ref.size
            hits += int((ref < env.dims.max_range - 1e-6).sum())
        for _ in range(3):
            env.step(torch.rand(env.num_envs, 3, generator=gen) * 2 - 1)
    assert compared >= 1000
    assert hits >= 0.9 * compared  # nearly every beam hits an obstacle or a wall within 6 m
    # The rooms hold obstacles of both kinds, so beams hit cylinders and yawed boxes alike.
    assert env.rooms.slot_active[:, : len(env.sizes.cylinder_radius)].any()
    assert env.rooms.slot_active[:, len(env.sizes.cylinder_radius) :].any()


def test_beam_order_and_frame(obstacle_free_env):
    """Beam i points at -pi + i * 5 degrees in the body frame, counter-clockwise (0 = forward):
    the robot side's layout (navdeploy.scan.BeamLayout) is the one the kernel casts."""
    env = obstacle_free_env
    angles = torch.as_tensor(beam_angles(72), dtype=torch.float32)
    assert torch.equal(torch.as_tensor(env.lidar.beam_cos.numpy()), torch.cos(angles))
    assert torch.equal(torch.as_tensor(env.lidar.beam_sin.numpy()), torch.sin(angles))
    half = env.env_cfg.room.size / 2
    rooms = empty_rooms(env, start=(1.0, 0.5, 0.0))
    rooms.start[1, 2] = math.pi / 2  # world 1 faces +y
    env.reset(rooms)
    scan = env.scan_clean
    back, right, ahead, left = 0, 18, 36, 54
    assert scan[0, ahead] == pytest.approx(half - 1.0, abs=1e-3)
    assert scan[0, back] == pytest.approx(half + 1.0, abs=1e-3)
    assert scan[0, left] == pytest.approx(half - 0.5, abs=1e-3)
    assert scan[0, right] == pytest.approx(half + 0.5, abs=1e-3)
    assert scan[1, ahead] == pytest.approx(half - 0.5, abs=1e-3)  # +y wall
    assert scan[1, left] == pytest.approx(half + 1.0, abs=1e-3)  # left of +y is -x
    # A diagonal beam (45 degrees left of forward, beam 45) reads the corner geometry: x wall at 3 m.
    assert scan[0, 45] == pytest.approx(min((half - 1.0), (half - 0.5)) * math.sqrt(2), abs=1e-3)


def test_no_return_reads_max_range_and_policy_scan_is_noisy(make_env):
    env = make_env(4, "env.init_at_random_ep_len=false", "env.lidar.max_range=2.0", "env.lidar.noise_std=0.05")
    rooms = empty_rooms(env)
    place_obstacle(rooms, 2, 0, (1.0, 0.0))  # cylinder slot 0 ahead of world 2
    env.reset(rooms)
    assert torch.equal(env.scan_clean[0], torch.full((72,), 2.0))  # walls 4 m away: beyond the range
    radius0 = float(env.sizes.cylinder_radius[0])
    assert env.scan_clean[2, 36] == pytest.approx(1.0 - radius0, abs=1e-3)
    lidar_obs = env.get_observations()["policy"][:, :72]
    assert lidar_obs.min() >= 0 and lidar_obs.max() <= 1
    noise = env.scan - env.scan_clean
    inside = env.scan_clean < 2.0 - 0.2  # away from the clamp at max_range
    assert noise[inside].abs().max() > 0
    assert noise[inside].std() == pytest.approx(0.05, rel=0.5)
    # The privileged noise-free scan is the clean one, normalised.
    clean_obs = env.get_observations()["privileged"][:, 1:73]
    assert torch.allclose(clean_obs, env.scan_clean / 2.0)


def test_layouts_differ_between_worlds(random_room_env):
    env = random_room_env
    layouts = torch.cat([env.rooms.slot_pos.flatten(1), env.rooms.slot_active.float()], dim=1)
    assert len({tuple(row.tolist()) for row in layouts}) == env.num_envs
    scans = env.scan_clean
    assert len({tuple(row.tolist()) for row in scans}) == env.num_envs


def test_c_mujoco_world_model_keeps_slot_yaw_that_a_plain_compile_drops():
    """Why navsim.sim_world.compile_world_model clears geom_sameframe (the one C MuJoCo world)."""
    from navsim.config import EnvCfg
    from navsim.robot import build_mjcf

    yaw = 0.7
    c, s = math.cos(yaw), math.sin(yaw)
    plain = mujoco.MjModel.from_xml_string(build_mjcf(EnvCfg()))
    prepared = compile_world_model(EnvCfg())
    for model, keeps_yaw in ((plain, False), (prepared, True)):
        data = mujoco.MjData(model)
        box = model.geom("obs_box0").id
        model.geom_pos[box] = (1.0, 0.0, OBSTACLE_HALF_HEIGHT)
        model.geom_quat[box] = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
        mujoco.mj_forward(model, data)
        assert np.allclose(data.geom_xpos[box], (1.0, 0.0, OBSTACLE_HALF_HEIGHT))
        want = [c, -s, 0, s, c, 0, 0, 0, 1] if keeps_yaw else np.eye(3).ravel()  # plain: yaw silently dropped
        assert np.allclose(data.geom_xmat[box], want)
    assert prepared.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_MIDPHASE  # moved obstacles collide
