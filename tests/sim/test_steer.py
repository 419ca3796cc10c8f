"""Steering (navcontract.steer): a holonomic command turned toward the direction the guard lets out
fastest, numpy and torch alike, in the simulator's command stages and in the node's gate, before the
smoother; never on a differential drive, never when off, never beyond its span."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import support.ros as h
from navcontract.action import ActionScaling
from navcontract.base import DIFF_DRIVE
from navcontract.guard import GuardRule, guard_scale
from navcontract.steer import STEER_STEP, steer_command, steer_offsets
from navdeploy.gate import CommandGate
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime, ScanInput
from navdeploy.settings import resolve_settings
from navdeploy.smoother import AccelLimits
from navdeploy.states import State
from navsim.actuation import CommandStages

B = 72
R_MAX = 6.0
RULE = GuardRule(radius=0.2, margin=0.01, headway=0.5, decel=2.5, slide=True, reaction=0.32, steer=30.0)
FORWARD = B // 2  # the beam at body angle 0 (the layout starts at -pi)


def posts(*where: tuple[float, float]) -> np.ndarray:
    """Training-beam ranges: nothing within range but a return at each (bearing in degrees, range)."""
    ranges = np.full(B, R_MAX, dtype=np.float32)
    for bearing, r in where:
        ranges[int(round((math.radians(bearing) + math.pi) / (2 * math.pi / B))) % B] = r
    return ranges


def heading(cmd: np.ndarray) -> float:
    return math.degrees(math.atan2(float(cmd[1]), float(cmd[0])))


def progress(cmd: np.ndarray, asked: np.ndarray) -> float:
    """Speed of ``cmd`` along the direction of ``asked``."""
    u = asked[:2] / np.linalg.norm(asked[:2])
    return float(np.dot(cmd[:2], u))


def test_the_tried_turns_are_the_asked_direction_first_then_by_size_left_before_right() -> None:
    assert steer_offsets(0.0) == [0.0]
    assert np.degrees(steer_offsets(15.0)) == pytest.approx([0, 5, -5, 10, -10, 15, -15])
    assert len(steer_offsets(12.0)) == 1 + 2 * int(12.0 // STEER_STEP)


def test_off_it_is_the_command_itself() -> None:
    cmd = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    assert steer_command(posts((0.0, 0.6)), cmd, replace(RULE, steer=0.0), R_MAX) is cmd


def test_an_open_direction_is_never_turned() -> None:
    cmd = np.array([1.2, 0.3, 0.4], dtype=np.float32)
    for ranges in (np.full(B, R_MAX, dtype=np.float32), posts((90.0, 0.5), (-120.0, 0.4))):
        assert float(guard_scale(ranges, cmd, RULE, R_MAX)) == 1.0
        assert np.array_equal(steer_command(ranges, cmd, RULE, R_MAX), cmd)


def test_a_post_ahead_turns_the_command_past_it_at_the_guard_s_cap() -> None:
    """A post 0.9 m dead ahead: the asked direction is cut to a crawl; steering turns it by the
    least angle that passes the post, at a speed the guard lets out as it is."""
    ranges = posts((0.0, 0.9))
    cmd = np.array([1.5, 0.0, 0.0], dtype=np.float32)
    asked_scale = float(guard_scale(ranges, cmd, RULE, R_MAX))
    out = np.asarray(steer_command(ranges, cmd, RULE, R_MAX))
    turn = heading(out)
    assert 0.0 < abs(turn) <= 30.0 + 1e-4 and turn == pytest.approx(round(turn / STEER_STEP) * STEER_STEP, abs=1e-4)
    assert turn > 0.0  # equal either side: left first
    assert float(guard_scale(ranges, out, RULE, R_MAX)) == pytest.approx(1.0, abs=1e-5)
    assert progress(out, cmd) > 1.5 * asked_scale * 1.5  # more than half as fast again along the asked way
    assert out[2] == cmd[2]


def test_a_post_off_to_the_left_turns_it_right() -> None:
    ranges = posts((8.0, 0.8))
    out = np.asarray(steer_command(ranges, np.array([1.0, 0.0, 0.0]), RULE, R_MAX))
    assert heading(out) < 0.0


def test_it_never_turns_beyond_its_span_nor_gives_up_progress_nor_lets_out_what_the_guard_cuts() -> None:
    rng = np.random.default_rng(11)
    n = 300
    ranges = np.full((n, B), R_MAX, dtype=np.float32)
    for row in ranges:
        row[rng.choice(B, size=6, replace=False)] = rng.uniform(0.3, 2.0, size=6)
    cmd = rng.uniform(-1.5, 1.5, size=(n, 3)).astype(np.float32)
    out = np.asarray(steer_command(ranges, cmd, RULE, R_MAX))
    asked = np.asarray(guard_scale(ranges, cmd, RULE, R_MAX))
    turned = np.any(out != cmd, axis=1)
    assert 0 < int(turned.sum()) < n
    for i in np.flatnonzero(turned):
        diff = abs((heading(out[i]) - heading(cmd[i]) + 180.0) % 360.0 - 180.0)
        assert diff <= 30.0 + 1e-3, (i, diff)
        assert progress(out[i], cmd[i]) > asked[i] * np.linalg.norm(cmd[i, :2])
        # At the cap the turning fan is narrower, its directions not quite the faster command's: within 1 %.
        assert float(guard_scale(ranges[i], out[i], RULE, R_MAX)) == pytest.approx(1.0, abs=1e-2)
    assert np.array_equal(out[~turned, 2], cmd[~turned, 2]) and np.array_equal(out[:, 2], cmd[:, 2])


def test_unseen_beams_count_as_returns_when_steering() -> None:
    """A 270-degree lidar going backward: the blind sector is occupied, and no turn within the span
    opens it; the command stays as asked (and the guard then stops it)."""
    seen = np.ones(B, dtype=bool)
    seen[:9] = seen[-9:] = False  # 90 degrees behind
    cmd = np.array([-1.0, 0.0, 0.0], dtype=np.float32)
    ranges = np.full(B, R_MAX, dtype=np.float32)
    out = np.asarray(steer_command(ranges, cmd, RULE, R_MAX, seen))
    assert np.array_equal(out, cmd)
    assert float(guard_scale(ranges, out, RULE, R_MAX, seen)) == 0.0


def test_numpy_and_torch_agree_batched() -> None:
    rng = np.random.default_rng(3)
    ranges = np.full((64, B), R_MAX, dtype=np.float32)
    for row in ranges:
        row[rng.choice(B, size=5, replace=False)] = rng.uniform(0.3, 1.5, size=5)
    cmd = rng.uniform(-1.5, 1.5, size=(64, 3)).astype(np.float32)
    a = np.asarray(steer_command(ranges, cmd, RULE, R_MAX))
    b = steer_command(torch.tensor(ranges), torch.tensor(cmd), RULE, R_MAX).numpy()
    assert np.allclose(a, b, atol=1e-5)
    assert np.any(a != cmd)


def test_a_batch_judged_in_slices_and_only_where_cut_steers_each_world_as_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The batched shortcuts (only the commands the guard cuts tried in other directions; a large CPU
    batch judged in slices that fit the cache) give every world the command it gets judged alone."""
    import navcontract.guard as guard_module

    rng = np.random.default_rng(11)
    n = 96
    ranges = np.full((n, B), R_MAX, dtype=np.float32)
    for row in ranges[: n // 2]:  # half the worlds cluttered, half open
        row[rng.choice(B, size=8, replace=False)] = rng.uniform(0.25, 1.2, size=8)
    cmd = rng.uniform(-1.5, 1.5, size=(n, 3)).astype(np.float32)
    seen = rng.random((n, B)) > 0.05
    seen[n // 2 :] = True  # an unseen beam counts as occupied
    rule = replace(RULE, sweep_lag=0.06, axis_brake=True)
    alone = np.stack([np.asarray(steer_command(ranges[i], cmd[i], rule, R_MAX, seen[i])) for i in range(n)])
    monkeypatch.setattr(guard_module, "CHUNK_ELEMENTS", 4 * B * 13)  # slices of a few worlds
    batched = steer_command(torch.tensor(ranges), torch.tensor(cmd), rule, R_MAX, torch.tensor(seen), fan=12)
    assert np.allclose(batched.numpy(), alone, atol=1e-6)
    turned = np.any(alone != cmd, axis=-1)
    assert turned[: n // 2].sum() >= 5 and not turned[n // 2 :].any()  # the open worlds keep what they asked
    args = (torch.tensor(ranges), batched, rule, R_MAX, torch.tensor(seen), 12)
    motion = torch.tensor(cmd[::-1].copy())
    sent, scale = guard_module.apply_guard(*args, motion=motion, period=0.1)
    monkeypatch.setattr(guard_module, "CHUNK_ELEMENTS", 1 << 40)  # one piece
    whole, whole_scale = guard_module.apply_guard(*args, motion=motion, period=0.1)
    assert torch.equal(sent, whole) and torch.equal(scale, whole_scale)
    assert bool((scale < 1.0).any()) and bool((scale == 1.0).any())


def test_the_section_states_steer_and_an_older_one_reads_it_off() -> None:
    assert RULE.to_dict()["steer"] == 30.0
    old = {k: v for k, v in RULE.to_dict().items() if k != "steer"}
    assert GuardRule.from_dict(old).steer == 0.0
    assert GuardRule.from_dict({**old, "steer": 20}).steer == 20.0
    with pytest.raises(ValueError, match="guard.steer must be a number, got 'wide'"):
        GuardRule.from_dict({**old, "steer": "wide"})
    with pytest.raises(ValueError, match=r"guard steer must be a number of degrees in \[0, 90\], got 120.0"):
        GuardRule.from_dict({**old, "steer": 120.0})


def _stages(drive: str | None = None) -> CommandStages:
    scaling = ActionScaling(v_max=1.5, omega_max=2.0, limit_planar_speed=True)
    if drive == DIFF_DRIVE:
        scaling = ActionScaling(v_max=1.5, omega_max=2.0, limit_planar_speed=False, drive=DIFF_DRIVE, v_backward=0.5)
    return CommandStages(scaling, RULE, R_MAX, AccelLimits(None, None), 0.1)


def test_the_simulator_s_stages_steer_before_the_guard_as_numpy_does() -> None:
    stages = _stages()
    scan = torch.tensor(np.stack([posts((0.0, 0.9)), np.full(B, R_MAX, dtype=np.float32)]))
    actions = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    asked = stages.requested(actions, torch.zeros(2, 3))
    steered = stages.requested(actions, torch.zeros(2, 3), scan, None)
    expected = steer_command(scan.numpy(), asked.numpy(), RULE, R_MAX)
    assert np.allclose(steered.numpy(), expected, atol=1e-6)
    assert heading(steered[0].numpy()) > 0.0 and torch.equal(steered[1], asked[1])
    sent, scale = stages(actions, torch.zeros(2, 3), scan, None)
    assert float(scale[0]) == pytest.approx(1.0, abs=1e-5)  # the guard lets the steered command out


def test_a_differential_drive_is_never_steered() -> None:
    stages = _stages(DIFF_DRIVE)
    assert not stages.steers
    scan = torch.tensor(posts((0.0, 0.9)))[None]
    actions = torch.tensor([[1.0, 0.0]])
    assert torch.equal(
        stages.requested(actions, torch.zeros(1, 3), scan, None), stages.requested(actions, torch.zeros(1, 3))
    )


@pytest.fixture(scope="module")
def steering(tmp_path_factory) -> PolicyRuntime:
    """The goal-seeking policy with a guard section that steers."""
    return PolicyRuntime.load(h.write_goal_seeking_bundle(tmp_path_factory.mktemp("steer"), guard=RULE))


def test_the_node_s_gate_steers_before_its_smoother_and_guards_last(steering: PolicyRuntime) -> None:
    """Straight at a goal behind a post 0.9 m ahead, from rest: without steering the smoother's first
    step goes straight at the post; with it, the smoother steps toward the target turned past the post
    (sideways too), and the guard lets that out as it is."""
    assert steering.contract.guard is not None and steering.contract.guard.steer == 30.0  # read from the bundle
    line = resolve_settings(steering.contract, NodeParams(scan_map=False))[0].guard_source
    assert "steering up to 30 deg before the smoother" in line  # the node's startup log says so
    sent = {}
    for steer in (0.0, 30.0):
        settings, _ = resolve_settings(
            steering.contract, NodeParams(scan_map=False, max_accel_linear=2.5, max_accel_angular=3.2)
        )
        settings = replace(settings, guard=replace(settings.guard, steer=steer))
        gate = CommandGate.from_settings(steering, settings)
        gate.set_scan(ScanInput.training_beams(posts((0.0, 0.9)), B, R_MAX), 0.0)
        gate.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.0, "odom")
        gate.set_goal(5.0, 0.0, "odom")
        res = gate.tick(0.0)
        assert res.state == State.DRIVING and res.guard_scale == pytest.approx(1.0, abs=1e-2)
        sent[steer] = res.cmd
    assert sent[0.0][:2] == pytest.approx([0.25, 0.0])  # the smoother's step (0.25 per axis) straight on
    assert sent[30.0][:2] == pytest.approx([0.25, 0.25])  # toward the turned target: left of the post
