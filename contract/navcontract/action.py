"""The action contract: dimensionless policy action -> body-frame velocity command in SI units.

Defined once; the simulator applies it before rotating into world-frame actuator commands, and
the robot runtime applies it to the ONNX output. The ONNX policy outputs the *raw* action
(before clipping and scaling): scaling happens here and only here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from navcontract.xp import ops_for

ACTION_ORDER = ("linear.x", "linear.y", "angular.z")


@dataclass(frozen=True)
class ActionScaling:
    v_max: float
    omega_max: float
    limit_planar_speed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "order": list(ACTION_ORDER),
            "clip": [-1.0, 1.0],
            "v_max": self.v_max,
            "omega_max": self.omega_max,
            "limit_planar_speed": self.limit_planar_speed,
            "rule": "a = clip(raw, -1, 1); v = a[0:2] * v_max; w = a[2] * omega_max; "
            "if limit_planar_speed and |v| > v_max: v *= v_max / |v|",
        }


def clip_action(raw: Any) -> Any:
    return ops_for(raw).clip(raw, -1.0, 1.0)


def action_to_command(raw: Any, scaling: ActionScaling) -> Any:
    """(N, 3) raw actions -> (N, 3) body-frame [vx, vy, wz] in m/s and rad/s."""
    xp = ops_for(raw)
    a = xp.clip(raw, -1.0, 1.0)
    vx = a[:, 0] * scaling.v_max
    vy = a[:, 1] * scaling.v_max
    wz = a[:, 2] * scaling.omega_max
    if scaling.limit_planar_speed:
        speed = xp.sqrt(vx * vx + vy * vy)
        factor = xp.minimum(scaling.v_max / xp.maximum(speed, 1e-9), 1.0)
        vx = vx * factor
        vy = vy * factor
    return xp.stack([vx, vy, wz], axis=-1)
