"""Command-gate helpers of the robot-runtime tests (no torch, no ROS): a policy stand-in that records
the goals it is handed, and a gate with the tests' usual settings."""

from __future__ import annotations

from typing import Any

import numpy as np

from navdeploy.gate import CommandGate
from navdeploy.runtime import ScanUnusable
from navdeploy.settings import Limits


class GoalRecorder:
    """Stands in for the policy runtime: drives straight ahead at 0.1 m/s and records every goal the
    gate hands it."""

    def __init__(self) -> None:
        self.goals: list[tuple[float, float]] = []

    def reset(self) -> None:
        pass

    def step(self, scan, *, pose, twist, goal):
        self.goals.append(tuple(goal))
        return np.array([0.1, 0.0, 0.0])


def make_gate(driver: Any, **kw: Any) -> CommandGate:
    """A gate on ``driver``: limits 1.5 m/s and 2 rad/s (planar speed limited), goal tolerance 0.3 m,
    stale timeout 0.5 s, an unusable scan refused; ``kw`` replaces or adds CommandGate arguments."""
    args: dict[str, Any] = {
        "driver": driver,
        "limits": Limits(1.5, 2.0, True),
        "goal_tolerance": 0.3,
        "stale_timeout": 0.5,
        "scan_errors": (ScanUnusable,),
    }
    args.update(kw)
    return CommandGate(**args)
