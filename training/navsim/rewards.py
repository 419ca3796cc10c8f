"""Reward registry: every term of the design; weights and params are the config's (``rewards``,
:class:`navsim.config.RewardsCfg`: one field per registered term, in registry order, with its
default weight and params).

A term is ``fn(state, params) -> (N,)`` of unweighted values; the manager multiplies by the
weight, sums, and keeps per-episode sums per term for logging. Distances in ``near_obstacle`` are
measured from the robot's *surface* (centre distance minus ``env.robot.radius``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from navsim.config import RewardsCfg


@dataclass
class RewardState:
    """Everything the reward terms read for one control step, batched over worlds."""

    goal_dist: torch.Tensor  # (N,) distance to the goal after the step
    prev_goal_dist: torch.Tensor  # (N,) distance before the step
    goal_cos: torch.Tensor  # (N,) cos of the goal bearing in the body frame, after the step
    v_forward: torch.Tensor  # (N,) measured body-frame forward velocity [m/s]
    action: torch.Tensor  # (N, A) clipped action of this step (A = 3 holonomic, 2 diff drive; [:, 0] forward)
    prev_action: torch.Tensor  # (N, A) clipped action of the previous step
    surface_clearance: torch.Tensor  # (N,) robot surface to nearest obstacle/wall [m]
    guard_cut: torch.Tensor  # (N,) planar speed the guard took off the requested command, over v_max
    displacement: torch.Tensor  # (N,) net displacement over the stuck window [m]
    window_full: torch.Tensor  # (N,) bool: episode step >= window
    success: torch.Tensor  # (N,) bool, already excludes collisions
    collision: torch.Tensor  # (N,) bool
    timeout: torch.Tensor  # (N,) bool, truncation and not terminated
    out_of_bounds: torch.Tensor  # (N,) bool
    v_max: float
    gamma: float


def r_goal(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    return s.success.float()


def r_progress(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    value = s.prev_goal_dist - s.goal_dist
    if p["potential_discount"]:
        value = value + (1.0 - s.gamma) * s.goal_dist
    return value


def r_face_goal(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    return s.goal_cos * (s.v_forward.abs() / s.v_max).clamp(0.0, 1.0)


def r_time(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    return torch.ones_like(s.goal_dist)


def r_near_obstacle(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    safe = float(p["safe_dist"])
    return ((safe - s.surface_clearance) / safe).clamp(0.0, 1.0)


def r_action_smooth(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    return ((s.action - s.prev_action) ** 2).sum(dim=-1)


def r_guard_cut(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    """The share of the top speed the guard cut from the command this step (0 without a guard): a
    policy charged for it learns to ask for what the guard lets out, so the robot never pushes
    against a return the guard holds it at."""
    return s.guard_cut


def r_backward(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    """max(0, thresh - commanded forward action), the action being dimensionless in [-1, 1]."""
    return (float(p["thresh"]) - s.action[:, 0]).clamp(min=0.0)


def r_stuck(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    return ((s.displacement < float(p["min_move"])) & s.window_full).float()


def r_collision(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    return s.collision.float()


def r_timeout(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    return s.timeout.float()


def r_out_of_bounds(s: RewardState, p: dict[str, Any]) -> torch.Tensor:
    return s.out_of_bounds.float()


@dataclass(frozen=True)
class RewardTermDef:
    name: str
    fn: Callable[[RewardState, dict[str, Any]], torch.Tensor]


REWARD_TERMS: dict[str, RewardTermDef] = {
    t.name: t
    for t in [
        RewardTermDef("goal", r_goal),
        RewardTermDef("progress", r_progress),
        RewardTermDef("face_goal", r_face_goal),
        RewardTermDef("time", r_time),
        RewardTermDef("near_obstacle", r_near_obstacle),
        RewardTermDef("action_smooth", r_action_smooth),
        RewardTermDef("guard_cut", r_guard_cut),
        RewardTermDef("backward", r_backward),
        RewardTermDef("stuck", r_stuck),
        RewardTermDef("collision", r_collision),
        RewardTermDef("timeout", r_timeout),
        RewardTermDef("out_of_bounds", r_out_of_bounds),
    ]
}


class RewardManager:
    """Weighted sum of the enabled terms, with per-episode sums per term."""

    def __init__(self, rewards: RewardsCfg, num_envs: int, device: torch.device | str) -> None:
        self.rewards = rewards
        self.terms: list[tuple[RewardTermDef, float, dict[str, Any]]] = [
            (tdef, float(rewards[name].weight), dict(rewards[name].params))
            for name, tdef in REWARD_TERMS.items()
            if rewards[name].enabled
        ]
        self.episode_sums = {t.name: torch.zeros(num_envs, device=device) for t, _, _ in self.terms}
        self.last_values: dict[str, torch.Tensor] = {}

    def params(self, name: str) -> dict[str, Any]:
        """The params of term ``name``, enabled or not."""
        return dict(self.rewards[name].params)

    def compute(self, state: RewardState) -> torch.Tensor:
        total = torch.zeros_like(state.goal_dist)
        for tdef, weight, params in self.terms:
            value = tdef.fn(state, params) * weight
            self.last_values[tdef.name] = value
            self.episode_sums[tdef.name] += value
            total = total + value
        return total

    def close_episodes(self, done: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-term sums of the episodes ending now ((N,), zero elsewhere); their sums restart at 0.

        Pure masking, no boolean indexing: nothing here waits for the device.
        """
        out = {}
        for name, sums in self.episode_sums.items():
            out[name] = torch.where(done, sums, torch.zeros_like(sums))
            sums.masked_fill_(done, 0.0)
        return out
