"""The one vocabulary of how an episode ends, shared by the training env, evaluation, the C MuJoCo
world (``navsim.sim_world``) and its ROS 2 sim node.

Priority, when several hold on the same step: a collision beats leaving the room, which beats
reaching the goal; ``timeout`` (truncation) only when nothing else ended the episode. The order of
:data:`OUTCOMES` is that priority, and the index of an outcome in it is its integer code (used by
batched evaluation).
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    SUCCESS = "success"
    COLLISION = "collision"
    OUT_OF_BOUNDS = "out_of_bounds"
    TIMEOUT = "timeout"


OUTCOMES: tuple[Outcome, ...] = (Outcome.COLLISION, Outcome.OUT_OF_BOUNDS, Outcome.SUCCESS, Outcome.TIMEOUT)
"""Every outcome, highest priority first; ``OUTCOMES.index(o)`` is the code of ``o``."""


def judge(collision: bool, out_of_bounds: bool, at_goal: bool, time_up: bool) -> Outcome | None:
    """The outcome of one episode after a step, or None while it goes on (scalar form; NavEnv
    applies the same priority to its batched flags)."""
    if collision:
        return Outcome.COLLISION
    if out_of_bounds:
        return Outcome.OUT_OF_BOUNDS
    if at_goal:
        return Outcome.SUCCESS
    if time_up:
        return Outcome.TIMEOUT
    return None
