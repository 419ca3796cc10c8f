"""The DEPLOYABLE observation terms: the single definition used by training and by the robot.

Each term is a function of an :class:`ObsContext` alone (robot-side quantities: the scan on the
training beams, the odometry pose and body-frame twist, the goal in the odometry frame, the
previous action) and its params. Simulator truth is not reachable from here by construction:
privileged terms live in the training package and take the simulator truth as a second argument.

Every term scales itself to O(1). Arrays are batched: leading dimension = number of robots.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from navcontract.xp import ops_for

DEPLOYABLE = "DEPLOYABLE"
SIM_ONLY = "SIM_ONLY"


@dataclass(frozen=True)
class SensorDims:
    """Constants of the robot and sensor that the terms scale by (part of the contract)."""

    num_beams: int
    max_range: float
    v_max: float
    omega_max: float


@dataclass
class ObsContext:
    """What the robot knows, batched over N robots (N = 1 on the real robot).

    scan:       (N, num_beams) ranges in metres on the training beams (inf never appears: a beam
                with no return holds max_range).
    pose:       (N, 3) x, y, yaw of base_link in the odometry frame.
    twist:      (N, 3) forward velocity, left velocity (m/s, body frame) and yaw rate (rad/s).
    goal:       (N, 2) goal position in the odometry frame.
    prev_action:(N, 3) the previous dimensionless action (clipped to [-1, 1]).
    """

    scan: Any
    pose: Any
    twist: Any
    goal: Any
    prev_action: Any
    dims: SensorDims


@dataclass(frozen=True)
class TermDef:
    """A registered observation term: name, provenance, declared width, function, defaults."""

    name: str
    provenance: str
    width: Callable[[dict[str, Any], SensorDims], int]
    fn: Callable[..., Any]
    default_params: dict[str, Any]
    version: int = 1  # bump when the term's meaning changes: the fingerprint changes with it


def goal_in_body(ctx: ObsContext) -> tuple[Any, Any]:
    """Goal position in the robot's body frame (forward, left)."""
    xp = ops_for(ctx.pose)
    dx = ctx.goal[:, 0] - ctx.pose[:, 0]
    dy = ctx.goal[:, 1] - ctx.pose[:, 1]
    c = xp.cos(ctx.pose[:, 2])
    s = xp.sin(ctx.pose[:, 2])
    return c * dx + s * dy, -s * dx + c * dy


def lidar(ctx: ObsContext, params: dict[str, Any]) -> Any:
    """Ranges divided by the lidar's max range, in [0, 1]."""
    xp = ops_for(ctx.scan)
    return xp.clip(ctx.scan / ctx.dims.max_range, 0.0, 1.0)


def goal_polar(ctx: ObsContext, params: dict[str, Any]) -> Any:
    """[min(d / distance_scale, distance_clip), sin(bearing), cos(bearing)], bearing in body frame.

    At the goal itself (d = 0) the bearing is undefined; it is reported as straight ahead.
    """
    xp = ops_for(ctx.pose)
    gx, gy = goal_in_body(ctx)
    d = xp.sqrt(gx * gx + gy * gy)
    safe = xp.maximum(d, 1e-9)
    sin_b = gy / safe
    cos_b = gx / safe + (d <= 1e-9) * 1.0
    d_scaled = xp.minimum(d / float(params["distance_scale"]), float(params["distance_clip"]))
    return xp.stack([d_scaled, sin_b, cos_b], axis=-1)


def vel_body(ctx: ObsContext, params: dict[str, Any]) -> Any:
    """Body-frame (forward, left) velocity divided by v_max."""
    return ctx.twist[:, 0:2] / ctx.dims.v_max


def omega(ctx: ObsContext, params: dict[str, Any]) -> Any:
    """Yaw rate divided by omega_max."""
    return ctx.twist[:, 2:3] / ctx.dims.omega_max


def action_prev(ctx: ObsContext, params: dict[str, Any]) -> Any:
    """The previous dimensionless action, already in [-1, 1]."""
    return ctx.prev_action[:, 0:3] * 1.0


DEPLOYABLE_TERMS: dict[str, TermDef] = {
    t.name: t
    for t in [
        TermDef("lidar", DEPLOYABLE, lambda p, d: d.num_beams, lidar, {}),
        TermDef(
            "goal_polar",
            DEPLOYABLE,
            lambda p, d: 3,
            goal_polar,
            {"distance_scale": 5.0, "distance_clip": 2.0},
        ),
        TermDef("vel_body", DEPLOYABLE, lambda p, d: 2, vel_body, {}),
        TermDef("omega", DEPLOYABLE, lambda p, d: 1, omega, {}),
        TermDef("action_prev", DEPLOYABLE, lambda p, d: 3, action_prev, {}),
    ]
}
"""Registry order is output order. ``action_prev`` is registered but off by default."""

DEFAULT_POLICY_TERMS_ENABLED = {
    "lidar": True,
    "goal_polar": True,
    "vel_body": True,
    "omega": True,
    "action_prev": False,
}
