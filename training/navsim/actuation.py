"""The command the base gets and how the base answers it, on the device.

:class:`CommandStages` turns the policy's raw actions into the body-frame command, in the robot's
order: the action rule (the clamp), the velocity smoother's rule when ``env.smoother`` is on (at the
contract's ``robot_response.accel_limit``), and the collision guard last, on the scan the policy
saw with its unseen beams occupied (``navcontract.guard``, stage ``last``).

:class:`BaseDynamics` is the randomised base: command delay, actuator lag, acceleration limit, and
a record of the state after every physics substep (for the observation latency).

Before every physics substep :meth:`BaseDynamics.before_substep` turns the body-frame command
into the world-frame actuator targets, per world:

1. **Delay.** Substeps with index ``i < delay`` (``command_latency`` + this step's
   ``control_jitter``) still use the previous control step's command.
2. **Lag.** A first-order lag with time constant ``tau`` follows that target. The value applied
   during a substep is the lag's *mean over the substep* (exact for a target held over the
   substep): with ``x`` the lag's value at the substep boundary, ``decay = exp(-dt/tau)`` and
   ``beta = tau/dt * (1 - decay)``, ``applied = target + (x - target) * beta`` and then
   ``x = target + (x - target) * decay``. A step response then lags by ``tau`` exactly (the area
   between target and applied is ``tau``); the plain update ``x += (1 - decay) (target - x)``
   applied at the start of the substep would lag by about ``tau - dt/2``, 42 % short at
   ``tau = dt``. ``tau = 0`` is no lag (``decay = beta = 0``).
3. **Acceleration limit.** The change of the applied command per substep is clamped to
   ``accel * dt`` *per body axis*: vx and vy each by the linear limit, wz by the angular one. This
   is the rule of the robot's velocity smoother (``navdeploy.smoother``: per axis, from the last
   sent command), so a trained limit and the smoother's limit mean the same thing; a diagonal
   change may reach sqrt(2) times the linear limit in norm.
4. **Rotation.** The applied (vx, vy) is rotated by the current yaw into the jx / jy
   actuators; wz drives jz, as ``navsim.env._body_command_to_ctrl`` does without randomisation.

Per-world params live in device arrays written in place at episode resets, so a captured CUDA
graph of the substeps stays valid. After every substep (and once before the first) the kernels
record qpos and qvel into :attr:`BaseDynamics.history`, ``(S + 1, N, 6)``: index ``i`` is the state
after substep ``i`` (0 = the start of the control step).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import warp as wp

from navcontract.action import ActionScaling, action_to_command
from navcontract.base import DIFF_DRIVE
from navcontract.guard import GuardRule, apply_guard, fan_size
from navcontract.steer import steer_command
from navdeploy.smoother import AccelLimits, limit_change

NO_LIMIT = 1.0e30
"""Largest change per substep standing for "no acceleration limit"."""


@wp.kernel
def _delayed_base_command(
    substep: int,
    cmd: wp.array2d[wp.float32],
    prev_cmd: wp.array2d[wp.float32],
    delay: wp.array[wp.int32],
    decay: wp.array[wp.float32],
    beta: wp.array[wp.float32],
    max_dv_lin: wp.array[wp.float32],
    max_dv_ang: wp.array[wp.float32],
    qpos: wp.array2d[wp.float32],
    lag_state: wp.array2d[wp.float32],
    applied: wp.array2d[wp.float32],
    ctrl: wp.array2d[wp.float32],
):
    """One world: delay, lag, acceleration limit, body -> world (see the module docstring)."""
    w = wp.tid()
    late = substep < delay[w]
    mean = wp.vec3(0.0, 0.0, 0.0)
    for a in range(3):
        target = cmd[w, a]
        if late:
            target = prev_cmd[w, a]
        x = lag_state[w, a]
        mean[a] = target + (x - target) * beta[w]
        lag_state[w, a] = target + (x - target) * decay[w]
    dvx = wp.clamp(mean[0] - applied[w, 0], -max_dv_lin[w], max_dv_lin[w])
    dvy = wp.clamp(mean[1] - applied[w, 1], -max_dv_lin[w], max_dv_lin[w])
    dwz = wp.clamp(mean[2] - applied[w, 2], -max_dv_ang[w], max_dv_ang[w])
    vx = applied[w, 0] + dvx
    vy = applied[w, 1] + dvy
    wz = applied[w, 2] + dwz
    applied[w, 0] = vx
    applied[w, 1] = vy
    applied[w, 2] = wz
    c = wp.cos(qpos[w, 2])
    s = wp.sin(qpos[w, 2])
    ctrl[w, 0] = c * vx - s * vy
    ctrl[w, 1] = s * vx + c * vy
    ctrl[w, 2] = wz


@wp.kernel
def _record_state(
    index: int, qpos: wp.array2d[wp.float32], qvel: wp.array2d[wp.float32], history: wp.array3d[wp.float32]
):
    w = wp.tid()
    for a in range(3):
        history[index, w, a] = qpos[w, a]
        history[index, w, 3 + a] = qvel[w, a]


class BaseDynamics:
    """Per-world state of the randomised base and the kernels that apply it (see module doc).

    ``command`` is the env's (N, 3) body-frame command tensor (read in place); ``data`` the MuJoCo
    Warp data whose qpos / qvel are recorded and whose ctrl is written."""

    def __init__(self, command: torch.Tensor, substeps: int, dt: float, data: Any, wp_device: Any) -> None:
        n = command.shape[0]
        dev = command.device
        self.num_envs, self.substeps, self.dt = n, int(substeps), float(dt)
        self.data, self.wp_device = data, wp_device
        self.command = command
        self.prev_command = torch.zeros_like(command)
        self.delay = torch.zeros(n, dtype=torch.int32, device=dev)
        self.decay = torch.zeros(n, device=dev)
        self.beta = torch.zeros(n, device=dev)
        self.max_dv_lin = torch.full((n,), NO_LIMIT, device=dev)
        self.max_dv_ang = torch.full((n,), NO_LIMIT, device=dev)
        self.lag_state = torch.zeros(n, 3, device=dev)
        self.applied = torch.zeros(n, 3, device=dev)
        self.history = torch.zeros(self.substeps + 1, n, 6, device=dev)
        self._arange = torch.arange(n, device=dev)
        names = (
            "command",
            "prev_command",
            "delay",
            "decay",
            "beta",
            "max_dv_lin",
            "max_dv_ang",
            "lag_state",
            "applied",
            "history",
        )
        self._wp = {name: wp.from_torch(getattr(self, name)) for name in names}

    # Params, written in place (a captured graph keeps reading the same arrays) ----------------
    def set_lag(self, tau: torch.Tensor) -> None:
        """(N,) time constants [s]; 0 = no lag."""
        decay = torch.where(tau > 0, torch.exp(-self.dt / tau.clamp(min=1e-12)), torch.zeros_like(tau))
        self.decay.copy_(decay)
        self.beta.copy_(torch.where(tau > 0, tau / self.dt * (1.0 - decay), torch.zeros_like(tau)))

    def set_accel_limit(self, linear: torch.Tensor, angular: torch.Tensor) -> None:
        """(N,) limits [m/s^2], [rad/s^2]; inf = none."""
        self.max_dv_lin.copy_(torch.clamp(linear * self.dt, max=NO_LIMIT))
        self.max_dv_ang.copy_(torch.clamp(angular * self.dt, max=NO_LIMIT))

    def set_delay(self, substeps: torch.Tensor) -> None:
        """(N,) substeps at the start of the next control step that still use the previous command."""
        self.delay.copy_(substeps.to(torch.int32))

    # Episode and step bookkeeping --------------------------------------------------------------
    def reset(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Worlds in ``mask`` start at rest: no previous command, lag and applied command zero,
        and their whole history is their current state."""
        m1 = mask[:, None]
        for buf in (self.prev_command, self.lag_state, self.applied):
            buf.masked_fill_(m1, 0.0)
        state = torch.cat([qpos[:, 0:3], qvel[:, 0:3]], dim=-1)
        self.history.copy_(torch.where(mask[None, :, None], state[None], self.history))

    def end_step(self) -> None:
        """The command just simulated becomes the previous command of the next step."""
        self.prev_command.copy_(self.command)

    def before_substep(self, index: int) -> None:
        """Actuator targets for substep ``index`` (0-based); the state before the first is recorded."""
        w, d = self._wp, self.data
        if index == 0:
            self._record(0)
        wp.launch(
            _delayed_base_command,
            dim=self.num_envs,
            inputs=[
                index,
                w["command"],
                w["prev_command"],
                w["delay"],
                w["decay"],
                w["beta"],
                w["max_dv_lin"],
                w["max_dv_ang"],
                d.qpos,
            ],
            outputs=[w["lag_state"], w["applied"], d.ctrl],
            device=self.wp_device,
        )

    def after_substep(self, index: int) -> None:
        """Record the state after substep ``index`` (0-based) as history entry ``index + 1``."""
        self._record(index + 1)

    def _record(self, entry: int) -> None:
        d = self.data
        wp.launch(
            _record_state,
            dim=self.num_envs,
            inputs=[entry, d.qpos, d.qvel],
            outputs=[self._wp["history"]],
            device=self.wp_device,
        )

    def observed(self, latency: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pose (N, 3) and body-frame twist (N, 3) of ``latency`` (N,) substeps before the end of
        the step, from the history."""
        state = self.history[self.substeps - latency.long(), self._arange]
        pose = state[:, 0:3].clone()
        c, s = torch.cos(pose[:, 2]), torch.sin(pose[:, 2])
        vx, vy = state[:, 3], state[:, 4]
        twist = torch.stack([c * vx + s * vy, -s * vx + c * vy, state[:, 5]], dim=-1)
        return pose, twist


class CommandStages:
    """The body-frame command the base gets for the policy's raw actions, batched over worlds, in the
    robot's order (``navdeploy.gate``): the action rule (:func:`navcontract.action.action_to_command`:
    clip, scale, planar limit, i.e. the clamp), the guard's steering on a holonomic base
    (:func:`navcontract.steer.steer_command`, when the guard steers), the velocity smoother's rule
    (:func:`navdeploy.smoother.limit_change` from the command sent on the previous step, over one
    control period, then the clamp again) when ``accel`` is active, and the collision guard last
    (:func:`navcontract.guard.apply_guard` on the scan the policy saw, its unseen beams occupied). A
    cut by the guard is what the base gets, and it is the next step's previous command: the
    smoother's memory is the command sent, as on the robot."""

    def __init__(
        self, scaling: ActionScaling, guard: GuardRule | None, max_range: float, accel: AccelLimits, dt: float
    ) -> None:
        self.scaling, self.guard, self.max_range = scaling, guard, float(max_range)
        self.accel, self.dt = accel, float(dt)
        # The widest turning fan a clamped command can need (its planar speed is at most
        # sqrt(2) x the larger axis limit): a fixed count, so the guard reads no batch maximum (a host
        # sync per step on a GPU).
        top = max(scaling.v_max, scaling.backward)
        self.fan = None if guard is None else fan_size(math.hypot(top, top), scaling.omega_max, guard)

    def __call__(
        self, actions: torch.Tensor, prev: torch.Tensor, scan: torch.Tensor, seen: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(N, A) raw actions (the scaling's ``dim``), the (N, 3) command sent on the previous step (zero after a reset), the
        (N, B) scan the policy saw and the (N, B) beams it saw (None: every one) -> (the (N, 3)
        command, the guard's (N,) scale or None without a guard)."""
        return self.guarded(self.requested(actions, prev, scan, seen), scan, seen)

    @property
    def steers(self) -> bool:
        """Whether :meth:`requested` steers: a holonomic base whose guard steers (:mod:`navcontract.steer`)."""
        return self.guard is not None and self.guard.steer > 0.0 and self.scaling.drive != DIFF_DRIVE

    def requested(
        self,
        actions: torch.Tensor,
        prev: torch.Tensor,
        scan: torch.Tensor | None = None,
        seen: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The (N, 3) command the guard is asked to pass: the clamp, the guard's steering on ``scan``
        and ``seen`` (a holonomic base whose guard steers, :mod:`navcontract.steer`; as the gate),
        then the smoother from ``prev`` (the command sent on the previous step) when ``accel`` is active."""
        command = action_to_command(actions, self.scaling)
        if self.steers and scan is not None:
            command = steer_command(scan, command, self.guard, self.max_range, seen, self.fan)
        if self.accel.active:
            command = self.clamp(limit_change(prev, command, self.accel.linear, self.accel.angular, self.dt))
        return command

    def guarded(
        self, command: torch.Tensor, scan: torch.Tensor, seen: torch.Tensor | None, motion: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The last stage: ``command`` through the guard on the scan the policy saw, with rule step 5
        on ``motion`` (the (N, 3) body twist the policy observed, as the node's odometry; None: step 5
        skipped) -> (the command sent, the guard's (N,) scale or None without a guard)."""
        if self.guard is None:
            return command, None
        sent, scale = apply_guard(
            scan, command, self.guard, self.max_range, seen, self.fan, motion=motion, period=self.dt
        )
        if self.scaling.drive == DIFF_DRIVE:  # never a lateral command (a brake along the twist: rule step 5b)
            sent = torch.stack([sent[:, 0], torch.zeros_like(sent[:, 1]), sent[:, 2]], dim=-1)
        return sent, scale

    def clamp(self, command: torch.Tensor) -> torch.Tensor:
        """The limits of the action rule on (N, 3) SI commands (``navdeploy.gate.clamp_command``):
        per axis (a diff drive: ``vx`` in ``[-v_backward, v_max]``, ``vy`` 0), then the planar speed."""
        v, w = self.scaling.v_max, self.scaling.omega_max
        if self.scaling.drive == DIFF_DRIVE:
            vx = command[:, 0].clamp(-self.scaling.backward, v)
            return torch.stack([vx, torch.zeros_like(vx), command[:, 2].clamp(-w, w)], dim=-1)
        vx, vy, wz = command[:, 0].clamp(-v, v), command[:, 1].clamp(-v, v), command[:, 2].clamp(-w, w)
        if self.scaling.limit_planar_speed:
            speed = torch.sqrt(vx * vx + vy * vy)
            factor = torch.where(speed > v, v / speed.clamp(min=1e-9), torch.ones_like(speed))
            vx, vy = vx * factor, vy * factor
        return torch.stack([vx, vy, wz], dim=-1)
