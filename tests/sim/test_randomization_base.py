"""The randomised base, measured on the simulated robot: actuator lag, acceleration limit, command
latency and control jitter (navsim.actuation), in empty rooms from rest."""

from __future__ import annotations

import pytest
import torch
from test_randomization import only

from support.simenv import empty_rooms

N = 4
DT = 0.02  # physics substep of conf/nav.yaml: 0.1 s / 5
QUIET = ("env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0")


def _velocities(env, actions: list[torch.Tensor]) -> torch.Tensor:
    """Body-frame twist after every physics substep, (steps * substeps, N, 3), from rest."""
    env.reset(empty_rooms(env))
    out = []
    for a in actions:
        env.step(a.expand(env.num_envs, 3))
        h = env.base.history[1:]
        c, s = torch.cos(h[..., 2]), torch.sin(h[..., 2])
        vx, vy = h[..., 3], h[..., 4]
        out.append(torch.stack([c * vx + s * vy, -s * vx + c * vy, h[..., 5]], dim=-1))
    return torch.cat(out)


def _step_lag(env, steps: int = 20) -> torch.Tensor:
    """Per world: the area between a unit step of vx and the measured response [s], i.e. the mean
    delay of the response (tau for a first-order lag; lags in series add up)."""
    v = _velocities(env, [torch.tensor([0.5, 0.0, 0.0])] * steps)[:, :, 0] / 0.75
    assert (v[-1] - 1.0).abs().max() < 1e-3  # settled
    return (DT * (1.0 - v)).sum(dim=0)


def test_actuator_lag_slows_the_step_response_by_its_time_constant(make_env):
    own = _step_lag(make_env(N, *QUIET, *only("actuator_lag", actuator_lag__tau="[0,0]")))
    env = make_env(16, *QUIET, *only("actuator_lag", actuator_lag__tau="[0.04,0.12]"), seed=3)
    added = _step_lag(env) - own[0]
    tau = env.randomization.value("actuator_lag", "tau")  # drawn at the episode's reset
    assert tau.max() - tau.min() > 0.04  # several time constants, one per world
    assert ((added - tau).abs() <= 0.1 * tau).all(), (added, tau)
    # The 63 % rise time moves by about tau too (the velocity servo's own lag aside).
    v = _velocities(env, [torch.tensor([0.5, 0.0, 0.0])] * 4)[:, :, 0] / 0.75
    tau = env.randomization.value("actuator_lag", "tau")
    rise = (v < 1.0 - 1.0 / 2.718281828).sum(dim=0).float() * DT
    assert ((rise - tau).abs() <= 2 * DT).all(), (rise, tau)


def test_acceleration_limit_bounds_the_measured_acceleration(make_env):
    env = make_env(N, *QUIET, *only("accel_limit", accel_limit__linear="[2.5,2.5]", accel_limit__angular="[4.0,4.0]"))
    # Worlds 0-1 translate at (1.06, -1.06) m/s (planar speed limit 1.5 m/s), worlds 2-3 turn at
    # 2 rad/s (separately: turning while translating rotates the body frame, which reads as an
    # acceleration of the body-frame velocity that no actuator made).
    action = torch.tensor([[1.0, -1.0, 0.0]] * 2 + [[0.0, 0.0, 1.0]] * 2)
    v = _velocities(env, [action] * 10)
    accel = torch.diff(torch.cat([torch.zeros(1, N, 3), v]), dim=0) / DT
    for axis, worlds, limit in ((0, slice(0, 2), 2.5), (1, slice(0, 2), 2.5), (2, slice(2, 4), 4.0)):
        peak = accel[:, worlds, axis].abs().max()
        assert limit * 0.9 <= peak <= limit * 1.001, (axis, peak)  # bounded, and the limit binds
    # The ramps take v / a (0.42 s to 1.06 m/s, 0.5 s to 2 rad/s), then the command is held.
    side = 1.5 / 2**0.5
    assert v[29, :2, 0].tolist() == pytest.approx([side] * 2, abs=0.02) and v[15, :2, 0].max() < 0.85
    assert v[29, :2, 1].tolist() == pytest.approx([-side] * 2, abs=0.02)
    assert v[29, 2:, 2].tolist() == pytest.approx([2.0] * 2, abs=0.02) and v[20, 2:, 2].max() < 1.7
    # Without the limit the same command is reached within 0.1 s.
    free = make_env(N, *QUIET, *only("accel_limit", accel_limit__linear="[1e6,1e6]", accel_limit__angular="[1e6,1e6]"))
    assert _velocities(free, [torch.tensor([1.0, 0.0, 0.0])])[4, :, 0].tolist() == pytest.approx([1.5] * N, abs=0.02)


@pytest.mark.parametrize("k", [0, 1, 2, 4])
def test_command_latency_delays_the_first_motion_by_exactly_k_substeps(make_env, k):
    env = make_env(N, *QUIET, *only("command_latency", command_latency__substeps=f"[{k},{k}]"))
    go, stop = torch.tensor([0.5, 0.0, 0.0]), torch.zeros(3)
    v = _velocities(env, [go, stop])[:, :, 0]
    assert (v[:k] == 0).all() and (v[k] > 0.1).all()
    # The stop reaches the base k substeps into the next step too: it still speeds up until then.
    s = env.env_cfg.physics_substeps
    before_stop = v[s - 1]
    assert (v[s : s + k] >= before_stop - 1e-5).all()
    assert (v[s + k] < before_stop - 0.1).all()


def test_control_jitter_adds_a_fresh_delay_every_step(make_env):
    env = make_env(64, *QUIET, *only("control_jitter", control_jitter__substeps="[1,1]"), seed=7)
    go = torch.tensor([0.5, 0.0, 0.0])
    late = []
    for _ in range(3):
        v = _velocities(env, [go])[:, :, 0]  # a fresh episode from rest each time
        late.append(v[0] == 0)
        assert (v[1] > 0.1).all()  # never more than one substep late
    late = torch.stack(late).float()
    assert 0.25 < late.mean() < 0.75  # about half the steps start one substep late...
    assert (late.std(dim=0) > 0).any()  # ...and which ones changes from step to step


def test_graph_friendly_params_are_written_in_place(make_env):
    """Per-world params change at resets without new arrays (a captured CUDA graph keeps reading them)."""
    env = make_env(N, *QUIET, *only("actuator_lag", "accel_limit"))
    ptrs = [t.data_ptr() for t in (env.base.decay, env.base.beta, env.base.max_dv_lin, env.base.delay)]
    before = env.base.decay.clone()
    env.reset(empty_rooms(env))
    assert not torch.equal(env.base.decay, before)
    assert ptrs == [t.data_ptr() for t in (env.base.decay, env.base.beta, env.base.max_dv_lin, env.base.delay)]
