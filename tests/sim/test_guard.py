"""The collision guard (navcontract.guard): its rule on hand-made scans, numpy and torch alike, and the
simulator driving through it (the command the base gets, and a robot driven at a wall)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from navcontract.action import action_to_command
from navcontract.guard import GuardRule, apply_guard, guard_scale
from support.simenv import NO_RANDOMIZATION, empty_rooms, place_obstacle

B = 72
R_MAX = 6.0
RULE = GuardRule(radius=0.2, margin=0.03, headway=0.5, decel=2.5, slide=False)
FORWARD = B // 2  # the beam at body angle 0 (the layout starts at -pi)
HALF_SECTOR = math.pi / B


def _scan(**beams: float) -> np.ndarray:
    """No return anywhere except the given beams (``b36=1.0``: beam 36 reads 1.0 m)."""
    ranges = np.full(B, R_MAX, dtype=np.float32)
    for name, r in beams.items():
        ranges[int(name[1:])] = r
    return ranges


def _expected_scale(free: float, speed: float) -> float:
    """The speed cap of the rule for a free distance ``free``, as a factor of ``speed``."""
    free = max(free, 0.0)
    cap = min(free / RULE.headway, math.sqrt(2.0 * RULE.decel * free))
    return min(1.0, cap / speed)


def test_head_on_return_caps_speed_to_headway_and_braking():
    r = 1.0
    cmd = np.array([1.5, 0.0, 0.7], dtype=np.float32)
    out, scale = apply_guard(_scan(**{f"b{FORWARD}": r}), cmd, RULE, R_MAX)
    rho = RULE.radius + RULE.margin + r * math.sin(HALF_SECTOR)
    expected = _expected_scale(r - rho, 1.5)
    assert expected < 1.0
    assert float(scale) == pytest.approx(expected, rel=1e-5)
    assert out[0] == pytest.approx(1.5 * expected, rel=1e-5)
    assert out[1] == 0.0
    assert out[2] == pytest.approx(0.7)  # turning is never limited


def test_oblique_return_uses_the_cross_track_offset():
    """A return 10 degrees left of a forward command: the swept band meets its disc later than a
    head-on return at the same range."""
    r = 0.8
    beam = FORWARD + 2  # +10 degrees
    theta = 2 * 2 * HALF_SECTOR
    cmd = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    scale = float(guard_scale(_scan(**{f"b{beam}": r}), cmd, RULE, R_MAX))
    rho = RULE.radius + RULE.margin + r * math.sin(HALF_SECTOR)
    along, lateral = r * math.cos(theta), r * math.sin(theta)
    assert lateral < rho
    assert scale == pytest.approx(_expected_scale(along - math.sqrt(rho**2 - lateral**2), 1.0), rel=1e-5)


def test_moving_away_or_past_is_never_limited():
    scan = _scan(**{f"b{FORWARD}": 0.235})  # 3.5 cm from the shell, inside the margin band
    assert float(guard_scale(scan, np.array([1.5, 0.0, 0.0]), RULE, R_MAX)) == 0.0  # toward it: stop
    for cmd in ([-1.5, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, -1.0, 0.0], [-0.5, 0.5, 0.0]):
        assert float(guard_scale(scan, np.array(cmd), RULE, R_MAX)) == 1.0, cmd
    # A return off to the side, beyond the band: driving past it is free.
    side = _scan(**{f"b{FORWARD + 18}": 0.5})  # 90 degrees left, 0.5 m: cross-track 0.5 > rho
    assert float(guard_scale(side, np.array([1.5, 0.0, 0.0]), RULE, R_MAX)) == 1.0


def test_slide_lets_a_robot_inside_the_margin_pass_a_post_but_not_close_in_fast():
    """A post 45 degrees ahead-left, 2.5 cm from the shell (inside the 3 cm margin). Without slide
    any motion with a forward component toward it is stopped; with slide a motion that passes it no
    closer than 1 cm less than now is free, one straight at it is capped at SLIDE_EPS / headway."""
    from dataclasses import replace

    from navcontract.guard import SLIDE_EPS

    slide = replace(RULE, slide=True)
    r = 0.225
    scan = _scan(**{f"b{FORWARD + 9}": r})  # +45 degrees
    past = np.array([math.cos(math.radians(-30)), math.sin(math.radians(-30)), 0.0])  # 75 degrees off it
    toward = np.array([math.cos(math.radians(45)), math.sin(math.radians(45)), 0.0])
    assert float(guard_scale(scan, past, RULE, R_MAX)) == 0.0
    assert float(guard_scale(scan, past, slide, R_MAX)) == 1.0
    assert float(guard_scale(scan, toward, RULE, R_MAX)) == 0.0
    rho = max(r - SLIDE_EPS, RULE.radius + r * math.sin(HALF_SECTOR))
    capped = float(guard_scale(scan, toward, slide, R_MAX))
    assert capped == pytest.approx(min((r - rho) / RULE.headway, math.sqrt(2 * RULE.decel * (r - rho))), rel=1e-4)
    assert capped <= SLIDE_EPS / RULE.headway + 1e-6
    # At the floor (the shell plus the sector's spread) nothing moves toward it, slide or not.
    touching = _scan(**{f"b{FORWARD + 9}": 0.205})
    assert float(guard_scale(touching, toward, slide, R_MAX)) == 0.0
    # Outside the margin both rules are the same rule.
    far = _scan(**{f"b{FORWARD + 9}": 0.6})
    assert float(guard_scale(far, toward, slide, R_MAX)) == float(guard_scale(far, toward, RULE, R_MAX)) < 1.0
    # The flag travels through the contract; a section without it is the old rule.
    assert GuardRule.from_dict(slide.to_dict()) == slide
    old = {k: v for k, v in slide.to_dict().items() if k != "slide"}
    assert GuardRule.from_dict(old) == RULE
    with pytest.raises(ValueError, match=r"guard.slide must be true or false, got 1"):
        GuardRule.from_dict({**old, "slide": 1})


def test_no_return_and_standing_still_are_not_limited():
    empty = _scan()
    assert float(guard_scale(empty, np.array([1.5, 0.0, 0.0]), RULE, R_MAX)) == 1.0
    near = _scan(**{f"b{FORWARD}": 0.21})
    out, scale = apply_guard(near, np.array([0.0, 0.0, 2.0]), RULE, R_MAX)
    assert float(scale) == 1.0
    assert out.tolist() == [0.0, 0.0, 2.0]


def test_torch_and_numpy_agree_batched():
    gen = np.random.default_rng(3)
    ranges = gen.uniform(0.15, R_MAX, size=(256, B)).astype(np.float32)
    ranges[gen.uniform(size=ranges.shape) < 0.3] = R_MAX
    cmd = gen.uniform(-1.5, 1.5, size=(256, 3)).astype(np.float32)
    out_np, scale_np = apply_guard(ranges, cmd, RULE, R_MAX)
    out_t, scale_t = apply_guard(torch.from_numpy(ranges), torch.from_numpy(cmd), RULE, R_MAX)
    assert isinstance(out_t, torch.Tensor)
    assert np.allclose(scale_t.numpy(), scale_np, atol=1e-6)
    assert np.allclose(out_t.numpy(), out_np, atol=1e-6)
    slide = GuardRule(**{**RULE.to_dict(), "slide": True})
    near = ranges.copy()
    near[:, 40] = gen.uniform(0.2, 0.24, size=256)  # inside the margin
    _, slide_np = apply_guard(near, cmd, slide, R_MAX)
    _, slide_t = apply_guard(torch.from_numpy(near), torch.from_numpy(cmd), slide, R_MAX)
    assert np.allclose(slide_t.numpy(), slide_np, atol=1e-6)
    assert 0.05 < float((scale_np < 1).mean()) < 0.95  # the batch exercises both branches
    # One world at a time gives the batch's numbers.
    single = np.array([float(guard_scale(ranges[i], cmd[i], RULE, R_MAX)) for i in range(20)])
    assert np.allclose(single, scale_np[:20], atol=1e-6)


def test_rule_rejects_bad_values_and_unknown_keys():
    with pytest.raises(ValueError, match="headway"):
        GuardRule(**{**RULE.to_dict(), "headway": 0.0})
    with pytest.raises(ValueError, match="margin"):
        GuardRule(**{**RULE.to_dict(), "margin": -0.01})
    with pytest.raises(ValueError, match="unknown guard key.*speed"):
        GuardRule.from_dict({"speed": 1.0})
    assert GuardRule.from_dict(RULE.to_dict()) == RULE


# ----------------------------------------------------------------------------------------------
# In the simulator


@pytest.fixture(scope="module")
def guarded_env(make_env):
    return make_env(4, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", NO_RANDOMIZATION)


def _wall_rooms(env):
    """World 0 and 1: a cylinder 1.5 m ahead of the robot; worlds 2 and 3: nothing."""
    rooms = empty_rooms(env, start=(-2.0, 0.0, 0.0), goal=(3.0, 0.0))
    for w in (0, 1):
        place_obstacle(rooms, w, 0, (-0.5, 0.0))
    return rooms


def test_env_applies_the_rule_to_the_scan_the_policy_saw(guarded_env):
    env = guarded_env
    assert env.guard == GuardRule(radius=0.2, margin=0.01, headway=0.5, decel=2.5, slide=True)  # conf/nav.yaml
    env.reset(_wall_rooms(env))
    action = torch.tensor([[1.0, 0.0, 0.3]]).expand(env.num_envs, 3).clone()
    for _ in range(6):
        seen = env.scan.clone()
        env.step(action)
        expected, _ = apply_guard(seen, action_to_command(action, env.scaling), env.guard, env.dims.max_range)
        assert torch.equal(env.command, expected)
    assert (env.command[:2, 0] < 1.5).all()  # slowed toward the cylinder
    assert torch.equal(env.command[2:], action_to_command(action, env.scaling)[2:])  # nothing near: as commanded


def test_full_speed_at_an_obstacle_stops_short_with_the_guard_and_hits_without(make_env, guarded_env):
    action = torch.tensor([[1.0, 0.0, 0.0]]).expand(4, 3).clone()
    plain = make_env(
        4, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", NO_RANDOMIZATION, "env.guard.enabled=false"
    )
    assert plain.guard is None
    outcomes = {}
    for name, env in (("guarded", guarded_env), ("plain", plain)):
        env.auto_reset = False
        env.reset(_wall_rooms(env))
        hit = torch.zeros(4, dtype=torch.bool)
        for _ in range(40):  # 4 s; at 1.5 m/s the cylinder is reached in under 1 s
            env.step(action)
            hit |= env.last_info.collision
        outcomes[name] = (hit.clone(), env.pose()[:, 0].clone())
        env.auto_reset = True
    hit, x = outcomes["plain"]
    assert hit[:2].all()
    hit, x = outcomes["guarded"]
    assert not hit.any()
    # Stopped in front of the cylinder: its surface is x = -0.5 - radius; the shell keeps a gap.
    surface = -0.5 - guarded_env.env_cfg.room.cylinder_radius[0]  # slot 0: the smallest cylinder
    gap = surface - (x[:2] + 0.2)
    assert (gap > 0.0).all() and (gap < 0.1).all(), gap


def test_benchmark_reports_the_guards_cost(tmp_path, capsys):
    from navsim.benchmark import main

    out = tmp_path / "bench.json"
    argv = ["--num-envs", "4", "--steps", "2", "--warmup", "1", "--no-reference", "--guard-cost", "--json", str(out)]
    assert main([*argv, "randomization.enabled=false"]) == 0
    row = json.loads(out.read_text())["results"]["4"]
    assert row["env_steps_per_s"] > 0 and row["env_steps_per_s_guard_off"] > 0
    assert "guard cost at 4 worlds: NavEnv.step" in capsys.readouterr().out
