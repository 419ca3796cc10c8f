"""The collision guard (navcontract.guard): its rule on hand-made scans, numpy and torch alike (unseen
beams occupied), and the simulator driving through it, last after the clamp and the command smoother
(the command the base gets, a robot driven at a wall, a 270-degree lidar, dropped readings)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from navcontract.action import ActionScaling, action_to_command
from navcontract.base import DIFF_DRIVE
from navcontract.guard import (
    MOMENTUM_SAMPLES,
    MOMENTUM_TOLERANCE,
    STAGE,
    UNSEEN_CLEARANCE,
    GuardRule,
    _least_free,
    apply_guard,
    axis_path,
    brake_command,
    braking_speed,
    fan_size,
    free_distances,
    guard_scale,
    sight_turn_caps,
    sight_turned,
    turn_fan,
)
from navcontract.scan import ScanReport
from navcontract.xp import ops_for
from navdeploy.gate import clamp_command
from navdeploy.runtime import ScanInput
from navdeploy.settings import Limits
from navdeploy.smoother import AccelLimits, VelocitySmoother
from navdeploy.states import State
from navsim.actuation import CommandStages
from support.gates import make_gate
from support.recorded_scans import FIELD_18_RANGES, FIELD_18_RULE, FIELD_27_RANGES
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
    slide = replace(RULE, slide=True)
    near = ranges.copy()
    near[:, 40] = gen.uniform(0.2, 0.24, size=256)  # inside the margin
    _, slide_np = apply_guard(near, cmd, slide, R_MAX)
    _, slide_t = apply_guard(torch.from_numpy(near), torch.from_numpy(cmd), slide, R_MAX)
    assert np.allclose(slide_t.numpy(), slide_np, atol=1e-6)
    assert 0.05 < float((scale_np < 1).mean()) < 0.95  # the batch exercises both branches
    # One world at a time gives the batch's numbers.
    single = np.array([float(guard_scale(ranges[i], cmd[i], RULE, R_MAX)) for i in range(20)])
    assert np.allclose(single, scale_np[:20], atol=1e-6)


def test_the_fan_checked_at_once_is_the_minimum_over_its_directions():
    """guard_scale checks every direction of a turning command's fan in one pass (a single robot, a
    torch batch) or one direction at a time (a large numpy batch, the DWA's samples): a robot alone
    gets its batch's scale bit for bit, and both are the scale of the least free distance over the
    directions checked one by one, unseen beams included."""
    gen = np.random.default_rng(11)
    rule = replace(RULE, radius=0.333, slide=True, reaction=0.32)
    ranges = gen.uniform(0.3, R_MAX, size=(64, B)).astype(np.float32)
    ranges[gen.uniform(size=ranges.shape) < 0.85] = R_MAX
    cmd = np.stack([gen.uniform(-2, 2, 64), gen.uniform(-1, 1, 64), gen.uniform(-4, 4, 64)], -1).astype(np.float32)
    seen = gen.uniform(size=ranges.shape) > 0.03
    for mask in (None, seen):
        # The reference: each direction alone, as free_distances states it, then the scale.
        dist = np.full(64, np.inf, dtype=np.float32)
        for turn in turn_fan(cmd, rule):
            free, blocks = free_distances(ranges, cmd, rule, R_MAX, mask, turn)
            least = np.where(blocks, free, 1e6).min(axis=-1)
            if mask is not None:
                least = np.where((blocks & ~mask).any(axis=-1), -1.0, least)
            dist = np.minimum(dist, least)
        speed = np.hypot(cmd[:, 0], cmd[:, 1])
        free_d = np.maximum(dist, 0.0)
        cap = np.minimum(free_d / rule.time_headway, braking_speed(free_d, rule.reaction, rule.decel))
        expected = np.minimum(cap / speed, 1.0)
        batch = guard_scale(ranges, cmd, rule, R_MAX, mask)  # 64 > FAN_AT_ONCE_MAX: one at a time
        single = np.array(
            [float(guard_scale(ranges[i], cmd[i], rule, R_MAX, None if mask is None else mask[i])) for i in range(64)]
        )
        fixed = fan_size(2.0, 4.0, rule)
        t_mask = None if mask is None else torch.from_numpy(mask)
        torch_at_once = guard_scale(torch.from_numpy(ranges), torch.from_numpy(cmd), rule, R_MAX, t_mask, fixed)
        assert np.allclose(batch, expected, rtol=1e-6, atol=1e-7)
        assert np.array_equal(single, batch)
        assert np.allclose(torch_at_once.numpy(), batch, atol=1e-6)
        assert 0.1 < float((batch < 1).mean()) < 0.9 and (dist < 0).any() == (mask is not None)


def test_rule_rejects_bad_values_and_unknown_keys():
    with pytest.raises(ValueError, match="headway"):
        replace(RULE, headway=0.0)
    with pytest.raises(ValueError, match="margin"):
        replace(RULE, margin=-0.01)
    with pytest.raises(ValueError, match="guard unseen_clearance must be finite and >= 0, got -0.1"):
        replace(RULE, unseen_clearance=-0.1)
    with pytest.raises(ValueError, match="unknown guard key.*speed"):
        GuardRule.from_dict({"speed": 1.0})
    assert GuardRule.from_dict(RULE.to_dict()) == RULE


def test_the_section_states_the_stage_the_unseen_clearance_and_the_smoother_before_it():
    section = RULE.to_dict()
    assert section["stage"] == STAGE == "last" and section["unseen_clearance"] == UNSEEN_CLEARANCE == 0.1
    assert section["after_smoother"] is False
    smoothed = replace(RULE, after_smoother=True, unseen_clearance=0.05)
    assert GuardRule.from_dict(json.loads(json.dumps(smoothed.to_dict()))) == smoothed
    # A section that states neither (a bundle exported before them) reads with the default clearance.
    old = {k: v for k, v in section.items() if k in ("radius", "margin", "headway", "decel")}
    assert GuardRule.from_dict(old) == RULE and GuardRule.from_dict(old).unseen_clearance == UNSEEN_CLEARANCE
    for key, value, message in (
        ("stage", "first", "guard.stage must be 'last'"),
        ("unseen_clearance", "0.1", "guard.unseen_clearance must be a number, got '0.1'"),
        ("unseen_clearance", -1.0, "guard unseen_clearance must be finite and >= 0, got -1.0"),
        ("after_smoother", 1, "guard.after_smoother must be true or false, got 1"),
    ):
        with pytest.raises(ValueError, match=message):
            GuardRule.from_dict({**old, key: value})


# ----------------------------------------------------------------------------------------------
# Unseen is occupied (rule step 0)

FOV_270 = np.abs(-math.pi + np.arange(B) * (2 * math.pi / B)) <= math.radians(135.0) + 1e-9
"""The beams a 270-degree lidar centred on forward sees (17 unseen, centred straight back)."""


def test_motion_into_unseen_beams_stops_and_elsewhere_is_free():
    """Open space, the back 85 degrees unseen: backing, straight or diagonally, and sideways with a
    slight backward component are stopped (whatever the fill put there, here max range), slide or
    not; straight sideways and forward are free, and so is sliding sideways while turning away from
    the blind side (toward it, the arc bends into it: stopped). The same back sectors seen: nothing
    is limited."""
    empty = _scan()
    assert int((~FOV_270).sum()) == 17
    rule = replace(RULE, slide=True)
    assert rule.unseen_range == pytest.approx(0.2 + 0.03 + 0.1)
    for cmd in ([-1.5, 0.0, 0.0], [-1.06, 1.06, 0.0], [-1.06, -1.06, 0.0], [-0.3, 1.47, 0.0], [0.0, 1.5, 1.0]):
        for r in (RULE, rule):
            assert float(guard_scale(empty, np.array(cmd), r, R_MAX, FOV_270)) == 0.0, cmd
        assert float(guard_scale(empty, np.array(cmd), RULE, R_MAX)) == 1.0  # seen: free
    for cmd in ([0.0, 1.5, 0.0], [0.0, -1.5, 0.0], [1.5, 0.0, 0.0], [1.06, 1.06, 0.0], [0.0, 1.5, -1.0]):
        assert float(guard_scale(empty, np.array(cmd), RULE, R_MAX, FOV_270)) == 1.0, cmd
    # One sector without a reading straight behind (a 360-degree lidar): backing into it stops.
    one = np.ones(B, dtype=bool)
    one[0] = False
    assert float(guard_scale(empty, np.array([-1.5, 0.0, 0.0]), RULE, R_MAX, one)) == 0.0


def test_the_unseen_rule_only_ever_lowers_a_range():
    """With any seen mask the guard allows at most what it allows without one; a return nearer than
    the unseen range in an unseen sector (a conservative fill) keeps its own range."""
    gen = np.random.default_rng(11)
    ranges = gen.uniform(0.2, R_MAX, size=(256, B)).astype(np.float32)
    cmd = gen.uniform(-1.5, 1.5, size=(256, 3)).astype(np.float32)
    seen = gen.uniform(size=(256, B)) > 0.1
    with_rule = guard_scale(ranges, cmd, RULE, R_MAX, seen)
    assert np.all(with_rule <= guard_scale(ranges, cmd, RULE, R_MAX) + 1e-7)
    assert float((with_rule < guard_scale(ranges, cmd, RULE, R_MAX) - 1e-3).mean()) > 0.1
    wall = _scan(**{f"b{b}": 0.25 for b in range(3)})  # a virtual wall nearer than the unseen range
    back = np.array([-1.5, 0.0, 0.0])
    assert float(guard_scale(wall, back, RULE, R_MAX, FOV_270)) == 0.0 < float(guard_scale(wall, back, RULE, R_MAX))
    # numpy and torch, batched, agree with the mask too
    _, s_np = apply_guard(ranges, cmd, RULE, R_MAX, seen)
    _, s_t = apply_guard(torch.from_numpy(ranges), torch.from_numpy(cmd), RULE, R_MAX, torch.from_numpy(seen))
    assert np.allclose(s_t.numpy(), s_np, atol=1e-6)


# ----------------------------------------------------------------------------------------------
# The command stages: clamp, smoother, guard last (navsim.actuation.CommandStages)

SCALING = ActionScaling(v_max=1.5, omega_max=2.0, limit_planar_speed=True)
ACCEL = AccelLimits(2.5, 3.2)


def test_stages_are_the_gates_stages_batched():
    """CommandStages (torch, batched) against the gate's stages on numpy, one robot at a time: the
    clamp, VelocitySmoother.propose from the last sent command with the gate's clamp, then the guard;
    random actions, previous commands, scans and seen masks (some turns held by rule step 0b)."""
    gen = np.random.default_rng(4)
    n = 128
    actions = gen.uniform(-1.4, 1.4, size=(n, 3)).astype(np.float32)
    prev = np.asarray(action_to_command(gen.uniform(-1, 1, size=(n, 3)).astype(np.float32), SCALING))
    ranges = gen.uniform(0.22, R_MAX, size=(n, B)).astype(np.float32)
    seen = gen.uniform(size=(n, B)) > 0.02
    stages = CommandStages(SCALING, RULE, R_MAX, ACCEL, 0.1)
    out, scale = stages(*(torch.from_numpy(x) for x in (actions, prev, ranges, seen)))
    limits = Limits(1.5, 2.0, True)
    held = 0
    for i in range(n):
        s = VelocitySmoother(ACCEL, 0.1)
        s.sent(prev[i], 0.0)
        target = clamp_command(np.asarray(action_to_command(actions[i : i + 1], SCALING)[0]), limits)
        smoothed = s.propose(target, 0.1, clamp=lambda c: clamp_command(c, limits))
        sent, k = apply_guard(ranges[i], smoothed, RULE, R_MAX, seen[i])
        assert np.allclose(out[i].numpy(), sent, atol=1e-5), i
        assert float(scale[i]) == pytest.approx(float(k), abs=1e-5)
        held += int(abs(sent[2]) < abs(smoothed[2]) - 1e-6)
    assert 0.1 < float((scale < 1).float().mean()) < 0.9
    assert held >= 5, held  # 14 of 128 with this seed


def test_a_guard_cut_is_sent_beyond_the_smoothers_limit():
    stages = CommandStages(SCALING, RULE, R_MAX, ACCEL, 0.1)
    prev = torch.tensor([[1.5, 0.0, 0.0], [1.5, 0.0, 0.0]])
    scans = torch.from_numpy(np.stack([_scan(), _scan(**{f"b{FORWARD}": 0.235})]))
    out, scale = stages(torch.tensor([[1.0, 0.0, 0.0]] * 2), prev, scans, None)
    assert out[0].tolist() == [1.5, 0.0, 0.0] and float(scale[0]) == 1.0
    assert out[1].tolist() == [0.0, 0.0, 0.0] and float(scale[1]) == 0.0  # not 1.25: a stop is not ramped
    ramp, _ = stages(torch.tensor([[-1.0, 1.0, 1.0]]), torch.zeros(1, 3), scans[:1], None)
    assert ramp[0].tolist() == pytest.approx([-0.25, 0.25, 0.32])
    off = CommandStages(SCALING, None, R_MAX, AccelLimits(), 0.1)
    out, scale = off(torch.tensor([[-1.0, 1.0, 1.0]]), torch.zeros(1, 3), scans[:1], None)
    assert scale is None and out[0].tolist() == pytest.approx([-1.5 / math.sqrt(2), 1.5 / math.sqrt(2), 2.0])


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
    # conf/nav.yaml; without randomisation the guard reacts in one control period.
    conf = GuardRule(radius=0.2, margin=0.01, headway=0.5, decel=2.5, slide=True, after_smoother=True, reaction=0.1)
    assert env.guard == conf and env.guard.unseen_clearance == 0.1
    assert not env.stages.accel.active  # no randomisation: no acceleration limit, the smoother passes
    env.reset(_wall_rooms(env))
    assert env.scan_seen is None  # a full view without dropouts: every beam seen
    action = torch.tensor([[1.0, 0.0, 0.3]]).expand(env.num_envs, 3).clone()
    for _ in range(6):
        seen, twist = env.scan.clone(), env.observed_twist.clone()
        env.step(action)
        command = action_to_command(action, env.scaling)
        expected, _ = apply_guard(seen, command, env.guard, env.dims.max_range, motion=twist)
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


def test_a_270_degree_robot_never_backs_in_the_simulator(make_env):
    """env.lidar.fov_deg=270: the env knows the sectors its field of view leaves unseen, and a policy
    backing at full speed into them is stopped (with the full view: full speed)."""
    speeds = {}
    for fov in (360, 270):
        env = make_env(
            2,
            "env.init_at_random_ep_len=false",
            "env.lidar.noise_std=0.0",
            NO_RANDOMIZATION,
            f"env.lidar.fov_deg={fov}",
        )
        env.auto_reset = False
        env.reset(empty_rooms(env, start=(1.5, 0.0, 0.0), goal=(3.0, 0.0)))
        if fov == 270:
            assert torch.equal(env.scan_seen, env.fov_seen.expand(2, -1)) and int((~env.fov_seen).sum()) == 17
        x0 = env.pose()[:, 0].clone()
        for _ in range(10):
            env.step(torch.tensor([[-1.0, 0.0, 0.0]] * 2))
            speeds.setdefault(fov, []).append(float(torch.linalg.norm(env.command[:, :2], dim=-1).max()))
        speeds[f"moved{fov}"] = float((x0 - env.pose()[:, 0]).max())
    assert speeds[360] == [pytest.approx(1.5)] * 10 and speeds["moved360"] > 1.4
    assert speeds[270] == [0.0] * 10 and speeds["moved270"] < 1e-3


def test_dropped_readings_are_unseen_and_the_stages_run_in_the_robots_order(make_env):
    """Randomisation on (acceleration limits: the smoother runs; lidar dropout: sectors without a
    reading): each step's command is CommandStages of the action, the command sent before, the scan
    the policy saw and the beams it saw, which are the readings that did not drop out."""
    env = make_env(
        8,
        "env.init_at_random_ep_len=false",
        "randomization.nominal_share=0.0",
        "randomization.terms.lidar_dropout.params.prob=[0.2,0.2]",
    )
    assert env.stages.accel == AccelLimits(2.5, 3.2) and env.guard.after_smoother
    gen = torch.Generator().manual_seed(0)
    dropped = 0
    for _ in range(12):
        assert torch.equal(env.scan_seen, ~torch.isnan(env.scan_readings))
        dropped += int((~env.scan_seen).sum())
        action = torch.rand(8, 3, generator=gen) * 2.4 - 1.2
        before = (env.command.clone(), env.scan.clone(), env.scan_seen.clone())
        expected, _ = env.stages(action, *before)
        _, _, dones, _ = env.step(action)
        live = ~dones.bool()
        assert torch.equal(env.command[live], expected[live])
    assert dropped > 100


def test_benchmark_reports_the_guards_cost(tmp_path, capsys):
    from navsim.benchmark import main

    out = tmp_path / "bench.json"
    argv = ["--num-envs", "4", "--steps", "2", "--warmup", "1", "--no-reference", "--guard-cost", "--json", str(out)]
    assert main([*argv, "randomization.enabled=false"]) == 0
    row = json.loads(out.read_text())["results"]["4"]
    assert row["env_steps_per_s"] > 0 and row["env_steps_per_s_guard_off"] > 0
    assert "guard cost at 4 worlds: NavEnv.step" in capsys.readouterr().out


WORST_BASE = (
    "randomization.nominal_share=0.0",
    "randomization.terms.actuator_lag.params.tau=[0.12,0.12]",
    "randomization.terms.accel_limit.params.linear=[2.5,2.5]",
    "randomization.terms.command_latency.params.substeps=[2,2]",
    "randomization.terms.observation_latency.params.substeps=[2,2]",
    "randomization.terms.control_jitter.params.substeps=[1,1]",
    *(
        f"randomization.terms.{t}.enabled=false"
        for t in ("lidar_noise", "lidar_bias", "lidar_dropout", "lidar_spurious", "lidar_yaw", "odom_twist")
    ),
)
"""The slowest base training draws (conf/nav.yaml): every delay, the actuator lag and the acceleration
limit at their worst ends; the scan exact."""


def test_the_guard_reacts_in_the_time_the_worst_trained_base_needs(make_env):
    """Driven at full speed at a post from 0.6 to 2.35 m away, the slowest trained base stops short
    behind the guard with its reaction time (control period + latency budget + actuator lag = 0.32 s);
    the same guard without it (the headway rule alone, the braking cap without a reaction time)
    touches the post from every distance but the shortest."""
    env = make_env(8, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", *WORST_BASE)
    assert env.guard is not None and env.guard.reaction == pytest.approx(0.1 + 0.1 + 0.12)
    assert env.guard.time_headway == pytest.approx(math.e * 0.32)
    action = torch.tensor([[1.0, 0.0, 0.0]]).expand(env.num_envs, 3).clone()
    hits = {}
    for reaction in (env.guard.reaction, 0.0):
        env.guard = env.stages.guard = replace(env.guard, reaction=reaction)
        env.auto_reset = False
        rooms = empty_rooms(env, start=(-2.0, 0.0, 0.0), goal=(3.0, 0.0))
        for w in range(env.num_envs):
            place_obstacle(rooms, w, 0, (-1.4 + 0.25 * w, 0.08 * (w % 3)))
        env.reset(rooms)
        hit = torch.zeros(env.num_envs, dtype=torch.bool)
        for _ in range(40):
            env.step(action)
            hit |= env.last_info.collision
        hits[reaction] = hit
    assert not hits[0.32].any()
    assert hits[0.0][1:].all(), hits[0.0]


def test_braking_speed_stops_within_the_free_distance_after_the_reaction_time():
    for free in (0.0, 0.01, 0.3, 1.0, 4.0):
        for reaction, decel in ((0.0, 2.5), (0.1, 2.5), (0.32, 2.5), (0.32, 0.5)):
            v = braking_speed(free, reaction, decel)
            assert v * reaction + v * v / (2.0 * decel) == pytest.approx(free, abs=1e-12)
            many = braking_speed(np.array([free, free]), reaction, decel)
            assert many == pytest.approx([v, v], rel=1e-12)
            assert float(braking_speed(torch.tensor([free], dtype=torch.float64), reaction, decel)[0]) == (
                pytest.approx(v, rel=1e-12)
            )
    assert braking_speed(0.5, 0.0, 2.5) == math.sqrt(2.0 * 2.5 * 0.5)


def test_headway_grows_with_the_reaction_time_and_caps_the_speed():
    rule = replace(RULE, reaction=0.32)
    assert RULE.time_headway == RULE.headway and rule.time_headway == pytest.approx(math.e * 0.32)
    r = 1.0
    cmd = np.array([1.5, 0.0, 0.0])
    free = r - (rule.radius + rule.margin + r * math.sin(HALF_SECTOR))
    scale = float(guard_scale(_scan(**{f"b{FORWARD}": r}), cmd, rule, R_MAX))
    assert scale * 1.5 == pytest.approx(rule.speed_cap(free), rel=1e-6)
    assert rule.speed_cap(free) == pytest.approx(free / (math.e * 0.32))
    assert float(guard_scale(_scan(**{f"b{FORWARD}": r}), cmd, RULE, R_MAX)) > scale  # no reaction: faster


def test_a_turning_command_is_checked_along_its_arc():
    """Sliding left while turning right at 2 rad/s, the robot's path bends toward a post 50 degrees
    left at 0.7 m that the straight sweep along +y passes: the fan of rule step 2b slows the command
    to about half, the same motion without turning is not slowed, and turning left bends away."""
    rule = replace(RULE, reaction=0.32)
    post = _scan(**{f"b{FORWARD + 10}": 0.7})  # 10 beams of 5 degrees: 50 degrees left
    assert float(guard_scale(post, np.array([0.0, -1.0, 0.0]), rule, R_MAX)) == 1.0
    assert float(guard_scale(post, np.array([0.0, 1.0, 0.0]), rule, R_MAX)) == 1.0  # +y: 40 degrees off
    spinning = float(guard_scale(post, np.array([0.0, 1.0, -2.0]), rule, R_MAX))
    assert 0.3 < spinning < 0.6
    assert float(guard_scale(post, np.array([0.0, 1.0, 2.0]), rule, R_MAX)) == 1.0


def test_a_fixed_fan_size_gives_the_batchs_own_guard():
    """``fan`` (the widest fan the base's limits allow) in place of the batch's widest: the same
    scales in numpy and torch, for still, straight, slow-turning and fast-spinning commands; the
    fan size bounds every command the clamp lets out."""
    rule = replace(RULE, reaction=0.32, slide=True)
    rng = np.random.default_rng(3)
    scans = rng.uniform(0.25, 3.0, (64, 72))
    commands = np.column_stack([rng.uniform(-1.5, 1.5, 64), rng.uniform(-1.5, 1.5, 64), rng.uniform(-2.0, 2.0, 64)])
    commands[:4] = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.05], [1.5, 1.5, 2.0]]
    most = fan_size(math.hypot(1.5, 1.5), 2.0, rule)
    assert len(turn_fan(commands, rule)) - 1 <= most  # the batch's widest is within the bound
    for xp in (np.asarray, torch.from_numpy):
        ranges, cmds = xp(scans), xp(commands)
        own = np.asarray(guard_scale(ranges, cmds, rule, R_MAX))
        fixed = np.asarray(guard_scale(ranges, cmds, rule, R_MAX, fan=most))
        assert np.array_equal(own, fixed) and (own < 1.0).any() and (own == 1.0).any()
    stages = CommandStages(SCALING, rule, R_MAX, ACCEL, 0.1)
    assert stages.fan == fan_size(math.hypot(SCALING.v_max, SCALING.v_max), SCALING.omega_max, rule)


# ----------------------------------------------------------------------------------------------
# Momentum (rule step 5)

POST_45 = _scan(b45=0.5)
SWITCH_TICK = 12
"""Control periods driven left before the command turns forward (the slowest base is at full speed)."""
POST_OFFSETS = ((0.45, 0.55), (0.5, 0.6))
"""[m] A post's centre (the smallest cylinder, 0.15 m) from where the command turns, one per world."""
"""A post 0.5 m away at 45 degrees left of forward (beam 45 spans 42.5-47.5 degrees)."""


def test_momentum_stops_a_base_whose_velocity_sweeps_into_a_return():
    """Moving left at 1.5 m/s, told to go forward at 1.5 m/s: both directions pass the post at 45
    degrees, but the base's velocity turns from one to the other through it, too fast to stop."""
    rule = replace(RULE, momentum=True, reaction=0.32)
    forward = np.array([1.5, 0.0, 0.0])
    assert float(guard_scale(POST_45, forward, rule, R_MAX)) == 1.0  # the command's own direction is free
    out, scale = apply_guard(POST_45, forward, rule, R_MAX, motion=np.array([0.0, 1.5, 0.0]))
    assert float(scale) == 0.0 and out[0] == 0.0 and out[1] == 0.0
    # The same command from rest, or while already moving forward, or a base slow enough to stop: free.
    for motion in ([0.0, 0.0, 0.0], [0.06, -0.05, 0.3], [1.5, 0.0, 0.0], [0.0, 0.3, 0.0]):
        assert float(apply_guard(POST_45, forward, rule, R_MAX, motion=np.array(motion))[1]) == 1.0, motion
    # Without the rule, or without a measured twist, step 5 is not applied.
    off = replace(rule, momentum=False)
    assert float(apply_guard(POST_45, forward, off, R_MAX, motion=np.array([0.0, 1.5, 0.0]))[1]) == 1.0
    assert float(apply_guard(POST_45, forward, rule, R_MAX)[1]) == 1.0


def test_momentum_stops_only_a_turn_toward_a_return_the_base_could_still_avoid():
    """Moving forward with a post ahead-left, told to go left: the base turns its velocity through
    the post. Stopped while its own motion can still stop before the post; once its own motion cannot
    (it drives at the post), braking along it helps less than the command, which goes out."""
    rule = replace(RULE, momentum=True, reaction=0.32)
    side = np.array([0.0, 1.5, 0.0])
    assert float(guard_scale(POST_45, side, rule, R_MAX)) == 1.0
    assert float(apply_guard(POST_45, side, rule, R_MAX, motion=np.array([1.5, 0.0, 0.0]))[1]) == 0.0
    at_post = np.array([1.2 * math.cos(math.pi / 4), 1.2 * math.sin(math.pi / 4), 0.0])  # straight at it
    assert float(apply_guard(POST_45, side, rule, R_MAX, motion=at_post)[1]) == 1.0
    # Moving at a post ahead, told to back away: backing is braking, and it goes out as it is.
    ahead = _scan(**{f"b{FORWARD}": 0.6})
    back = np.array([-1.0, 0.0, 0.0])
    assert float(apply_guard(ahead, back, rule, R_MAX, motion=np.array([1.2, 0.0, 0.0]))[1]) == 1.0
    free = 0.6 - (rule.radius + rule.margin + 0.6 * math.sin(HALF_SECTOR))
    assert braking_speed(free, rule.reaction, rule.decel) + MOMENTUM_TOLERANCE < 1.2  # it could not stop


FIELD_87_TICK_40 = np.array(
    [float(v) for v in (
        "4.23,0.99,1.02,1.39,1.73,1.74,0.79,0.75,0.75,1.38,1.40,2.03,2.08,2.70,2.07,2.03,2.26,2.15,2.08,2.04,2.00,"
        "1.94,1.94,1.71,0.77,0.73,0.73,2.15,2.20,2.20,2.13,2.66,2.93,2.83,3.60,3.50,3.40,2.33,1.21,2.29,3.71,1.80,"
        "1.01,0.72,0.53,0.35,0.30,0.30,0.28,0.35,2.67,2.48,2.34,2.26,2.17,2.12,2.07,2.04,2.05,2.04,2.03,0.81,0.83,"
        "2.21,2.32,2.42,1.68,1.72,2.46,3.33,3.78,4.36"
    ).split(",")]
)  # fmt: skip
"""The 72 sector minima the gate read at 4.0 s in holonomic clutter field 87 of nav-compare (seed
1000003, batches of 100, the DWA), a post 0.28 m away at about -115 degrees."""


def test_momentum_allows_the_way_through_a_post_no_more_noise_than_it_carries():
    """The base at 1 m/s, told to swing its motion from forward-right to back-left past a post: every
    velocity on the way is within ``b`` plus the whole tolerance, yet those half way are 0.02-0.07 m/s
    over ``b`` plus their share of it, and the base, one tick later, could no longer stop (it touched
    the post). Stopped; the same command from rest, or with no measured twist, and the motion held on,
    go out."""
    rule = replace(RULE, radius=0.2, margin=0.01, decel=2.5, reaction=0.32, momentum=True)
    measured, command = np.array([0.99, -0.28, 0.59]), np.array([-0.22, 0.4, 0.64])
    assert float(apply_guard(FIELD_87_TICK_40, command, rule, 6.0, motion=measured)[1]) == 0.0
    assert float(apply_guard(FIELD_87_TICK_40, command, rule, 6.0, motion=np.zeros(3))[1]) == 1.0
    assert float(apply_guard(FIELD_87_TICK_40, command, rule, 6.0)[1]) == 1.0
    assert float(apply_guard(FIELD_87_TICK_40, measured, rule, 6.0, motion=measured)[1]) == 1.0


def test_momentum_never_stops_a_base_lagging_the_cap_or_at_the_cap_itself():
    """An ordinary approach: the base faster than the guard's cap in the command's own direction (up to
    the whole tolerance over ``b``), or at the cap exactly, is never stopped by step 5."""
    rule = replace(RULE, momentum=True, reaction=0.32)
    ahead = _scan(**{f"b{FORWARD}": 1.0})
    capped, scale = apply_guard(ahead, np.array([3.0, 0.0, 0.0]), rule, R_MAX)
    assert 0.0 < float(scale) < 1.0
    cap = float(capped[0])
    for measured in (cap, cap + 0.05, cap + MOMENTUM_TOLERANCE * 0.99):
        out = apply_guard(ahead, np.asarray(capped), rule, R_MAX, motion=np.array([measured, 0.0, 0.0]))
        assert float(out[1]) == 1.0, measured


def test_momentum_in_torch_and_numpy_agree_batched():
    rule = replace(RULE, momentum=True, reaction=0.2)
    rng = np.random.default_rng(5)
    ranges = np.full((64, B), R_MAX)
    for row in ranges:  # a few posts each
        row[rng.choice(B, size=4, replace=False)] = rng.uniform(0.4, 1.5, size=4)
    command = rng.uniform(-1.5, 1.5, size=(64, 3))
    motion = rng.uniform(-1.5, 1.5, size=(64, 3))
    a, sa = apply_guard(ranges, command, rule, R_MAX, motion=motion)
    b, sb = apply_guard(torch.tensor(ranges), torch.tensor(command), rule, R_MAX, motion=torch.tensor(motion))
    assert np.allclose(a, b.numpy()) and np.allclose(sa, sb.numpy())
    plain = np.asarray(guard_scale(ranges, command, rule, R_MAX))
    assert np.all(np.asarray(sa) <= plain)  # step 5 only ever lowers the scale
    by_step_5 = int(((np.asarray(sa) == 0.0) & (plain > 0.0)).sum())
    assert 0 < by_step_5 < 64, by_step_5


@pytest.mark.parametrize(("key", "bad"), [("momentum", "yes"), ("keep_sight", 1)])
def test_the_section_states_the_flag_and_an_older_one_reads_it_on(key: str, bad: object):
    """Rule steps 5 (``momentum``) and 0b (``keep_sight``) apply to every robot: a section from
    before the key reads it on."""
    assert RULE.to_dict()[key] is True
    old = {k: v for k, v in RULE.to_dict().items() if k != key}
    assert getattr(GuardRule.from_dict(old), key) is True
    assert getattr(GuardRule.from_dict({**old, key: False}), key) is False
    with pytest.raises(ValueError, match=f"guard.{key} must be true or false, got {bad!r}"):
        GuardRule.from_dict({**old, key: bad})


def test_a_base_turned_from_its_motion_stops_short_of_the_post_in_the_simulator(make_env):
    """The slowest trained base driven left at full speed past a post ahead on its right, then told
    to drive back and to the right: neither direction ever points at the post, but the base turns
    its velocity through it. Without rule step 5 it touches the post; with it the base brakes."""
    env = make_env(2, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", *WORST_BASE)
    env.auto_reset = False
    left = torch.tensor([[0.0, 1.0, 0.0]]).expand(2, 3).clone()
    away = torch.tensor([[1.0, -1.0, 0.0]]).expand(2, 3).clone()  # planar limit: 1.5 m/s at -45 degrees
    start = (-2.0, -2.5, 0.0)
    env.reset(empty_rooms(env, start=start, goal=(3.0, 3.0)))
    for _ in range(SWITCH_TICK):
        env.step(left)
    turn_at = env.pose()[0, :2].clone()
    assert float(env.body_twist()[0, 1]) > 1.45  # full speed when the command turns
    hits = {}
    for momentum in (False, True):
        env.guard = env.stages.guard = replace(env.guard, momentum=momentum)
        rooms = empty_rooms(env, start=start, goal=(3.0, 3.0))
        for w, (dx, dy) in enumerate(POST_OFFSETS):
            place_obstacle(rooms, w, 0, (float(turn_at[0]) + dx, float(turn_at[1]) + dy))
        env.reset(rooms)
        hit = torch.zeros(2, dtype=torch.bool)
        for k in range(SWITCH_TICK + 20):
            env.step(left if k < SWITCH_TICK else away)
            hit |= env.last_info.collision
        hits[momentum] = hit
    env.guard = env.stages.guard = replace(env.guard, momentum=True)
    assert hits[False].all() and not hits[True].any(), hits


def test_a_sweep_lag_stops_the_swing_that_revision_2_let_out_from_where_the_robot_stood():
    ranges = np.array(FIELD_18_RANGES)
    checked, measured = np.array([0.6481, 0.3107, 0.4233]), np.array([0.331, -0.716, 0.466])
    out, scale = apply_guard(ranges, checked, FIELD_18_RULE, 6.0, motion=measured)
    assert float(scale) == 1.0  # as the node judged it that tick: the post 0.47 m off, 15 degrees right
    for lag in (0.03, 0.06):
        _, lagged = apply_guard(ranges, checked, replace(FIELD_18_RULE, sweep_lag=lag), 6.0, motion=measured)
        assert float(lagged) == 0.0, lag
    # Steps 1-4 do not change: the same command from rest is let out as it is, lag or not.
    rest = np.zeros(3)
    assert float(apply_guard(ranges, checked, replace(FIELD_18_RULE, sweep_lag=0.06), 6.0, motion=rest)[1]) == 1.0


def test_a_sweep_lag_of_zero_is_revision_2_exactly_and_torch_agrees_with_numpy():
    rng = np.random.default_rng(7)
    ranges = np.full((128, B), R_MAX)
    for row in ranges:
        row[rng.choice(B, size=6, replace=False)] = rng.uniform(0.3, 1.5, size=6)
    command = rng.uniform(-1.5, 1.5, size=(128, 3))
    motion = rng.uniform(-1.5, 1.5, size=(128, 3))
    rule = replace(RULE, momentum=True, reaction=0.32)
    plain = apply_guard(ranges, command, rule, R_MAX, motion=motion)[1]
    assert np.array_equal(plain, apply_guard(ranges, command, replace(rule, sweep_lag=0.0), R_MAX, motion=motion)[1])
    lagged = replace(rule, sweep_lag=0.12)
    a = np.asarray(apply_guard(ranges, command, lagged, R_MAX, motion=motion)[1])
    b = apply_guard(torch.tensor(ranges), torch.tensor(command), lagged, R_MAX, motion=torch.tensor(motion))[1]
    assert np.allclose(a, b.numpy())
    assert np.all(a <= np.asarray(plain))  # the lag only ever stops more
    assert int(((a == 0.0) & (np.asarray(plain) > 0.0)).sum()) > 0


def test_a_sweep_lag_never_stops_a_base_speeding_up_straight_toward_open_space_or_the_cap():
    """From rest, or lagging the cap, straight on toward a post ahead at the guard's own cap: the
    velocities on the way all point the command's way and are slower than it, so no lag stops it."""
    rule = replace(RULE, momentum=True, reaction=0.32, sweep_lag=0.12)
    ahead = _scan(**{f"b{FORWARD}": 1.2})
    capped = np.asarray(apply_guard(ahead, np.array([1.5, 0.0, 0.0]), rule, R_MAX)[0])
    for measured in (0.0, 0.3, 0.6):
        assert float(apply_guard(ahead, capped, rule, R_MAX, motion=np.array([measured, 0.0, 0.0]))[1]) > 0.0
    open_space = np.full(B, R_MAX)
    assert (
        float(apply_guard(open_space, np.array([1.5, 0.5, 0.3]), rule, R_MAX, motion=np.array([0.0, -1.0, 0.0]))[1])
        == 1.0
    )


def test_the_section_states_the_sweep_lag_and_an_older_one_reads_zero():
    assert replace(RULE, sweep_lag=0.05).to_dict()["sweep_lag"] == 0.05
    old = {k: v for k, v in RULE.to_dict().items() if k != "sweep_lag"}
    assert GuardRule.from_dict(old).sweep_lag == 0.0
    with pytest.raises(ValueError, match="guard sweep_lag must be finite and >= 0, got -0.1"):
        GuardRule.from_dict({**old, "sweep_lag": -0.1})


FIELD_27_RULE = replace(FIELD_18_RULE, steer=30.0, sweep_lag=0.06)
FIELD_27_CHECKED = np.array([0.9285, 0.0874, 0.0072])  # the smoothed, steered command, 5.4 degrees left
FIELD_27_MEASURED = np.array([1.4865, 0.4638, -0.0124])  # the base at 1.56 m/s, 17.3 degrees left


def _cannot_stop(ranges: np.ndarray, velocities: np.ndarray, rule: GuardRule) -> np.ndarray:
    """Per planar velocity: faster than the robot could stop from before the return along it (steps 0-3)."""
    out = []
    for v in velocities:
        free = float(_least_free(ops_for(ranges), ranges, np.array([v[0], v[1], 0.0]), rule, 6.0, None, None))
        out.append(math.hypot(v[0], v[1]) > float(braking_speed(max(free, 0.0), rule.reaction, rule.decel)) + 1e-4)
    return np.array(out)


def test_a_per_axis_base_bends_the_cut_that_revision_2_let_out_into_the_post_ahead():
    """Revision 2 cuts the command to a quarter and lets it out: the straight blend from the base's
    velocity to it stays clear. A base limited per axis takes off the sideways part first and drives
    on along x at about 1 m/s, at the post it can no longer stop for (the robot touched it 0.5 s
    later); a zero command bends the same way."""
    ranges = np.array(FIELD_27_RANGES)
    out, scale = apply_guard(ranges, FIELD_27_CHECKED, FIELD_27_RULE, 6.0, motion=FIELD_27_MEASURED)
    assert 0.2 < float(scale) < 0.35  # as the node judged it that tick
    a = np.linspace(0.0, 1.0, MOMENTUM_SAMPLES)
    straight = (1.0 - a)[:, None] * FIELD_27_MEASURED[None, :2] + a[:, None] * np.asarray(out)[None, :2]
    assert not _cannot_stop(ranges, straight, FIELD_27_RULE).any()
    for target in (np.asarray(out), np.zeros(3)):
        bent = np.asarray(axis_path(ops_for(ranges), FIELD_27_MEASURED, target, a))
        assert _cannot_stop(ranges, bent[:, :2], FIELD_27_RULE)[1:-1].any()
        assert abs(math.degrees(math.atan2(bent[4, 1], bent[4, 0]))) < 3.0  # along x by half way


def test_axis_brake_stops_that_tick_by_braking_along_the_measured_motion():
    ranges = np.array(FIELD_27_RANGES)
    rule = replace(FIELD_27_RULE, axis_brake=True)
    out, scale = apply_guard(ranges, FIELD_27_CHECKED, rule, 6.0, motion=FIELD_27_MEASURED, period=0.1)
    out = np.asarray(out)
    assert float(scale) == 0.0 and out[2] == 0.0
    speed = math.hypot(*FIELD_27_MEASURED[:2])
    assert math.hypot(out[0], out[1]) == pytest.approx(speed - 2.5 * 0.1)
    assert math.atan2(out[1], out[0]) == pytest.approx(math.atan2(FIELD_27_MEASURED[1], FIELD_27_MEASURED[0]))
    # Its path, per axis or straight, stays on a line the robot can stop along; the next tick slower
    # still, the brake goes on, down to zero.
    bent = np.asarray(axis_path(ops_for(ranges), FIELD_27_MEASURED, out, np.linspace(0.0, 1.0, MOMENTUM_SAMPLES)))
    assert not _cannot_stop(ranges, bent[:, :2], rule).any()
    slow = np.array([0.2, 0.06, 0.0])
    assert float(np.hypot(*np.asarray(brake_command(ops_for(slow), slow, 2.5, 0.1))[:2])) == 0.0


def test_axis_brake_off_is_revision_2_exactly_on_needs_a_period_and_torch_agrees_with_numpy():
    rng = np.random.default_rng(11)
    ranges = np.full((128, B), R_MAX)
    for row in ranges:
        row[rng.choice(B, size=6, replace=False)] = rng.uniform(0.3, 1.5, size=6)
    command = rng.uniform(-1.5, 1.5, size=(128, 3))
    motion = rng.uniform(-1.5, 1.5, size=(128, 3))
    rule = replace(RULE, momentum=True, reaction=0.32)
    plain, plain_scale = apply_guard(ranges, command, rule, R_MAX, motion=motion)
    off, off_scale = apply_guard(ranges, command, replace(rule, axis_brake=False), R_MAX, motion=motion, period=0.1)
    assert np.array_equal(plain, off) and np.array_equal(plain_scale, off_scale)
    braking = replace(rule, axis_brake=True)
    with pytest.raises(ValueError, match="guard axis_brake needs the control period the command is held for, got None"):
        apply_guard(ranges, command, braking, R_MAX, motion=motion)
    out, scale = apply_guard(ranges, command, braking, R_MAX, motion=motion, period=0.1)
    t_out, t_scale = apply_guard(
        torch.tensor(ranges), torch.tensor(command), braking, R_MAX, motion=torch.tensor(motion), period=0.1
    )
    assert np.allclose(out, t_out.numpy(), atol=1e-5) and np.allclose(scale, t_scale.numpy())
    scale, plain_scale = np.asarray(scale), np.asarray(plain_scale)
    assert np.all(scale <= plain_scale)  # the per-axis path only ever stops more
    assert int(((scale == 0.0) & (plain_scale > 0.0)).sum()) > 0
    stopped = scale == 0.0
    # A stop is the brake along the measured motion, wz zero; every other command as revision 2 sent it.
    expect = np.asarray(brake_command(ops_for(motion), motion, rule.decel, 0.1))
    assert np.allclose(np.asarray(out)[stopped & (np.asarray(plain_scale) > 0)], expect[stopped & (plain_scale > 0)])
    assert np.array_equal(np.asarray(out)[~stopped], np.asarray(plain)[~stopped])
    # Without a measured twist step 5 (and its brake) is skipped, period or not.
    assert np.array_equal(apply_guard(ranges, command, braking, R_MAX)[0], apply_guard(ranges, command, rule, R_MAX)[0])


def test_the_axis_path_keeps_both_ends_and_changes_both_axes_at_one_rate():
    m, c = np.array([1.5, 0.5, 0.3]), np.array([0.0, 0.0, 0.0])
    path = np.asarray(axis_path(ops_for(m), m, c, np.linspace(0.0, 1.0, 7)))
    assert np.allclose(path[0], [1.5, 0.5, 0.0]) and np.allclose(path[-1], [0.0, 0.0, 0.0])
    assert np.allclose(path[2], [1.0, 0.0, 0.0])  # a third of the way: vy is done, vx has 1 m/s to go
    # Where one axis has as much to change as the other, the path is the straight blend.
    even = np.asarray(
        axis_path(ops_for(m), np.array([1.0, 1.0, 0.0]), np.array([-1.0, 3.0, 0.0]), np.linspace(0, 1, 5))
    )
    assert np.allclose(even[:, :2], np.stack([1.0 - 2.0 * np.linspace(0, 1, 5), 1.0 + 2.0 * np.linspace(0, 1, 5)], 1))


def test_the_section_states_axis_brake_and_an_older_one_reads_it_off():
    assert replace(RULE, axis_brake=True).to_dict()["axis_brake"] is True
    old = {k: v for k, v in RULE.to_dict().items() if k != "axis_brake"}
    assert GuardRule.from_dict(old).axis_brake is False
    with pytest.raises(ValueError, match="guard.axis_brake must be true or false, got 1"):
        GuardRule.from_dict({**old, "axis_brake": 1})


class _FixedCommand:
    """Stands in for the policy: asks for ``cmd`` and reads the training beams ``ranges``."""

    def __init__(self, cmd: np.ndarray, ranges: np.ndarray) -> None:
        self.cmd, self.ranges = cmd, ranges
        self.last_scan_report = None

    def reset(self) -> None:
        pass

    def step(self, scan, *, pose, twist, goal):
        n = len(self.ranges)
        self.last_scan_report = ScanReport(self.ranges, np.zeros(n, bool), np.ones(n, bool), 1.0, 1.0, 2 * math.pi)
        return self.cmd


@pytest.mark.parametrize("period", [0.1, 0.05])
def test_the_node_s_gate_brakes_along_the_motion_over_its_own_control_period(period: float) -> None:
    """The field-27 tick through the node's gate (no smoother: the command checked is the one asked):
    revision 2 sends the cut command, rule step 5b the brake along the odometry's twist over the gate's
    control period."""
    ranges = np.array(FIELD_27_RANGES)
    sent = {}
    for axis_brake in (False, True):
        gate = make_gate(
            _FixedCommand(FIELD_27_CHECKED, ranges),
            guard=replace(FIELD_27_RULE, steer=0.0, axis_brake=axis_brake),
            max_range=6.0,
            control_period=period,
        )
        gate.set_scan(ScanInput.training_beams(ranges, B, 6.0), 1.0)
        gate.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), tuple(FIELD_27_MEASURED), 1.0, "odom")
        gate.set_goal(8.0, 0.0, "odom")
        res = gate.tick(1.0)
        assert res.state == State.DRIVING, res.reason
        sent[axis_brake] = (res.cmd, res.guard_scale)
    assert 0.2 < sent[False][1] < 0.35 and sent[True][1] == 0.0
    expect = np.asarray(brake_command(ops_for(FIELD_27_MEASURED), FIELD_27_MEASURED, 2.5, period))
    assert np.allclose(sent[True][0], expect) and sent[True][0][2] == 0.0
    assert np.allclose(sent[False][0][:2], FIELD_27_CHECKED[:2] * sent[False][1])


def test_a_diff_drive_s_brake_in_training_has_no_sideways_part_as_on_the_robot() -> None:
    """Rule step 5b's brake follows the measured twist, which on a diff drive may carry sideways slip:
    the simulator's stages send no sideways part on a diff drive, as the gate zeroes vy of a diff
    drive's command after every stage (the field-27 tick, twist and all, on a diff drive's stages)."""
    scaling = ActionScaling(v_max=1.5, omega_max=2.0, limit_planar_speed=False, drive=DIFF_DRIVE, v_backward=0.5)
    rule = replace(FIELD_27_RULE, steer=0.0, axis_brake=True)
    stages = CommandStages(scaling, rule, 6.0, AccelLimits(None, None), 0.1)
    ranges = torch.tensor([FIELD_27_RANGES], dtype=torch.float32)
    command = torch.tensor([FIELD_27_CHECKED], dtype=torch.float32)
    measured = torch.tensor([FIELD_27_MEASURED], dtype=torch.float32)
    sent, scale = stages.guarded(command, ranges, None, measured)
    brake = brake_command(ops_for(measured), measured, 2.5, 0.1)
    assert float(scale[0]) == 0.0  # tripped: the brake goes out
    assert float(sent[0, 1]) == 0.0 and float(sent[0, 2]) == 0.0
    assert float(sent[0, 0]) == pytest.approx(float(brake[0, 0]))
    holonomic = CommandStages(SCALING, rule, 6.0, AccelLimits(None, None), 0.1).guarded(command, ranges, None, measured)
    assert float(holonomic[0][0, 1]) == pytest.approx(float(brake[0, 1]))  # a holonomic base gets the whole brake


# Rule step 0b: a turn never carries a near return out of sight.
FIRST_SEEN = 9  # FOV_270's first seen beam on the low-index side (the blind sector is beams 63-71 and 0-8)
LAST_SEEN = 63


def test_a_near_return_next_to_the_blind_sector_holds_the_turn_that_would_hide_it():
    """A return 0.22 m away in the first seen sector after the blind one: a counter-clockwise turn
    (which moves returns toward lower beam indices, into the blind sector) is held, a clockwise one
    and the planar command pass as they are. Three seen sectors between: the turn may take that angle
    over the headway. Farther than the unseen range, all seen, or keep_sight off: nothing is held."""
    rule = replace(RULE, slide=True)
    h = rule.time_headway
    near = _scan(**{f"b{FIRST_SEEN}": 0.22})
    for cmd, want in (([0.3, 0.4, 1.9], [0.3, 0.4, 0.0]), ([0.3, 0.4, -1.9], [0.3, 0.4, -1.9])):
        got = sight_turned(near, np.array(cmd), rule, FOV_270)
        assert got.tolist() == want, cmd
    up, down = sight_turn_caps(near, FOV_270, rule)
    assert float(up) == 0.0 and float(down) == pytest.approx(54 * 2 * math.pi / B / h, rel=1e-6)
    inner = _scan(**{f"b{FIRST_SEEN + 3}": 0.22, f"b{LAST_SEEN - 1}": 0.3})
    up, down = sight_turn_caps(inner, FOV_270, rule)
    assert float(up) == pytest.approx(3 * 2 * math.pi / B / h, rel=1e-6)
    assert float(down) == pytest.approx(1 * 2 * math.pi / B / h, rel=1e-6)
    assert sight_turned(inner, np.array([0.0, 0.0, 0.2]), rule, FOV_270)[2] == 0.2  # below the cap
    far = _scan(**{f"b{FIRST_SEEN}": rule.unseen_range + 0.01})
    everything = np.ones(B, dtype=bool)
    off = replace(rule, keep_sight=False)
    cmd = np.array([0.123456789, -0.2, 1.987654321])
    for ranges, seen, r in ((far, FOV_270, rule), (near, everything, rule), (near, FOV_270, off)):
        out, _ = apply_guard(ranges, cmd, r, R_MAX, seen)
        assert out[2] == cmd[2]  # bit for bit
    out, scale = apply_guard(near, np.array([0.0, 0.0, 1.9]), rule, R_MAX, FOV_270)
    assert out.tolist() == [0.0, 0.0, 0.0] and float(scale) == 1.0


def test_sight_caps_count_the_seen_sectors_on_each_side_cyclically_in_torch_and_numpy():
    """Random unseen sectors and near returns: each cap is the least of (seen sectors to the nearest
    unseen one on that side, cyclically) x the sector over the headway, counted here beam by beam."""
    rule = replace(RULE, slide=True)
    rng = np.random.default_rng(4)
    ranges = rng.uniform(0.22, 0.6, size=(64, B)).astype(np.float32)
    seen = rng.random((64, B)) > 0.08
    seen[0] = True  # nothing unseen: unlimited
    step = 2 * math.pi / B / rule.time_headway
    want = np.full((64, 2), 1e6)
    for w in range(64):
        for j in range(B):
            if not seen[w, j] or ranges[w, j] >= rule.unseen_range:
                continue
            for side, sign in ((0, -1), (1, 1)):
                for n in range(B):
                    if not seen[w, (j + sign * (n + 1)) % B]:
                        want[w, side] = min(want[w, side], n * step)
                        break
    up, down = sight_turn_caps(ranges, seen, rule)
    assert np.allclose(np.stack([up, down], -1), want, rtol=1e-6)
    tup, tdown = sight_turn_caps(torch.as_tensor(ranges), torch.as_tensor(seen), rule)
    assert np.allclose(np.stack([tup.numpy(), tdown.numpy()], -1), want, rtol=1e-6)
    assert (want[1:] < 1e6).any() and (want[0] == 1e6).all()


def _post_ranges(post: np.ndarray, yaw: float, post_radius: float) -> np.ndarray:
    """The 72 sector minima of one post (a circle at ``post``, world frame) seen from the origin
    turned to ``yaw``."""
    a = np.linspace(0.0, 2 * math.pi, 720, endpoint=False)
    pts = post[None, :] + post_radius * np.stack([np.cos(a), np.sin(a)], -1)
    bearing = np.arctan2(pts[:, 1], pts[:, 0]) - yaw
    sector = np.floor(((bearing + math.pi) % (2 * math.pi)) / (2 * math.pi / B) + 0.5).astype(int) % B
    out = np.full(B, R_MAX, dtype=np.float32)
    np.minimum.at(out, sector, np.hypot(pts[:, 0], pts[:, 1]).astype(np.float32))
    return out


def test_a_robot_spinning_beside_a_post_keeps_it_in_sight_and_without_the_step_turns_it_out():
    """A 270-degree robot spins in place at 1.9 rad/s (the command held for a 0.1 s tick, applied a
    tick late) beside a post 1.5 cm from its shell, 20 degrees inside the field of view. With rule
    step 0b the post's true bearing never leaves the seen sectors; without it the spin turns it into
    the blind sector, where step 0 would put it 9 cm further away than it is."""
    period, delay = 0.1, 0.1
    rule = replace(RULE, margin=0.01, slide=True, reaction=period + delay)
    post_radius = 0.075
    centre = 0.2 + 0.015 + post_radius
    bearing0 = math.radians(-115.0)
    post = centre * np.array([math.cos(bearing0), math.sin(bearing0)])
    worst = {}
    for keep in (True, False):
        r = replace(rule, keep_sight=keep)
        yaw, pending, most = 0.0, 0.0, 0.0
        for _ in range(40):
            ranges = _post_ranges(post, yaw, post_radius)
            cmd, _ = apply_guard(ranges, np.array([0.0, 0.0, 1.9]), r, R_MAX, FOV_270)
            yaw += pending * period
            pending = float(cmd[2])
            bearing = math.atan2(post[1], post[0]) - yaw
            most = max(most, abs(math.atan2(math.sin(bearing), math.cos(bearing))))
        worst[keep] = math.degrees(most)
    assert worst[True] <= 135.0 + 2.5 and worst[False] > 150.0, worst


def test_the_simulator_holds_the_spin_that_would_turn_a_near_post_out_of_a_270_degree_view(make_env):
    """env.lidar.fov_deg=270, a post 1.5 cm from the shell 20 degrees inside the field of view's
    right-rear edge, the policy spinning counter-clockwise at full rate: the env's guard (the node's
    rule, training parity) holds the spin while the post is next to the edge, so the post's bearing
    stays in the seen sectors; without rule step 0b the spin turns it into the blind sector."""
    env = make_env(
        2, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", NO_RANDOMIZATION, "env.lidar.fov_deg=270"
    )
    env.auto_reset = False
    post_radius = float(env.sizes.cylinder_radius[0])
    centre = float(env.env_cfg.robot.radius) + 0.015 + post_radius
    start = (0.0, 0.0, 0.0)
    bearing0 = math.radians(-115.0)
    post_xy = (centre * math.cos(bearing0), centre * math.sin(bearing0))
    spin = torch.tensor([[0.0, 0.0, 1.0]]).expand(2, 3).clone()
    worst, sent = {}, {}
    for keep in (True, False):
        env.guard = env.stages.guard = replace(env.guard, keep_sight=keep)
        rooms = empty_rooms(env, start=start, goal=(3.0, 0.0))
        for w in range(2):
            place_obstacle(rooms, w, 0, post_xy)
        env.reset(rooms)
        most, rates = 0.0, []
        for _ in range(20):
            env.step(spin)
            rates.append(float(env.command[0, 2]))
            pose = env.pose()[0]
            bearing = math.atan2(post_xy[1] - float(pose[1]), post_xy[0] - float(pose[0])) - float(pose[2])
            most = max(most, abs(math.degrees(math.atan2(math.sin(bearing), math.cos(bearing)))))
        worst[keep], sent[keep] = most, rates
    env.guard = env.stages.guard = replace(env.guard, keep_sight=True)
    assert worst[True] < 135.0 and worst[False] > 150.0, worst
    assert min(sent[True]) < 0.5 and max(sent[False]) == pytest.approx(float(env.env_cfg.robot.omega_max)), sent
