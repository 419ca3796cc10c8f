"""A differential-drive policy end to end: one PPO iteration on the Jackal base, exported, and run
by the robot runtime.

The actor outputs ``(v, w)``; the bundle's ONNX graph has two outputs, its contract states the
``jackal`` base (the fingerprint covers it) and the diff-drive action. Fed the simulator's state as
robot-side inputs, the runtime builds the training observation, and its command is the env's
(``action_to_command`` of the torch actor's mean) with ``linear.y`` exactly 0, as the command the
env's actuators were driven with.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from navcontract.action import DIFF_DRIVE_ORDER, action_to_command
from navcontract.base import load_base
from navcontract.bundle import CONTRACT_FILE, ONNX_FILE, contract_fingerprint
from navcontract.scan import BeamLayout
from navdeploy.runtime import PolicyRuntime, ScanInput
from navsim.config import NavConfig
from navsim.config_load import load_config
from navsim.contract_objects import policy_spec
from navsim.env import NavEnv
from navtrain.checkpoint import build_actor, load_checkpoint
from navtrain.export import actor_mean, export_bundle
from support.simenv import TRAIN_OVERRIDES, train_one_iteration

pytestmark = pytest.mark.slow

JACKAL = load_base("jackal")
NUM_ENVS = 8
STEPS = 8
TOL = 1e-5


@pytest.fixture(scope="module")
def diff_cfg() -> NavConfig:
    return load_config(overrides=[*TRAIN_OVERRIDES, "env.robot.base=jackal"])


@pytest.fixture(scope="module")
def diff_checkpoint(tmp_path_factory: pytest.TempPathFactory, diff_cfg: NavConfig) -> Path:
    """One PPO iteration on 16 CPU worlds of the Jackal base, saved by NavRunner."""
    return train_one_iteration(diff_cfg, 16, tmp_path_factory.mktemp("diff_run"), "diff")


@pytest.fixture(scope="module")
def diff_bundle(tmp_path_factory: pytest.TempPathFactory, diff_checkpoint: Path) -> Path:
    out = tmp_path_factory.mktemp("diff_bundle") / "bundle"
    export_bundle(diff_checkpoint, out, num_obs=256, num_envs=16, device="cpu")
    return out


def test_the_bundle_has_two_outputs_and_states_the_jackal_base(diff_bundle: Path, diff_cfg: NavConfig) -> None:
    model = onnx.load(str(diff_bundle / ONNX_FILE))
    (out,) = model.graph.output
    assert [d.dim_value for d in out.type.tensor_type.shape.dim][1] == 2
    rt = PolicyRuntime.load(diff_bundle)
    c = rt.contract
    assert c.base == JACKAL and c.robot_radius == JACKAL.radius and c.guard.radius == JACKAL.radius
    assert c.action_order == DIFF_DRIVE_ORDER and c.scaling.dim == 2 and c.scaling.backward == JACKAL.v_backward
    assert c.fingerprint == contract_fingerprint(policy_spec(diff_cfg), JACKAL)
    assert c.spec_fingerprint == policy_spec(diff_cfg).fingerprint() and c.obs_dim == 78
    assert '"name": "jackal"' in (diff_bundle / CONTRACT_FILE).read_text()


def test_the_runtime_commands_what_the_env_commands_with_no_sideways_speed(
    diff_bundle: Path, diff_checkpoint: Path, diff_cfg: NavConfig
) -> None:
    actor = build_actor(load_checkpoint(diff_checkpoint), diff_cfg)
    env = NavEnv(diff_cfg, num_envs=NUM_ENVS, device="cpu", seed=777)
    runtimes = [PolicyRuntime.load(diff_bundle) for _ in range(NUM_ENVS)]
    beams = BeamLayout(env.dims.num_beams)
    obs = env.get_observations()["policy"]
    worst_obs, worst_cmd, moving = 0.0, 0.0, 0.0
    for _ in range(STEPS):
        pose, twist = env.observed_pose.numpy().astype(np.float64), env.observed_twist.numpy().astype(np.float64)
        goal, scan = env.rooms.goal.numpy().astype(np.float64), env.scan_readings.numpy()
        raw = actor_mean(actor, obs)
        assert raw.shape == (NUM_ENVS, 2)
        want = action_to_command(raw, env.scaling).numpy()
        for i, rt in enumerate(runtimes):
            s = ScanInput(scan[i], beams.angle_min, beams.angle_increment, 0.0, env.dims.max_range)
            worst_obs = max(
                worst_obs, float(np.abs(rt.observation(s, pose[i], twist[i], goal[i]) - obs[i].numpy()).max())
            )
            cmd = rt.step(s, pose[i], twist[i], goal[i])
            assert cmd.shape == (3,) and cmd[1] == 0.0
            worst_cmd = max(worst_cmd, float(np.abs(cmd - want[i]).max()))
            moving = max(moving, abs(float(cmd[0])) + abs(float(cmd[2])))
        obs_td, _, dones, _ = env.step(raw)
        obs = obs_td["policy"]
        assert torch.all(env.command[:, 1] == 0.0)
        for i in np.flatnonzero(dones.numpy()):
            runtimes[i].reset()
    print(f"\ndiff-drive round trip: max |obs delta| {worst_obs:.2e}, max |cmd delta| {worst_cmd:.2e}")
    assert worst_obs <= TOL and worst_cmd <= TOL
    assert moving > 0.1  # the policy commands motion: not a trivial zero match
