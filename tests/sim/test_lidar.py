"""The batched 72-beam lidar (planar Warp kernel) against C MuJoCo's mj_multiRay, and its layout."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from navcontract.scan import beam_angles
from navsim.lidar import BatchedLidar
from navsim.robot import OBSTACLE_HALF_HEIGHT
from navsim.sectors import FovFill, SectorRays
from navsim.sim_world import Room, SimWorld, compile_world_model
from support.simenv import NO_RANDOMIZATION, empty_rooms, place_obstacle

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
    the robot side's layout (navcontract.scan.BeamLayout) is the one the kernel casts."""
    env = obstacle_free_env
    rays = env.lidar.rays
    k = rays.rays_per_beam
    assert k == env.env_cfg.lidar.rays_per_beam
    # Each sector's sub-rays run from one edge of the sector to the other, centred on the beam.
    sub = unwrapped(rays)
    assert np.allclose(sub.mean(axis=1), beam_angles(72), atol=1e-12)
    assert np.allclose(sub[:, -1] - sub[:, 0], 2 * math.pi / 72 if k != 1 else 0.0, atol=1e-12)
    ray = torch.as_tensor(rays.ray_angles, dtype=torch.float32)
    assert torch.equal(torch.as_tensor(env.lidar.ray_cos.numpy()), torch.cos(ray))
    assert torch.equal(torch.as_tensor(env.lidar.ray_sin.numpy()), torch.sin(ray))
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
    # A diagonal beam (45 degrees left of forward, beam 45) reads the minimum over its sector
    # [42.5, 47.5] degrees (one centre ray: 45 degrees only): the +x wall 3 m ahead reads
    # 3 / cos(phi), least at the sector's lower edge; the +y wall 3.5 m left 3.5 / sin(phi).
    lo, hi = (42.5, 47.5) if env.lidar.rays.rays_per_beam != 1 else (45.0, 45.0)
    want = min((half - 1.0) / math.cos(math.radians(lo)), (half - 0.5) / math.sin(math.radians(hi)))
    assert scan[0, 45] == pytest.approx(want, abs=1e-3)


def test_no_return_reads_max_range_and_policy_scan_is_noisy(make_env):
    env = make_env(
        4, "env.init_at_random_ep_len=false", "env.lidar.max_range=2.0", "env.lidar.noise_std=0.05", NO_RANDOMIZATION
    )
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


# ------------------------------------------------------------------------------------------------
# The sector rule (navsim.sectors): sub-rays, field of view, the runtime's fill.


def test_one_ray_per_beam_is_the_beam_centre_and_casts_the_beams_directly(random_room_env):
    """rays_per_beam 1 reproduces the lidar before issue 10: the rays are the beams themselves
    (same float32 directions, no second pass), and a sub-ray scan is never farther than it."""
    env = random_room_env
    one = SectorRays(72, 1)
    assert one.num_rays == 72 and np.array_equal(one.ray_angles, beam_angles(72))
    lidar = BatchedLidar(
        env.mj_model, env.m, env.d, env.num_envs, 72, 6.0, env.mj_model.body("base").id, env.device, rays=one
    )
    assert lidar._direct
    centre = lidar.scan(env.pose())
    many = env.lidar.scan(env.pose())
    if env.lidar.rays.rays_per_beam % 2 == 1:  # odd K keeps the centre ray among its sub-rays
        assert (many <= centre + 1e-5).all()
    assert (many < centre - 0.05).any()  # and sees more: obstacle edges inside the sectors


def unwrapped(rays: SectorRays) -> np.ndarray:
    """(B, K) sub-ray angles of each sector, continuous across the +-pi seam (the last sector's
    far edge is ray 0, at -pi - d/2)."""
    sub = rays.ray_angles[rays.windows]
    return sub + 2 * math.pi * (sub < sub[:, :1] - math.pi)


@pytest.mark.parametrize("k", [2, 3, 11, 21])
def test_sub_rays_span_the_closed_sector_and_share_its_edges(k):
    rays = SectorRays(72, k)
    d = 2 * math.pi / 72
    assert rays.num_rays == 72 * (k - 1)  # an edge ray serves both neighbours
    sub = unwrapped(rays)
    lo, hi = beam_angles(72) - d / 2, beam_angles(72) + d / 2
    assert np.allclose(np.sort(sub, axis=1)[:, 0], lo) and np.allclose(np.sort(sub, axis=1)[:, -1], hi)
    assert np.allclose(np.diff(sub, axis=1), d / (k - 1))
    assert np.array_equal(rays.windows[1:, 0], rays.windows[:-1, -1])  # shared edges
    assert rays.windows[0, 0] == rays.windows[-1, -1]  # wrap-around
    assert rays.seen.all()


def test_field_of_view_masks_sub_rays_and_sectors():
    rays = SectorRays(72, 3, fov_deg=270.0)
    ang = beam_angles(72)
    assert np.array_equal(rays.seen, np.abs(ang) <= 0.75 * math.pi + 1e-9)
    edge = int(np.argmin(np.abs(ang - 0.75 * math.pi)))  # the +135 degree sector: half inside
    assert rays.window_valid[edge].tolist() == [True, True, False]
    with pytest.raises(ValueError, match="fov_deg"):
        SectorRays(72, 3, fov_deg=0.0)
    with pytest.raises(ValueError, match="rays_per_beam"):
        SectorRays(72, -1)


def test_exact_rule_casts_the_sector_edges_and_cuts_sectors_to_the_field_of_view():
    d = 2 * math.pi / 72
    rays = SectorRays(72, 0)
    assert rays.exact and rays.num_rays == 72
    sub = unwrapped(rays)
    assert np.allclose(sub.mean(axis=1), beam_angles(72), atol=1e-12)  # the two edges of each sector
    assert np.allclose(sub[:, 1] - sub[:, 0], d) and np.allclose(rays.seen_width, d)
    assert np.array_equal(rays.windows[1:, 0], rays.windows[:-1, 1]) and rays.windows[0, 0] == rays.windows[-1, 1]
    fov = SectorRays(72, 0, fov_deg=270.0)
    ang = beam_angles(72)
    assert np.array_equal(fov.seen, SectorRays(72, 3, fov_deg=270.0).seen)
    edge = int(np.argmin(np.abs(ang - 0.75 * math.pi)))  # the +135 degree sector: its lower half is seen
    assert fov.seen_width[edge] == pytest.approx(d / 2) and fov.seen_lo[edge] == pytest.approx(ang[edge] - d / 2)
    assert (fov.seen_width[~fov.seen] < 0).all()
    # A closest point is credited to the sector whose seen arc holds it, and to no unseen one.
    assert fov.sector_of(np.array([0.0, ang[edge] + d / 4, math.pi])).tolist() == [36, -1, -1]
    with pytest.raises(ValueError, match="splits sector 0"):
        SectorRays(72, 0, fov_deg=358.0)


def test_exact_rule_equals_a_dense_rendering(make_env):
    """The analytic sector minimum (edge rays + closest points) against 401 sub-rays per sector
    (0.0125 degrees apart) on random rooms and poses, with a full view and with 270 degrees."""
    from navsim.lidar import BatchedLidar

    gen = torch.Generator().manual_seed(5)
    for fov in (360.0, 270.0):
        env = make_env(32, f"env.lidar.fov_deg={fov}", "env.lidar.rays_per_beam=0")
        dense = BatchedLidar(
            env.mj_model, env.m, env.d, env.num_envs, 72, env.dims.max_range, env.mj_model.body("base").id,
            env.device, rays=SectorRays(72, 401, fov),
        )  # fmt: skip
        for _ in range(4):
            pose = env.pose()
            exact, ref = env.lidar.scan(pose), dense.scan(pose)
            seen = torch.as_tensor(env.lidar.rays.seen)
            assert (exact[:, seen] - ref[:, seen]).abs().max() < 1e-3
            # never farther than any sub-ray (float32 rounding aside); where the sub-rays miss a
            # closest point between them the exact reading is the nearer one
            assert (exact[:, seen] <= ref[:, seen] + 1e-4).all()
            for _ in range(3):
                env.step(torch.rand(env.num_envs, 3, generator=gen) * 2 - 1)


@pytest.mark.parametrize(("fill", "value"), [("nearest", None), ("max_range", None), ("constant", 0.5)])
def test_fov_fill_is_the_runtimes_fill(fill, value):
    """The batched fill equals navcontract.scan.resample_scan on the same scans, for each policy."""
    from navcontract.scan import ScanInput, resample_scan

    rays = SectorRays(72, 5, fov_deg=240.0)
    ff = FovFill(rays.seen, 6.0, fill, value)
    assert ff.active and ff.unseen.shape[0] == 72 - rays.seen.sum()
    rng = np.random.default_rng(4)
    scans = rng.uniform(0.1, 6.0, (20, 72))
    ours = ff.apply(scans)
    for s, o in zip(scans, ours, strict=True):
        want = resample_scan(ScanInput.training_beams(np.where(rays.seen, s, np.nan), 72), 72, 6.0, fill, value)
        assert np.array_equal(o, want)
    assert np.array_equal(ours[:, rays.seen], scans[:, rays.seen])


def test_fov_in_training_fills_unseen_sectors_after_the_noise(make_env):
    env = make_env(
        4, "env.init_at_random_ep_len=false", "env.lidar.fov_deg=180", "env.lidar.noise_std=0.05", NO_RANDOMIZATION
    )
    env.reset(empty_rooms(env))
    seen = torch.as_tensor(env.lidar.rays.seen)
    unseen = torch.nonzero(~seen)[:, 0]
    ff = env.lidar.fill
    for scan in (env.scan, env.scan_clean):
        src = torch.where(ff.source_valid, scan[:, ff.sources], torch.inf).amin(dim=-1)
        assert torch.equal(scan[:, unseen], src)  # nearest seen sector's (noisy) value
    assert not torch.equal(env.scan[:, unseen], env.scan_clean[:, unseen])
    assert (env.get_observations()["policy"][:, :72] == env.scan / env.dims.max_range).all()
