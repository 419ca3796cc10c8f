"""The robot runtime reproduces the simulator's observation and command.

The simulator's state is rendered as robot-side inputs — a LaserScan-like scan with the
simulator's beams (the noisy scan the policy saw), the odometry pose and body-frame twist, the
goal in the odometry frame — and fed to the runtime with the exported bundle. Over more than 200
states in 16 rooms (plus the rooms that auto-resets bring) the runtime's 78 numbers equal the
training observation, and its command equals the env's command (action_to_command of the torch
actor's mean). The node's command gate around that runtime (the node's default parameters without
the scan map: clamp, velocity smoother at the contract's limits, collision guard last with the
sectors filled for lack of readings unseen), fed the same inputs on the node's clock, sends the
very body-frame command the env's actuators were driven with: the env runs the same stages in the
same order (conf/nav.yaml: smoother and guard on, lidar dropouts under randomisation), each from
the command it sent on the previous step.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from navcontract.action import action_to_command
from navcontract.scan import BeamLayout
from navdeploy.gate import CommandGate
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime, ScanInput
from navdeploy.settings import resolve_settings
from navdeploy.states import State
from navsim.config_load import load_config
from navsim.contract_objects import policy_spec
from navsim.env import NavEnv
from navtrain.checkpoint import build_actor, load_checkpoint
from navtrain.export import actor_mean
from support.simenv import TRAIN_OVERRIDES

pytestmark = pytest.mark.slow

NUM_ENVS = 16
STEPS = 16
TOL = 1e-5


@pytest.fixture(scope="module", params=[(0.0, False), (30.0, True)], ids=["unsteered", "steered_axis_brake"])
def rollout(request, exported_bundle, trained_checkpoint) -> dict[str, np.ndarray]:
    """Drive the env with the torch actor's mean; record observations and commands on both sides.
    The second run has the guard steer by up to 30 degrees (navcontract.steer) and brake by rule step
    5b (``axis_brake``) on both sides; steering off turns nothing and step 5b off is revision 2 exactly
    (tests/sim/test_guard.py), so the first run covers both off, the second both on."""
    steer, axis_brake = float(request.param[0]), bool(request.param[1])
    cfg = load_config(overrides=TRAIN_OVERRIDES)
    actor = build_actor(load_checkpoint(trained_checkpoint), cfg)
    env = NavEnv(cfg, num_envs=NUM_ENVS, device="cpu", seed=777)
    if env.guard is not None:
        env.guard = env.stages.guard = replace(env.guard, steer=steer, axis_brake=axis_brake)
    runtimes = [PolicyRuntime.load(exported_bundle) for _ in range(NUM_ENVS)]
    gates = [node_gate(exported_bundle, steer, axis_brake) for _ in range(NUM_ENVS)]
    steered = 0
    beams = BeamLayout(env.dims.num_beams)
    angle_min, increment = beams.angle_min, beams.angle_increment
    period = env.env_cfg.control_period
    in_step = np.ones(NUM_ENVS, dtype=bool)  # the gate has driven every tick of this world's episode

    rec: dict[str, list] = {
        k: [] for k in ("obs_sim", "obs_rt", "obs_rt_rev", "cmd_sim", "cmd_rt", "cmd_gate", "cmd_ctrl", "dropped")
    }
    goals = set()
    obs = env.get_observations()["policy"]
    for k in range(STEPS):
        # What the policy observed (delayed, perturbed under randomisation), as the robot has it:
        # dropped readings arrive as NaN and the runtime fills them by its own rule.
        pose = env.observed_pose.numpy().astype(np.float64)
        twist = env.observed_twist.numpy().astype(np.float64)
        goal = env.rooms.goal.numpy().astype(np.float64)
        scan = env.scan_readings.numpy()
        raw = actor_mean(actor, obs)
        cmd_sim = action_to_command(raw, env.scaling)
        for i, rt in enumerate(runtimes):
            s = ScanInput(scan[i], angle_min, increment, 0.0, env.dims.max_range)
            rec["obs_rt"].append(rt.observation(s, pose[i], twist[i], goal[i]))
            # The same scan as a driver publishing clockwise from the last beam would send it.
            rev = ScanInput(scan[i][::-1].copy(), angle_min + 71 * increment, -increment, 0.0, env.dims.max_range)
            rec["obs_rt_rev"].append(rt.observation(rev, pose[i], twist[i], goal[i]))
            cmd = rt.step(s, pose[i], twist[i], goal[i])
            rec["cmd_rt"].append(cmd)
            sent = gate_tick(gates[i], s, pose[i], twist[i], goal[i], k * period)
            in_step[i] &= not np.isnan(sent[0])
            rec["cmd_gate"].append(sent if in_step[i] else np.full(3, np.nan))
            rec["dropped"].append(int(np.isnan(scan[i]).sum()))
            goals.add(tuple(np.round(goal[i], 4)))
        rec["obs_sim"].append(obs.numpy())
        rec["cmd_sim"].append(cmd_sim.numpy())
        asked = env.stages.requested(raw, env.command)
        steered += int((env.stages.requested(raw, env.command, env.scan, env.scan_seen) != asked).any(dim=-1).sum())
        obs_td, _, dones, _ = env.step(raw)
        obs = obs_td["policy"]
        # The body-frame command the env held during the step (rotated into the world-frame
        # actuators before every substep); worlds reset by this step had it zeroed: marked NaN.
        body = env.command.numpy().astype(np.float64).copy()
        body[dones.numpy().astype(bool)] = np.nan
        rec["cmd_ctrl"].append(body)
        for i in np.flatnonzero(dones.numpy()):
            runtimes[i].reset()
            gates[i].stopped(k * period)  # the episode ended: the robot stands, the smoother starts from rest
            in_step[i] = True
    out = {k: np.asarray(v).reshape(NUM_ENVS * STEPS, -1) for k, v in rec.items()}
    out["num_goals"] = np.array(len(goals))
    out["guards_agree"] = np.array(gates[0].guard == env.guard and env.guard is not None)
    out["smoother_on"] = np.array(
        gates[0].smoother is not None and gates[0].smoother.limits == env.stages.accel and env.stages.accel.active
    )
    out["env_fingerprint"] = np.array(env.obs_manager.policy_spec.fingerprint())
    out["steer"], out["steered"] = np.array(steer), np.array(steered)
    return out


def node_gate(bundle, steer: float = 0.0, axis_brake: bool = False) -> CommandGate:
    """The node's gate around a fresh runtime: every parameter at its default but the scan map (the
    env hands the policy its goal itself); its guard steering by ``steer`` degrees, braking by rule
    step 5b with ``axis_brake``."""
    runtime = PolicyRuntime.load(bundle)
    settings, _ = resolve_settings(runtime.contract, NodeParams(scan_map=False))
    if settings.guard is not None:
        settings = replace(settings, guard=replace(settings.guard, steer=steer, axis_brake=axis_brake))
    return CommandGate.from_settings(runtime, settings)


def gate_tick(gate: CommandGate, scan: ScanInput, pose, twist, goal, now: float) -> np.ndarray:
    """The command the gate sends at ``now`` for these inputs; NaN when it does not drive (its goal
    reached by the observed pose, a scan it refuses): its smoother then starts from rest while the
    env's does not, so the rollout leaves that world out until its episode ends."""
    gate.set_scan(scan, now)
    q = (0.0, 0.0, math.sin(pose[2] / 2), math.cos(pose[2] / 2))
    gate.set_odom((pose[0], pose[1]), q, tuple(twist), now, "odom")
    if gate.goal != (float(goal[0]), float(goal[1])):
        gate.set_goal(float(goal[0]), float(goal[1]), "odom")
    res = gate.tick(now)
    return res.cmd if res.state == State.DRIVING else np.full(3, np.nan)


def test_runtime_observation_equals_the_training_observation(rollout: dict[str, np.ndarray]) -> None:
    sim, rt = rollout["obs_sim"], rollout["obs_rt"]
    assert sim.shape == rt.shape == (NUM_ENVS * STEPS, 78) and sim.shape[0] >= 200
    assert int(rollout["num_goals"]) >= NUM_ENVS  # several rooms
    assert np.unique(sim[:, :72], axis=0).shape[0] == sim.shape[0]  # every state is a different scan
    delta = np.abs(sim.astype(np.float64) - rt)
    print(f"\nparity: {sim.shape[0]} states, max |obs delta| {delta.max():.3e}")
    assert delta.max() <= TOL, f"max |obs delta| {delta.max():.3e} at {np.unravel_index(delta.argmax(), delta.shape)}"
    # The lidar block is bit-exact: the training beams pass through the resampler unchanged.
    assert np.array_equal(sim[:, :72], rt[:, :72])
    # Reversed beam order with a negative increment gives the very same observation.
    assert np.array_equal(rollout["obs_rt_rev"], rt)


def test_runtime_command_equals_the_simulators_applied_command(rollout: dict[str, np.ndarray]) -> None:
    sim, rt, ctrl = rollout["cmd_sim"], rollout["cmd_rt"], rollout["cmd_ctrl"]
    sent = rollout["cmd_gate"]
    assert rt.shape == sim.shape == (NUM_ENVS * STEPS, 3)
    d_sim = np.abs(sim - rt).max()
    assert d_sim <= TOL, f"max |command delta| vs action_to_command(torch mean): {d_sim:.3e}"
    assert bool(rollout["guards_agree"])  # the bundle carries the env's guard (conf/nav.yaml: on)
    assert bool(rollout["smoother_on"])  # and the node's default smoother is the env's
    live = ~np.isnan(ctrl[:, 0]) & ~np.isnan(sent[:, 0])
    assert live.sum() >= 200
    d_ctrl = np.abs(ctrl[live] - sent[live]).max()
    print(f"\nparity: max |cmd delta| vs action_to_command {d_sim:.3e}, gate vs env ctrl {d_ctrl:.3e} ({live.sum()})")
    assert d_ctrl <= TOL, f"max |command delta| of the gate vs the env's ctrl in the body frame: {d_ctrl:.3e}"
    # The stages did work: the smoother held commands back, the guard cut some, readings dropped out.
    assert np.abs(ctrl[live] - rt[live]).max() > 0.1
    assert int(rollout["dropped"][live].sum()) > 0
    assert np.abs(rt).max() > 0.1  # the policy does command motion: not a trivial zero match
    if float(rollout["steer"]) > 0.0:
        assert int(rollout["steered"]) >= 5  # steering turned commands, on both sides alike
    assert np.all(np.hypot(rt[:, 0], rt[:, 1]) <= 1.5 + 1e-6) and np.all(np.abs(rt[:, 2]) <= 2.0 + 1e-6)


def test_robot_config_spec_equals_the_training_spec(rollout: dict[str, np.ndarray], exported_bundle) -> None:
    """The node can check the bundle against its own config: same spec as the env's ObservationManager."""
    cfg = load_config(overrides=TRAIN_OVERRIDES)
    env_fingerprint = str(rollout["env_fingerprint"])
    own = policy_spec(cfg)
    assert own.fingerprint() == env_fingerprint
    rt = PolicyRuntime.load(exported_bundle, spec=own)
    assert rt.contract.spec_fingerprint == env_fingerprint
    assert rt.contract.beams == BeamLayout(72)
    assert rt.contract.angle_increment == pytest.approx(2 * math.pi / 72)
