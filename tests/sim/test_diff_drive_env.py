"""A differential-drive base in the simulator (``env.robot.base=jackal``).

The env's action is ``(v, w)``; the body-frame command has ``vy = 0`` exactly and ``vx`` within
``[-v_backward, v_max]``; the velocity actuators hold the body's sideways velocity near zero. With
the training config (smoother and randomisation on) random actions never gave more than 0.057 m/s
of sideways body velocity at the end of a control step (6 seeds x 8 worlds x 80 steps, v_max
2 m/s, omega_max 4 rad/s): the test allows :data:`LATERAL_BOUND`. The robot's radius is the base's
everywhere the simulator uses one (the MJCF shell, surface distances, the guard).
"""

from __future__ import annotations

import torch

from navcontract.base import load_base

LATERAL_BOUND = 0.1
"""[m/s] Sideways body velocity a diff-drive base may show (wheel slip of the actuator model)."""
JACKAL = load_base("jackal")


def test_a_diff_drive_env_acts_in_v_w_and_never_slides_sideways(make_env) -> None:
    env = make_env(8, "env.robot.base=jackal", seed=0)
    assert env.num_actions == 2 and env.scaling.dim == 2
    assert env.get_observations()["policy"].shape == (8, 78)
    assert env.radius == JACKAL.radius and env.guard.radius == JACKAL.radius
    assert f'size="{JACKAL.radius:.6g}"' in env.mjcf
    gen = torch.Generator().manual_seed(0)
    lateral, forward, turn = 0.0, 0.0, 0.0
    for _ in range(60):
        env.step(torch.rand(8, 2, generator=gen) * 2.4 - 1.2)
        cmd = env.command
        assert torch.all(cmd[:, 1] == 0.0)
        assert cmd[:, 0].min() >= -JACKAL.v_backward - 1e-6 and cmd[:, 0].max() <= JACKAL.v_forward + 1e-6
        assert cmd[:, 2].abs().max() <= JACKAL.omega_max + 1e-6
        twist = env.body_twist()
        lateral = max(lateral, float(twist[:, 1].abs().max()))
        forward = max(forward, float(twist[:, 0].abs().max()))
        turn = max(turn, float(twist[:, 2].abs().max()))
    print(f"\ndiff drive: max |body vy| {lateral:.4f} m/s, max |vx| {forward:.2f} m/s, max |wz| {turn:.2f} rad/s")
    assert forward > 0.5 and turn > 1.0  # it did drive and turn
    assert lateral < LATERAL_BOUND
