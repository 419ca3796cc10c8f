"""Randomised observations: each lidar term changes the scan as specified and nothing else, the
observation latency shows the state of k substeps earlier, the odometry twist is scaled and noisy,
and the fill of dropped readings is the robot's rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from test_randomization import only

from navcontract.scan import ScanInput, ScanOptions, resample_scan
from navsim.scan_faults import MissingFill
from support.lidar_terms import LidarTerms
from support.simenv import NO_GUARD, empty_rooms, place_obstacle

N = 8
QUIET = (
    "env.init_at_random_ep_len=false",
    "env.lidar.noise_std=0.0",
    NO_GUARD,
)  # the guard would steer by the perturbed scan
B = 72


def _rooms(env):
    """Empty rooms with one cylinder 1 m ahead of every robot (returns and no-returns both)."""
    rooms = empty_rooms(env, goal=(3.0, 1.0))
    for w in range(env.num_envs):
        place_obstacle(rooms, w, 3, (1.0, 0.0))
    return rooms


def _twins(make_env, *overrides: str, seed: int = 5):
    """The env with ``overrides`` and the same env without randomisation, on the same rooms."""
    on = make_env(N, *QUIET, "env.lidar.max_range=3.0", *overrides, seed=seed)
    off = make_env(N, *QUIET, "env.lidar.max_range=3.0", "randomization.enabled=false", seed=seed)
    for env in (on, off):
        env.reset(_rooms(env))
    return on, off


def _drive(envs, steps: int = 3) -> None:
    gen = torch.Generator().manual_seed(3)
    for _ in range(steps):
        a = torch.rand(N, 3, generator=gen) - 0.5
        for env in envs:
            env.step(a)


def _same_except_lidar(on, off) -> None:
    obs_on, obs_off = on.get_observations(), off.get_observations()
    assert torch.equal(obs_on["policy"][:, B:], obs_off["policy"][:, B:])
    assert torch.equal(obs_on["privileged"], obs_off["privileged"])
    assert torch.equal(on.pose(), off.pose())


def test_lidar_bias_is_exact_arithmetic_on_the_returns(make_env):
    on, off = _twins(make_env, *only("lidar_bias"))
    _drive((on, off))
    clean = off.scan
    scale = on.randomization.value("lidar_bias", "scale")[:, None]
    offset = on.randomization.value("lidar_bias", "offset")[:, None]
    want = torch.where(clean < 3.0, (scale * clean + offset).clamp(0.0, 3.0), clean)
    assert torch.equal(on.scan, want)
    assert ((clean < 3.0).sum(dim=1) > 3).all() and ((clean == 3.0).sum(dim=1) > 3).all()  # both kinds
    assert torch.equal(on.scan_clean, clean)
    _same_except_lidar(on, off)


def test_lidar_noise_replaces_the_configured_noise_on_the_same_stream(make_env):
    on, _ = _twins(make_env, *only("lidar_noise"))
    ref = make_env(
        N, "env.init_at_random_ep_len=false", "env.lidar.max_range=3.0", "randomization.enabled=false", seed=5
    )
    ref.reset(_rooms(ref))  # env.lidar.noise_std = 0.01, the same noise stream
    _drive((on, ref))
    std = on.randomization.value("lidar_noise", "std")[:, None]
    inside = (on.scan_clean > 0.1) & (on.scan_clean < 2.9)
    ratio_on = (on.scan - on.scan_clean) / std
    ratio_ref = (ref.scan - ref.scan_clean) / 0.01
    assert torch.allclose(ratio_on[inside], ratio_ref[inside], atol=2e-3)
    assert std.min() >= 0.005 and std.max() <= 0.03 and std.std() > 0


def test_lidar_spurious_readings_read_max_range_and_nothing_else_changes(make_env):
    on, off = _twins(make_env, *only("lidar_spurious", lidar_spurious__prob="[0.2,0.2]"))
    _drive((on, off))
    changed = on.scan != off.scan
    assert (on.scan[changed] == 3.0).all()
    hits = (on.scan == 3.0) & (off.scan < 3.0)
    assert torch.equal(changed, hits)
    assert 0.1 < hits.sum() / (off.scan < 3.0).sum() < 0.3
    _same_except_lidar(on, off)


def test_lidar_dropout_fills_by_the_robots_rule_and_robot_readings_carry_nan(make_env):
    on, off = _twins(make_env, *only("lidar_dropout", lidar_dropout__prob="[0.2,0.2]"))
    _drive((on, off))
    dropped = on.scan_readings.isnan()
    assert 0.12 < dropped.float().mean() < 0.28
    assert torch.equal(on.scan_readings[~dropped], off.scan[~dropped])
    assert torch.equal(on.scan[~dropped], off.scan[~dropped])
    for w in range(N):  # the policy scan is what the robot's resampling makes of the readings
        readings = on.scan_readings[w].double().numpy()
        scan = ScanInput.training_beams(readings, B, 3.0)
        runtime = resample_scan(scan, B, 3.0, options=ScanOptions(min_valid_share=0.0, max_fill_gap=B))
        assert np.allclose(on.scan[w].numpy(), runtime, atol=1e-6)
    _same_except_lidar(on, off)


def test_lidar_yaw_offset_casts_from_the_rotated_pose(make_env):
    on, off = _twins(make_env, *only("lidar_yaw", lidar_yaw__deg="[-10,10]"))
    _drive((on, off))
    deg = on.randomization.value("lidar_yaw", "deg")
    assert deg.abs().max() > 3.0
    rotated = on.pose()
    rotated[:, 2] += torch.deg2rad(deg)
    assert torch.equal(on.scan, on.lidar.fill(on.lidar.scan(rotated)))
    assert not torch.equal(on.scan, off.scan)
    assert torch.equal(on.scan_clean, off.scan)  # the privileged scan keeps the true heading
    _same_except_lidar(on, off)


def test_odometry_twist_is_scaled_and_noisy(make_env):
    on, off = _twins(make_env, *only("odom_twist", odom_twist__noise_std="[0,0]", odom_twist__scale="[0.9,1.1]"))
    _drive((on, off))
    scale = on.randomization.value("odom_twist", "scale")[:, None]
    assert torch.allclose(on.observed_twist, scale * off.body_twist(), atol=1e-6)
    vel = slice(B + 3, B + 6)  # vel_body (2) and omega (1) after lidar (72) and goal_polar (3)
    assert torch.allclose(on.get_observations()["policy"][:, vel], scale * off.get_observations()["policy"][:, vel])
    assert torch.equal(on.get_observations()["policy"][:, : B + 3], off.get_observations()["policy"][:, : B + 3])
    noisy, clean = _twins(make_env, *only("odom_twist", odom_twist__noise_std="[0.05,0.05]", odom_twist__scale="[1,1]"))
    _drive((noisy, clean))
    assert (noisy.observed_twist - clean.body_twist()).std() == pytest.approx(0.05, rel=0.5)


@pytest.mark.parametrize("k", [1, 2])
def test_observation_latency_shows_the_state_of_k_substeps_earlier(make_env, k):
    """Against a twin without the latency (same physics), whose state after every substep is
    recorded: the latent env observes the twin's state k substeps before the end of the step."""
    on, _ = _twins(make_env, *only("observation_latency", observation_latency__substeps=f"[{k},{k}]"))
    twin, _ = _twins(make_env, *only("observation_latency", observation_latency__substeps="[0,0]"))
    s = on.env_cfg.physics_substeps
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        a = torch.rand(N, 3, generator=gen) * 2 - 1
        on.step(a)
        _, rew_twin, _, _ = twin.step(a)
        recorded = twin.base.history[s - k].clone()  # pose and world-frame velocity, k substeps back
        assert torch.equal(on.pose(), twin.pose())  # the latency changes what is seen, not the motion
        assert torch.equal(on.observed_pose, recorded[:, :3])
        yaw = recorded[:, 2]
        c, sn = torch.cos(yaw), torch.sin(yaw)
        body = torch.stack([c * recorded[:, 3] + sn * recorded[:, 4], -sn * recorded[:, 3] + c * recorded[:, 4]], -1)
        assert torch.allclose(on.observed_twist[:, :2], body, atol=1e-6)
        assert torch.equal(on.scan, on.lidar.fill(on.lidar.scan(recorded[:, :3])))
        assert not torch.equal(on.observed_pose, on.pose())
        assert torch.equal(on.get_observations()["privileged"], twin.get_observations()["privileged"])
    assert torch.equal(twin.observed_pose, twin.pose())


def test_missing_fill_is_the_runtimes_rule_for_every_fill_policy():
    rng = np.random.default_rng(4)
    for fill, value in (("nearest", None), ("max_range", None), ("constant", 1.5)):
        mf = MissingFill(B, 6.0, fill, value, torch.device("cpu"))
        ranges = rng.uniform(0.0, 6.0, (16, B)).astype(np.float32)
        missing = rng.uniform(size=(16, B)) < np.linspace(0.02, 0.95, 16)[:, None]
        missing[:, 5] = False
        ours = mf(torch.as_tensor(ranges), torch.as_tensor(missing)).numpy()
        opts = ScanOptions(fill=fill, fill_value=value, min_valid_share=0.0, min_coverage=0.0, max_fill_gap=B)
        for w in range(16):
            scan = ScanInput.training_beams(np.where(missing[w], math.nan, ranges[w]).astype(np.float64), B)
            assert np.allclose(ours[w], resample_scan(scan, B, 6.0, options=opts), atol=1e-6), (fill, w)


def test_a_robots_own_scan_gets_the_worlds_lidar_faults_beam_by_beam():
    """The node's dense lidar in a node-gated evaluation meets the lidar terms of its world: bias on
    returns only, the world's noise std, spurious no-returns and dropped readings (NaN) at the world's
    probabilities, each beam on its own; nothing enabled leaves the scan as the lidar's noise makes it."""
    from navsim.scan_faults import dense_faults

    r_max = 6.0
    raw = torch.tensor([[1.0, 2.0, r_max, 3.0] * 200, [1.0, 2.0, r_max, 3.0] * 200])
    gen = torch.Generator().manual_seed(0)
    assert torch.equal(dense_faults(raw, LidarTerms(), r_max, 0.0, gen), raw)
    biased = dense_faults(raw, LidarTerms(lidar_bias={"scale": [1.02, 1.0], "offset": [0.0, 0.02]}), r_max, 0.0, gen)
    assert torch.allclose(biased[0, :3], torch.tensor([1.02, 2.04, r_max]))
    assert torch.allclose(biased[1, :3], torch.tensor([1.02, 2.02, r_max]))
    noisy = dense_faults(raw, LidarTerms(lidar_noise={"std": [0.0, 0.05]}), r_max, 0.01, gen)
    assert torch.equal(noisy[0], raw[0])  # the world's std (0) replaces the lidar's 0.01
    spread = (noisy[1] - raw[1])[raw[1] < r_max]
    assert 0.04 < float(spread.std()) < 0.06 and float(noisy[1].max()) <= r_max
    faults = LidarTerms(lidar_spurious={"prob": [0.0, 0.5]}, lidar_dropout={"prob": [1.0, 0.1]})
    out = dense_faults(raw, faults, r_max, 0.0, gen)
    assert torch.isnan(out[0]).all()  # every reading of world 0 dropped
    dropped, spurious = torch.isnan(out[1]), (out[1] == r_max) & (raw[1] < r_max)
    assert 0.05 < float(dropped.float().mean()) < 0.15  # beam by beam, not sector by sector
    assert 0.35 < float(spurious.sum()) / float((~dropped & (raw[1] < r_max)).sum()) < 0.65


@pytest.mark.parametrize("terms", [False, True])
def test_a_sectors_noise_is_the_minimum_of_its_beams_readings(make_env, terms: bool):
    """With ``env.lidar.noise_beams`` k a sector reads as the node's rule reads a real lidar: the
    minimum of k noisy readings, short of the surface by the expected minimum of k standard normals
    (1.539 std for 10), where one reading (k = 1) is unbiased. With and without the noise term."""
    std = 0.05
    over = (
        only("lidar_noise", lidar_noise__std=f"[{std},{std}]")
        if terms
        else ["randomization.enabled=false", f"env.lidar.noise_std={std}"]
    )
    shortfall = {}
    for k in (1, 10):
        env = make_env(N, *QUIET, "env.lidar.max_range=3.0", f"env.lidar.noise_beams={k}", *over, seed=3)
        env.reset(_rooms(env))
        errors = []
        for _ in range(6):
            env.step(torch.zeros(N, 3))
            returns = env.scan_clean < 2.5  # away from the clip at max_range
            errors.append((env.scan - env.scan_clean)[returns])
        err = torch.cat(errors)
        assert err.numel() > 300
        shortfall[k] = -float(err.mean()) / std
    assert abs(shortfall[1]) < 0.15
    assert shortfall[10] == pytest.approx(1.539, abs=0.15)
