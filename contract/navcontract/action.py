"""The action contract: dimensionless policy action -> body-frame velocity command in SI units.

Defined once; the simulator applies it before rotating into world-frame actuator commands, and
the robot runtime applies it to the ONNX output. The ONNX policy outputs the *raw* action
(before clipping and scaling): scaling happens here and only here.

By the base's drive (:mod:`navcontract.base`):

- ``holonomic``: the action is ``(vx, vy, wz)``; ``v = a[0:2] * v_max``, ``w = a[2] * omega_max``,
  and with ``limit_planar_speed`` the planar part is scaled down to ``|v| <= v_max``;
- ``diff_drive``: the action is ``(v, wz)``; ``vx = a[0] * v_max`` forward (``a[0] >= 0``) and
  ``a[0] * v_backward`` backward, ``vy = 0``, ``w = a[1] * omega_max``.

Either way the command is the body-frame ``[vx, vy, wz]`` (ROS ``linear.x, linear.y, angular.z``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from navcontract.base import DIFF_DRIVE, DRIVES, HOLONOMIC
from navcontract.xp import ops_for

ACTION_ORDER = ("linear.x", "linear.y", "angular.z")
DIFF_DRIVE_ORDER = ("linear.x", "angular.z")
RULES = {
    HOLONOMIC: "a = clip(raw, -1, 1); v = a[0:2] * v_max; w = a[2] * omega_max; "
    "if limit_planar_speed and |v| > v_max: v *= v_max / |v|",
    DIFF_DRIVE: "a = clip(raw, -1, 1); vx = a[0] * (v_max if a[0] >= 0 else v_backward); vy = 0; w = a[1] * omega_max",
}
"""The rule as the contract's ``action.rule`` states it, per drive."""


@dataclass(frozen=True)
class ActionScaling:
    v_max: float  # holonomic: per axis and planar norm; diff drive: forward
    omega_max: float
    limit_planar_speed: bool
    drive: str = HOLONOMIC
    v_backward: float | None = None  # diff drive: the backward limit (None: v_max)

    def __post_init__(self) -> None:
        if self.drive not in DRIVES:
            raise ValueError(f"action drive must be one of {', '.join(DRIVES)}, got {self.drive!r}")
        if self.drive == DIFF_DRIVE and self.limit_planar_speed:
            raise ValueError("a diff_drive action has no planar speed limit (limit_planar_speed false)")

    @property
    def dim(self) -> int:
        """Numbers the policy outputs."""
        return len(self.order)

    @property
    def order(self) -> tuple[str, ...]:
        return ACTION_ORDER if self.drive == HOLONOMIC else DIFF_DRIVE_ORDER

    @property
    def backward(self) -> float:
        return self.v_max if self.v_backward is None else self.v_backward

    def to_dict(self) -> dict[str, Any]:
        diff = self.drive == DIFF_DRIVE
        out: dict[str, Any] = {"order": list(self.order), "clip": [-1.0, 1.0]}
        if diff:
            out["drive"] = self.drive
        out["v_max"] = self.v_max
        if diff:
            out["v_backward"] = self.backward
        out.update(omega_max=self.omega_max, limit_planar_speed=self.limit_planar_speed, rule=RULES[self.drive])
        return out

    @classmethod
    def from_dict(cls, action: dict[str, Any]) -> ActionScaling:
        """The contract's ``action`` section (a section without ``drive`` is holonomic)."""
        drive = str(action.get("drive", HOLONOMIC))
        back = action.get("v_backward")
        return cls(
            float(action["v_max"]),
            float(action["omega_max"]),
            bool(action["limit_planar_speed"]),
            drive=drive,
            v_backward=None if back is None else float(back),
        )


def clip_action(raw: Any) -> Any:
    return ops_for(raw).clip(raw, -1.0, 1.0)


def action_to_command(raw: Any, scaling: ActionScaling) -> Any:
    """(N, dim) raw actions -> (N, 3) body-frame [vx, vy, wz] in m/s and rad/s."""
    xp = ops_for(raw)
    a = xp.clip(raw, -1.0, 1.0)
    if scaling.drive == DIFF_DRIVE:
        forward = a[:, 0]
        vx = xp.where(forward >= 0, forward * scaling.v_max, forward * scaling.backward)
        return xp.stack([vx, xp.zeros(tuple(vx.shape), like=vx), a[:, 1] * scaling.omega_max], axis=-1)
    vx = a[:, 0] * scaling.v_max
    vy = a[:, 1] * scaling.v_max
    wz = a[:, 2] * scaling.omega_max
    if scaling.limit_planar_speed:
        speed = xp.sqrt(vx * vx + vy * vy)
        factor = xp.minimum(scaling.v_max / xp.maximum(speed, 1e-9), 1.0)
        vx = vx * factor
        vy = vy * factor
    return xp.stack([vx, vy, wz], axis=-1)
