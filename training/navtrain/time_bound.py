"""The least time any driver can take to reach a goal: a kinematic lower bound per world.

A driver behind the node's gate starts at rest, and what it sends the base passes the smoother,
which changes each linear axis by at most ``accel`` per second: the bundle's ``robot_response``
limit (the lowest it was trained with), else what the base can do (its ``accel_linear``). Its
planar speed is at most the larger of ``v_forward`` and ``v_backward`` (a holonomic base without
``limit_planar_speed`` adds ``v_lateral`` sideways). The episode succeeds when the robot's centre
is within ``goal_tolerance`` of the goal at the end of a control period. So no driver reaches a
goal whose straight-line distance is ``d`` in less than it takes to cover ``d - goal_tolerance``
from rest at full acceleration and full speed, rounded up to whole control periods. Obstacles,
turning, latency and the base's lag only add to it. On a holonomic base each axis accelerates on
its own, so the planar acceleration is up to ``sqrt(2) * accel``; a diff-drive base accelerates
along its heading only.

:func:`least_time` is that bound per world; :func:`bound_of_contract` reads its numbers from a
bundle's contract. nav-compare reports it beside the drivers' times, so that a time bar below it
is seen to ask for what no driver can do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from navcontract.bundle import Contract


@dataclass(frozen=True)
class KinematicLimits:
    """What bounds a driver's time to a goal (see the module docstring)."""

    v_max: float  # [m/s] planar speed
    accel: float  # [m/s^2] planar acceleration
    goal_tolerance: float  # [m]
    period: float  # [s] control period: times are whole periods

    def __post_init__(self) -> None:
        for name in ("v_max", "accel", "period"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"time bound: {name} must be finite and > 0, got {value}")
        if not (math.isfinite(self.goal_tolerance) and self.goal_tolerance >= 0):
            raise ValueError(f"time bound: goal_tolerance must be finite and >= 0, got {self.goal_tolerance}")


def least_time(straight: np.ndarray, limits: KinematicLimits) -> np.ndarray:
    """(n,) [s] The bound for worlds whose start is ``straight`` metres from the goal."""
    dist = np.maximum(np.asarray(straight, dtype=np.float64) - limits.goal_tolerance, 0.0)
    v, a = limits.v_max, limits.accel
    ramp = v * v / (2.0 * a)  # the distance covered while speeding up to v
    t = np.where(dist >= ramp, v / a + (dist - ramp) / v, np.sqrt(2.0 * dist / a))
    periods = np.ceil(np.round(t / limits.period, 9))
    return periods * limits.period


def bound_of_contract(contract: Contract) -> KinematicLimits | None:
    """The limits a bundle's parsed contract sets its robot; None when it states no base."""
    base = contract.base
    if base is None:
        return None
    response = contract.response
    trained = None if response is None else response.accel_limit_linear
    accel = base.accel_linear if trained is None else trained
    v_max = max(base.v_forward, base.v_backward)
    if base.holonomic and not base.limit_planar_speed:
        v_max = math.hypot(v_max, base.v_lateral)  # each axis at its own limit
    return KinematicLimits(
        v_max=v_max,
        accel=accel * math.sqrt(2.0) if base.holonomic else accel,
        goal_tolerance=contract.goal_tolerance,
        period=contract.control_period,
    )
