"""Collision guard: slow the planar command so the robot can stop before what its scan shows.

The policy decides the command; the guard only ever scales its planar part ``(vx, vy)`` down,
keeping its direction, and never touches ``wz`` (the shell is a cylinder: turning in place cannot
hit anything). It reads the same ``num_beams`` ranges the policy observed (metres, the scan rule
of :mod:`navcontract.scan`), so training (torch, batched over worlds) and the robot (numpy, one
robot) apply the very same rule to the very same numbers. Like Nav2's collision monitor in its
approach mode, but on the policy's own scan and trained with.

The rule, per world, for a planar command ``v`` of speed ``s = |v|`` in direction ``u``:

1. Each beam ``j`` is a point at its range ``r_j`` and angle ``theta_j`` (body frame). Its value is
   the nearest return in its sector of width ``2 delta`` (``delta`` = half the beam increment), so
   the obstacle may lie anywhere on that arc: the point is inflated to a disc of radius
   ``rho_j = radius + margin + r_j sin(delta)``. A beam at ``max_range`` or beyond (no return)
   blocks nothing.

   1b. With ``slide``, a return inside the margin (or within
   ``SLIDE_EPS`` of it) keeps only what is left of its gap: ``rho_j = min(rho_j, max(r_j - SLIDE_EPS,
   radius + r_j sin(delta)))``. A motion that passes it no closer than ``r_j - SLIDE_EPS`` is
   free; one toward it gets a free distance of at most ``SLIDE_EPS`` (step 2), so inside the
   margin the robot closes in at no more than ``SLIDE_EPS / headway`` (2 cm/s at 0.5 s), and never
   nearer than the shell plus the spread. Without ``slide`` every motion with a forward component
   toward such a return is stopped, so a robot that had crept into the margin beside a post could
   not slide past it, only back away (a policy pushing along it stood still).

2. The robot centre sweeping along ``u`` meets that disc after the free distance
   ``d_j = a_j - sqrt(rho_j^2 - l_j^2)``, where ``a_j`` and ``l_j`` are the point's along-track and
   cross-track offsets; a point behind the robot (``a_j <= 0``) or off the swept band
   (``l_j >= rho_j``) blocks nothing. ``D = min_j d_j`` (negative when a point is already inside
   the band ahead: then no motion toward it is allowed). "Behind" means ``a_j <= ALONG_EPS``.
3. The speed cap is ``min(D / headway, sqrt(2 decel D))`` for ``D > 0``, else 0: the robot keeps a
   time headway to the nearest blocking return and can always brake at ``decel`` before it.
4. ``scale = min(1, cap / s)`` (1 for ``s = 0``); the command becomes ``[scale vx, scale vy, wz]``.

Moving away from an obstacle is never limited, nor is moving along one outside the margin (with
``slide``, inside it too), so the guard cannot trap the robot: it only refuses the directions that
close in on a return. The rule is vectorised over worlds and beams
(no Python loop) and keeps the dtype and device of its inputs.

The guard a policy was trained with travels in its bundle (the contract's optional ``guard``
section, :meth:`GuardRule.to_dict`); the node applies that guard by default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from navcontract.scan import TRAINING_ANGLE_MIN
from navcontract.xp import ops_for

GUARD_SECTION = "guard"
"""The contract section that carries the guard a policy was trained with."""

ALONG_EPS = 1e-4
"""[m] A return must be at least this far ahead along the motion to block it: one exactly abeam (the
robot sliding along a wall it touches) is not in the way, whatever the float rounding of its angle."""


SLIDE_EPS = 0.01
"""[m] With ``slide``: how much of its gap a return already inside the margin may lose per command."""


@dataclass(frozen=True)
class GuardRule:
    """The guard's parameters (see the module docstring for the rule). Every one is required: the
    values a policy trained with come from its training config (``env.guard``) or its contract."""

    radius: float  # [m] the robot's shell radius
    margin: float  # [m] kept free beyond the radius
    headway: float  # [s] time headway to the nearest blocking return
    decel: float  # [m/s^2] braking deceleration the cap allows for
    slide: bool  # a return already within the margin may be slid past (rule step 1b)

    NUMBERS: ClassVar[tuple[str, ...]] = ("radius", "margin", "headway", "decel")

    def __post_init__(self) -> None:
        for name in ("radius", "headway", "decel"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"guard {name} must be finite and > 0, got {v!r}")
        if not (isinstance(self.margin, int | float) and math.isfinite(self.margin) and self.margin >= 0):
            raise ValueError(f"guard margin must be finite and >= 0, got {self.margin!r}")
        if not isinstance(self.slide, bool):
            raise ValueError(f"guard slide must be true or false, got {self.slide!r}")

    def to_dict(self) -> dict[str, float | bool]:
        out: dict[str, float | bool] = {k: float(v) for k, v in asdict(self).items() if k in self.NUMBERS}
        out["slide"] = self.slide
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuardRule:
        """The contract's ``guard`` section: the four numbers, each required, and ``slide`` (a
        boolean; a section without it slides nothing); an unknown, missing or mistyped key is an
        error naming it."""
        known = set(cls.NUMBERS) | {"slide"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown guard key(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        for key in cls.NUMBERS:
            if key not in data:
                raise ValueError(f"guard has no {key}")
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"guard.{key} must be a number, got {value!r}")
        slide = data.get("slide", False)
        if not isinstance(slide, bool):
            raise ValueError(f"guard.slide must be true or false, got {slide!r}")
        return cls(**{k: float(data[k]) for k in cls.NUMBERS}, slide=slide)


def guard_scale(ranges: Any, command: Any, rule: GuardRule, max_range: float) -> Any:
    """Per-world factor in [0, 1] for the planar command.

    ``ranges``: ``(..., num_beams)`` metres on the training beam layout; ``command``: ``(..., 3)``
    body-frame ``[vx, vy, wz]`` in m/s and rad/s. Returns ``(...,)``.
    """
    xp = ops_for(ranges)
    ranges = xp.as_float(ranges)
    command = xp.as_float(command)
    num_beams = ranges.shape[-1]
    increment = 2.0 * math.pi / num_beams
    theta = xp.as_float(xp.arange(num_beams, ranges)) * increment + TRAINING_ANGLE_MIN
    vx, vy = command[..., 0], command[..., 1]
    speed = xp.sqrt(vx * vx + vy * vy)
    moving = speed > 1e-6
    safe_speed = xp.where(moving, speed, speed * 0.0 + 1.0)
    ux, uy = (vx / safe_speed)[..., None], (vy / safe_speed)[..., None]
    px, py = ranges * xp.cos(theta), ranges * xp.sin(theta)
    along = px * ux + py * uy
    lateral = px * uy - py * ux
    spread = ranges * math.sin(0.5 * increment)
    rho = rule.radius + rule.margin + spread
    if rule.slide:
        # Rule step 1b: a return inside its disc keeps what is left of the gap less SLIDE_EPS, never
        # less than the shell plus the spread: the robot may slide past it and close in only slowly.
        rho = xp.minimum(rho, xp.maximum(ranges - SLIDE_EPS, rule.radius + spread))
    band = rho * rho - lateral * lateral
    blocks = (along > ALONG_EPS) & (band > 0.0) & (ranges < max_range)
    free = along - xp.sqrt(xp.maximum(band, 0.0))
    big = 1e6
    dist = xp.amin(xp.where(blocks, free, free * 0.0 + big), axis=-1)
    positive = xp.maximum(dist, 0.0)
    cap = xp.minimum(positive / rule.headway, xp.sqrt(2.0 * rule.decel * positive))
    scale = xp.minimum(cap / safe_speed, 1.0)
    return xp.where(moving, scale, scale * 0.0 + 1.0)


def apply_guard(ranges: Any, command: Any, rule: GuardRule, max_range: float) -> tuple[Any, Any]:
    """``(guarded command, scale)``: the planar part of ``command`` scaled by :func:`guard_scale`."""
    xp = ops_for(command)
    scale = guard_scale(ranges, command, rule, max_range)
    # In the command's own precision: wz and an unslowed command pass through unchanged.
    out = xp.stack([command[..., 0] * scale, command[..., 1] * scale, command[..., 2]], axis=-1)
    return out, scale
