"""A differential-drive bundle on the robot side: the runtime maps the policy's ``(v, w)`` by the
contract's drive and checks the ONNX output's width against it; the command gate clamps ``vx`` to
``[-v_backward, v_max]`` and every command that leaves it (clamped, smoothed, guarded, or a stop)
has ``linear.y`` exactly 0.0; the settings carry the drive into the limits. Fast: a random numpy
network through onnxruntime and a stand-in driver, no trained diff-drive bundle (the contract is the
fixture bundle's observation under a diff-drive base: support.bases)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnxruntime as ort
import pytest

from navcontract.base import DIFF_DRIVE
from navcontract.bundle import BundleError
from navcontract.guard import GuardRule
from navcontract.scan import ScanInput, ScanOptions
from navdeploy.gate import CommandGate, clamp_command
from navdeploy.node_params import NodeParams
from navdeploy.runtime import ContractScanReader, PolicyRuntime
from navdeploy.settings import Limits, resolve_settings
from navdeploy.states import State
from navtrain.onnx_graph import MlpWeights, build_onnx
from support.bases import V_BACKWARD, diff_drive_contract, fixture_contract


def session(contract, out_dim: int, seed: int = 0) -> ort.InferenceSession:
    """An onnxruntime session of a linear 'policy' with ``out_dim`` outputs: the first is 2 cos and the
    second 2 sin of the goal's bearing (both signs, often beyond [-1, 1]), plus small random weights."""
    spec = contract.spec
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.02, (out_dim, spec.obs_dim)).astype(np.float32)
    goal = spec.slices()["goal_polar"]
    w[0, goal.start + 2] += 2.0  # cos(bearing)
    w[1, goal.start + 1] += 2.0  # sin(bearing)
    mean, std = np.zeros(spec.obs_dim, np.float32), np.ones(spec.obs_dim, np.float32)
    model = build_onnx(MlpWeights(mean, std, 0.0, [(w, np.zeros(out_dim, np.float32))], "identity"), contract.raw)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def robot_inputs(rng: np.random.Generator, num_beams: int) -> tuple[ScanInput, tuple, tuple, tuple]:
    scan = ScanInput.training_beams(rng.uniform(0.3, 6.0, num_beams), num_beams)
    pose = (rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(-math.pi, math.pi))
    twist = (rng.uniform(-1, 1), rng.uniform(-0.1, 0.1), rng.uniform(-2, 2))
    goal = (rng.uniform(-3, 3), rng.uniform(-3, 3))
    return scan, pose, twist, goal


def test_runtime_maps_v_and_w_and_observes_the_previous_action_in_command_order() -> None:
    c = diff_drive_contract()
    rt = PolicyRuntime(session(c, 2), c)
    rng = np.random.default_rng(1)
    signs = set()
    for _ in range(60):
        scan, pose, twist, goal = robot_inputs(rng, c.num_beams)
        raw = rt.act(rt.observation(scan, pose, twist, goal))
        assert raw.shape == (2,)
        cmd = rt.step(scan, pose, twist, goal)
        a = np.clip(raw, -1.0, 1.0)
        want_vx = a[0] * (c.scaling.v_max if a[0] >= 0 else V_BACKWARD)
        assert cmd.shape == (3,) and cmd[1] == 0.0
        assert cmd[0] == pytest.approx(want_vx, abs=1e-5) and cmd[2] == pytest.approx(a[1] * c.omega_max, abs=1e-5)
        assert np.abs(rt.prev_action - [a[0], 0.0, a[1]]).max() < 1e-6
        signs.add(bool(a[0] >= 0))
    assert signs == {True, False}  # forward and backward both mapped
    rt.reset()
    assert not rt.prev_action.any()


@pytest.mark.parametrize("drive, width", [("diff_drive", 3), ("holonomic", 2)])
def test_an_onnx_output_of_the_other_drives_width_is_refused_in_one_line(drive: str, width: int) -> None:
    c = diff_drive_contract() if drive == DIFF_DRIVE else fixture_contract()
    with pytest.raises(BundleError) as err:
        PolicyRuntime(session(c, width), c)
    msg = str(err.value)
    assert "\n" not in msg and f"{drive} action" in msg and f"[batch, {c.scaling.dim}]" in msg, msg


class RandomDriver(ContractScanReader):
    """Stands in for the policy: reads the scan by the contract (the guard reads that report) and
    returns any command, lateral and far beyond the limits included."""

    def __init__(self, contract, seed: int) -> None:
        self.contract, self.scan_options = contract, ScanOptions()
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        pass

    def step(self, scan, pose, twist, goal) -> np.ndarray:
        self.resample(scan)
        return self.rng.uniform(-3.0, 3.0, 3) * self.rng.choice([0.1, 1.0])


GUARD = GuardRule(radius=0.2, margin=0.05, headway=0.5, decel=2.5, slide=True)


def drive_gate(contract, ticks: int = 1500, seed: int = 0) -> tuple[np.ndarray, list[State], list[float]]:
    """The gate of ``contract`` (smoother on, guard on, no scan map) around :class:`RandomDriver`, fed
    random scans (returns from 0.066 m), odometry, goals, and now and then a stale scan or no goal.
    Returns every command it sent, the states and the guard's scales."""
    params = NodeParams(scan_map=False, max_accel_linear=2.5, max_accel_angular=3.2)
    settings, _ = resolve_settings(contract, params)
    gate = CommandGate.from_settings(RandomDriver(contract, seed), settings)
    rng = np.random.default_rng(seed + 1)
    cmds, states, scales = [], [], []
    now, pose = 10.0, np.zeros(3)
    for k in range(ticks):
        now += 0.1
        if k % 97 >= 7:  # now and then no scan for 0.7 s: stale (timeout 0.5 s)
            ranges = rng.uniform(0.22, 6.0, contract.num_beams) * rng.choice([0.3, 1.0])
            gate.set_scan(ScanInput.training_beams(ranges, contract.num_beams), now)
        twist = tuple(rng.normal(0, 0.5, 3))
        gate.set_odom((pose[0], pose[1]), (0.0, 0.0, math.sin(pose[2] / 2), math.cos(pose[2] / 2)), twist, now, "odom")
        if k % 50 == 0:
            gate.set_goal(*rng.uniform(-5, 5, 2), "odom")
        if k % 211 == 7:
            gate.clear_goal()
        res = gate.tick(now)
        cmds.append(res.cmd)
        states.append(res.state)
        if res.guard_scale is not None:
            scales.append(res.guard_scale)
        pose = pose + rng.normal(0, 0.05, 3)
    return np.array(cmds), states, scales


def test_every_command_of_a_diff_drive_gate_has_no_lateral_part_and_lies_within_its_limits() -> None:
    c = diff_drive_contract(guard=GUARD)
    cmds, states, scales = drive_gate(c)
    assert np.all(cmds[:, 1] == 0.0)  # exactly, after clamp, smoother and guard, and in every stop
    assert np.all(cmds[:, 0] >= -V_BACKWARD - 1e-12) and np.all(cmds[:, 0] <= c.v_max + 1e-12)
    assert np.all(np.abs(cmds[:, 2]) <= c.omega_max + 1e-12)
    # Not vacuous: it drove both ways, stopped for a reason, and the guard and the backward limit acted.
    assert states.count(State.DRIVING) > 1000 and {State.NO_GOAL, State.STALE_SCAN} <= set(states)
    assert cmds[:, 0].min() <= -V_BACKWARD + 1e-9 and cmds[:, 0].max() > 0.25
    assert min(scales) < 0.5
    holo, _, _ = drive_gate(dataclasses.replace(fixture_contract(), guard=GUARD))
    assert np.abs(holo[:, 1]).max() > 0.5  # the same driver through a holonomic gate moves sideways


def test_the_settings_carry_the_drive_into_the_limits_and_the_clamp() -> None:
    s, _ = resolve_settings(diff_drive_contract())
    assert s.limits == Limits(1.5, 2.0, False, DIFF_DRIVE, V_BACKWARD)
    assert any(src.startswith("v_backward 0.5 m/s") for src in s.limit_sources)
    assert np.array_equal(clamp_command(np.array([-2.0, 0.7, 5.0]), s.limits), [-V_BACKWARD, 0.0, 2.0])
    assert np.array_equal(clamp_command(np.array([3.0, -0.7, -5.0]), s.limits), [1.5, 0.0, -2.0])
    slow, _ = resolve_settings(diff_drive_contract(), NodeParams(v_max=0.3))
    assert slow.limits.backward == 0.3  # the node's v_max caps every linear speed
    assert np.array_equal(clamp_command(np.array([-2.0, 0.0, 0.0]), slow.limits), [-0.3, 0.0, 0.0])
    holo, _ = resolve_settings(fixture_contract())
    assert holo.limits == Limits(1.5, 2.0, True) and holo.limits.holonomic
