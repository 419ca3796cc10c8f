"""Velocity smoother on the node's output: a per-axis acceleration limit on the commanded twist.

Like Nav2's velocity_smoother in open loop: each component of the body-frame command
``[vx, vy, wz]`` moves from the previous *sent* command by at most ``accel * dt``, where ``accel``
is ``linear`` for vx and vy (each axis on its own) and ``angular`` for wz, and ``dt`` is the time
since that command was sent (the actual control period). The limits default to the bundle's
``robot_response.accel_limit`` (the most restrictive acceleration the policy was trained with), so
the base is asked for nothing the policy did not see; a bundle trained without acceleration limits
gives none, and the smoother passes commands through unchanged. The rule itself is
:func:`limit_change` (numpy or torch): the simulator's command stages (``navsim.actuation``) apply it
too.

**It never delays a stop.** The smoother only shapes the commands of the ``driving`` state, and it
is not the last stage: the command gate (``navdeploy.gate``) runs clamp, smoother, then the
collision guard on the command that will be sent (:mod:`navcontract.guard`, stage ``last``). A cut
by the guard goes out as it is, even when it is a bigger change than the smoother allows, and the
smoother remembers what was sent (:meth:`VelocitySmoother.propose`, then
:meth:`VelocitySmoother.sent`). Every zero the safety controller publishes (no goal, goal reached, a
stale or unusable input, a stalled clock, an error) goes out at once, and the smoother then starts
again from rest: after a stop, the next command ramps up from zero. A lower target that the guard
does not cut (the driver slowing down) is ramped down at the same limit, since that is what the
policy was trained with.

``dt`` is measured on the node's clock. A tick with no measurable time since the last command (the
clock did not advance or went back) uses the nominal control period; a gap longer than
:data:`MAX_DT_PERIODS` control periods counts as that many, so a late tick cannot turn into a step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from navcontract.xp import ops_for

MAX_DT_PERIODS = 2.0
"""The longest time step credited to one tick, in nominal control periods."""


@dataclass(frozen=True)
class AccelLimits:
    """Acceleration limits per axis; None leaves that axis unlimited."""

    linear: float | None = None  # [m/s^2], on linear.x and on linear.y, each on its own
    angular: float | None = None  # [rad/s^2], on angular.z

    def __post_init__(self) -> None:
        for name, v in (("linear", self.linear), ("angular", self.angular)):
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"acceleration limit {name} must be finite and > 0, got {v}")

    @property
    def active(self) -> bool:
        return self.linear is not None or self.angular is not None


def limit_change(prev: Any, target: Any, linear: float | None, angular: float | None, dt: float) -> Any:
    """The smoother's rule on ``(..., 3)`` body-frame commands (numpy or torch): each component of
    ``target`` moved from ``prev`` by at most ``accel * dt``, ``linear`` [m/s^2] for vx and vy (each
    on its own), ``angular`` [rad/s^2] for wz; None leaves that axis unlimited (the target's)."""
    xp = ops_for(target)
    out = []
    for i, accel in enumerate((linear, linear, angular)):
        t = target[..., i]
        if accel is None:
            out.append(t)
            continue
        step = float(accel) * dt
        p = prev[..., i]
        out.append(p + xp.minimum(xp.maximum(t - p, -step), step))
    return xp.stack(out, axis=-1)


class VelocitySmoother:
    """The smoother's state: the last sent command and when it was sent."""

    def __init__(self, limits: AccelLimits, control_period: float) -> None:
        if not (math.isfinite(control_period) and control_period > 0):
            raise ValueError(f"control period must be finite and > 0, got {control_period}")
        self.limits = limits
        self.control_period = float(control_period)
        self.last = np.zeros(3)
        self.last_time: float | None = None

    def reset(self, now: float | None = None) -> None:
        """A zero command was sent at ``now`` (a stop): the next command ramps up from rest."""
        self.last = np.zeros(3)
        self.last_time = now

    def dt(self, now: float) -> float:
        """The time credited to this tick: since the last sent command, within (0, MAX_DT_PERIODS]
        control periods; the nominal period when it cannot be measured."""
        if self.last_time is None or not math.isfinite(now):
            return self.control_period
        dt = now - self.last_time
        if not math.isfinite(dt) or dt <= 0.0:
            return self.control_period
        return min(dt, MAX_DT_PERIODS * self.control_period)

    def propose(
        self, target: np.ndarray, now: float, clamp: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> np.ndarray:
        """The command the smoother would send at ``now`` toward ``target`` (body frame [vx, vy,
        wz]), passed through ``clamp`` (the speed limits, which always win); remembers nothing (the
        gate guards it, then reports what it sent with :meth:`sent`). Without limits: the target."""
        target = np.asarray(target, dtype=np.float64).reshape(3)
        out = limit_change(self.last, target, self.limits.linear, self.limits.angular, self.dt(now))
        if clamp is not None:
            out = np.asarray(clamp(out), dtype=np.float64).reshape(3)
        return out

    def sent(self, cmd: np.ndarray, now: float) -> None:
        """``cmd`` went out at ``now``: the next command moves from it."""
        self.last = np.asarray(cmd, dtype=np.float64).reshape(3).copy()
        self.last_time = now

    def step(
        self, target: np.ndarray, now: float, clamp: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> np.ndarray:
        """:meth:`propose` sent as it is: the smoother alone (no stage after it)."""
        out = self.propose(target, now, clamp)
        self.sent(out, now)
        return out
