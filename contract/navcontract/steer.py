"""Steering: a holonomic command turned toward the nearby direction the guard lets out fastest.

The guard (:mod:`navcontract.guard`) keeps a command's direction and lowers its speed. A driver that
reads the guard's verdict before it chooses (the dynamic-window planner weighs each sample as the
guard lets it out) asks for directions the guard leaves open; one that does not (a learned policy)
asks for directions it cuts, and crawls between posts it could pass at speed a few degrees further
round. Steering gives every driver the planner's choice, on the same rule:

1. For a holonomic command ``(vx, vy, wz)`` of planar speed ``s > 0`` in direction ``phi``, the
   directions ``phi + k step`` for ``|k step| <= steer`` (``step`` = :data:`STEER_STEP`, ``steer``
   the guard's :attr:`~navcontract.guard.GuardRule.steer`, both in degrees) are each judged by the
   guard's steps 0-4 (:func:`navcontract.guard.guard_scale`: unseen beams occupied, the turning fan)
   on the scan the driver read, at speed ``s`` and the same ``wz``.
2. Each gets the score ``scale_k cos(k step)``: its speed along the asked direction, over ``s``.
3. The command becomes the best direction's at the guard's cap, ``scale_k s``, ``wz`` unchanged,
   where its score beats the asked direction's by more than :data:`STEER_GAIN`; otherwise (the asked
   direction open, or nothing better) it stays exactly as asked. Among equal scores the smaller
   turn wins, left before right.

Steering stands after the clamp and before the velocity smoother: the smoother ramps toward the
steered command, so a turned direction is reached at the base's acceleration. The guard stays the
last stage and checks what is sent, so steering never makes a command less safe than the guard
allows: it only chooses among the commands the guard lets out. A differential drive (no lateral
motion) is never steered: callers apply it to holonomic bases only. The command gate
(``navdeploy.gate``) and the simulator (``navsim.actuation.CommandStages``) apply it alike, from
the contract's ``guard.steer`` (0: off), written by numpy and torch through :mod:`navcontract.xp`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from navcontract.guard import GuardRule, guard_scale
from navcontract.xp import ops_for

STEER_STEP = 5.0
"""[deg] The angle between neighbouring directions steering tries."""

STEER_GAIN = 1e-3
"""Steering turns a command only when the turned direction's speed along the asked one, over the
asked speed, is better by more than this (float rounding never turns a command)."""


def steer_offsets(steer: float) -> list[float]:
    """[rad] The turns steering tries for a half-span of ``steer`` degrees, the asked direction (0)
    first, then by size, left before right."""
    count = int(math.floor(steer / STEER_STEP + 1e-9))
    out = [0.0]
    for k in range(1, count + 1):
        out += [math.radians(k * STEER_STEP), -math.radians(k * STEER_STEP)]
    return out


def steer_command(
    ranges: Any, command: Any, rule: GuardRule, max_range: float, seen: Any = None, fan: int | None = None
) -> Any:
    """``command`` ``(..., 3)`` steered by the module's rule on ``ranges`` ``(..., num_beams)`` and
    ``seen`` (as :func:`navcontract.guard.guard_scale`; ``fan`` likewise); the command itself, in its
    own array, where ``rule.steer`` is 0.

    A command the guard lets out whole (asked direction's scale 1) is never turned: every other
    direction scores at most ``cos(step)`` < 1. So a torch batch on the CPU (training's worlds) has
    the asked direction judged for every command first, and the turned ones only for the commands the
    guard cuts: the same result, each command judged on its own. On a GPU (no host sync) and in
    numpy (one robot: every direction at once is the cheapest) every direction is judged at once."""
    if rule.steer <= 0.0:
        return command
    xp = ops_for(ranges)
    ranges, command = xp.as_float(ranges), xp.as_float(command)
    if seen is not None and not hasattr(seen, "shape"):
        seen = np.asarray(seen, dtype=bool)
    if xp.name != "torch" or command.is_cuda:
        return _steered(xp, ranges, command, rule, max_range, seen, fan)
    lead = tuple(command.shape[:-1])
    num_beams = ranges.shape[-1]
    flat_ranges = xp.broadcast(ranges, (*lead, num_beams)).reshape(-1, num_beams)
    flat_seen = None if seen is None else xp.broadcast(seen, (*lead, num_beams)).reshape(-1, num_beams)
    flat = command.reshape(-1, 3)
    asked = guard_scale(flat_ranges, flat, rule, max_range, flat_seen, fan)
    rows = xp.nonzero(asked < 1.0)
    out = xp.copy(flat)
    if rows.shape[0]:
        cut_seen = None if flat_seen is None else flat_seen[rows]
        out[rows] = _steered(xp, flat_ranges[rows], flat[rows], rule, max_range, cut_seen, fan)
    return out.reshape(*lead, 3)


def _steered(xp: Any, ranges: Any, command: Any, rule: GuardRule, max_range: float, seen: Any, fan: int | None) -> Any:
    """Rule steps 1-3 on ``(..., num_beams)`` ranges and ``(..., 3)`` commands, every direction tried."""
    offsets = steer_offsets(rule.steer)
    turn = xp.constant(offsets, ranges)  # (K,)
    c, s = xp.cos(turn), xp.sin(turn)
    vx, vy, wz = command[..., 0:1], command[..., 1:2], command[..., 2:3]
    tried = xp.stack([vx * c - vy * s, vx * s + vy * c, wz + turn * 0.0], axis=-1)  # (..., K, 3)
    seen_k = None if seen is None else seen[..., None, :]
    scale = guard_scale(ranges[..., None, :], tried, rule, max_range, seen_k, fan)  # (..., K)
    score = scale * xp.cos(turn)
    best, out = score[..., 0], command
    for k in range(1, len(offsets)):
        better = score[..., k] > best + STEER_GAIN
        best = xp.where(better, score[..., k], best)
        turned = tried[..., k, :] * xp.stack([scale[..., k], scale[..., k], scale[..., k] * 0.0 + 1.0], axis=-1)
        out = xp.where(better[..., None], turned, out)
    return out
