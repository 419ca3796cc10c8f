"""The robot runtime reproduces the simulator's observation and command.

The simulator's state is rendered as robot-side inputs — a LaserScan-like scan with the
simulator's beams (the noisy scan the policy saw), the odometry pose and body-frame twist, the
goal in the odometry frame — and fed to the runtime with the exported bundle. Over more than 200
states in 16 rooms (plus the rooms that auto-resets bring) the runtime's 78 numbers equal the
training observation, and its command equals the env's command (action_to_command of the torch
actor's mean); that command through the bundle's collision guard, on the ranges the runtime built
the observation from, equals the body-frame command the env's actuators were driven with.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from navcontract.action import action_to_command
from navcontract.guard import guard_scale
from navcontract.scan import BeamLayout
from navdeploy.runtime import PolicyRuntime, ScanInput
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


@pytest.fixture(scope="module")
def rollout(exported_bundle, trained_checkpoint) -> dict[str, np.ndarray]:
    """Drive the env with the torch actor's mean; record observations and commands on both sides."""
    cfg = load_config(overrides=TRAIN_OVERRIDES)
    actor = build_actor(load_checkpoint(trained_checkpoint), cfg)
    env = NavEnv(cfg, num_envs=NUM_ENVS, device="cpu", seed=777)
    runtimes = [PolicyRuntime.load(exported_bundle) for _ in range(NUM_ENVS)]
    beams = BeamLayout(env.dims.num_beams)
    angle_min, increment = beams.angle_min, beams.angle_increment

    rec: dict[str, list] = {
        k: [] for k in ("obs_sim", "obs_rt", "obs_rt_rev", "cmd_sim", "cmd_rt", "cmd_guarded", "cmd_ctrl")
    }
    goals = set()
    obs = env.get_observations()["policy"]
    for _ in range(STEPS):
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
            ranges = rt.last_scan_report.ranges  # what this step's observation was built from
            scale = float(guard_scale(ranges, cmd, rt.contract.guard, rt.contract.max_range))
            rec["cmd_guarded"].append(np.array([cmd[0] * scale, cmd[1] * scale, cmd[2]]))
            goals.add(tuple(np.round(goal[i], 4)))
        rec["obs_sim"].append(obs.numpy())
        rec["cmd_sim"].append(cmd_sim.numpy())
        obs_td, _, dones, _ = env.step(raw)
        obs = obs_td["policy"]
        # The body-frame command the env held during the step (rotated into the world-frame
        # actuators before every substep); worlds reset by this step had it zeroed: marked NaN.
        body = env.command.numpy().astype(np.float64).copy()
        body[dones.numpy().astype(bool)] = np.nan
        rec["cmd_ctrl"].append(body)
        for i in np.flatnonzero(dones.numpy()):
            runtimes[i].reset()
    out = {k: np.asarray(v).reshape(NUM_ENVS * STEPS, -1) for k, v in rec.items()}
    out["num_goals"] = np.array(len(goals))
    out["guards_agree"] = np.array(runtimes[0].contract.guard == env.guard and env.guard is not None)
    out["env_fingerprint"] = np.array(env.obs_manager.policy_spec.fingerprint())
    return out


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
    guarded = rollout["cmd_guarded"]
    assert rt.shape == sim.shape == (NUM_ENVS * STEPS, 3)
    d_sim = np.abs(sim - rt).max()
    assert d_sim <= TOL, f"max |command delta| vs action_to_command(torch mean): {d_sim:.3e}"
    assert bool(rollout["guards_agree"])  # the bundle carries the env's guard (conf/nav.yaml: on)
    live = ~np.isnan(ctrl[:, 0])
    assert live.sum() >= 200
    d_ctrl = np.abs(ctrl[live] - guarded[live]).max()
    print(f"\nparity: max |cmd delta| vs action_to_command {d_sim:.3e}, vs body-frame ctrl {d_ctrl:.3e} ({live.sum()})")
    assert d_ctrl <= TOL, f"max |command delta| vs env ctrl in the body frame: {d_ctrl:.3e}"
    assert np.abs(rt).max() > 0.1  # the policy does command motion: not a trivial zero match
    assert np.all(np.hypot(rt[:, 0], rt[:, 1]) <= 1.5 + 1e-6) and np.all(np.abs(rt[:, 2]) <= 2.0 + 1e-6)


def test_robot_config_spec_equals_the_training_spec(rollout: dict[str, np.ndarray], exported_bundle) -> None:
    """The node can check the bundle against its own config: same spec as the env's ObservationManager."""
    cfg = load_config(overrides=TRAIN_OVERRIDES)
    env_fingerprint = str(rollout["env_fingerprint"])
    own = policy_spec(cfg)
    assert own.fingerprint() == env_fingerprint
    rt = PolicyRuntime.load(exported_bundle, spec=own)
    assert rt.contract.fingerprint == env_fingerprint
    assert rt.contract.beams == BeamLayout(72)
    assert rt.contract.angle_increment == pytest.approx(2 * math.pi / 72)
