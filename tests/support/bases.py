"""A differential-drive contract for the robot-side tests, without a trained diff-drive bundle: the
committed fixture bundle's observation, beams, period and tolerance under a diff-drive ``base`` of
the fixture's forward and yaw-rate limits and a backward limit of its own, written by
:func:`navcontract.bundle.make_contract` and read back by ``parse_contract`` (every check of a real
bundle's contract applies)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from navcontract.action import ActionScaling
from navcontract.base import DIFF_DRIVE, BaseSpec
from navcontract.bundle import Contract, make_contract, parse_contract, read_contract
from support.paths import FIXTURE_BUNDLE

V_BACKWARD = 0.5
"""[m/s] The diff-drive contract's backward limit (its forward limit is the fixture's v_max, 1.5)."""


def fixture_contract() -> Contract:
    return read_contract(FIXTURE_BUNDLE)


def diff_drive_base(v_backward: float = V_BACKWARD, **changes: Any) -> BaseSpec:
    """The diff-drive base of the fixture's limits and radius; ``changes`` replace fields."""
    c = fixture_contract()
    base = BaseSpec(
        name="test_diff_drive",
        drive=DIFF_DRIVE,
        radius=float(c.robot_radius),
        v_forward=float(c.v_max),
        v_backward=v_backward,
        v_lateral=0.0,
        limit_planar_speed=False,
        omega_max=float(c.omega_max),
        accel_linear=2.5,
        accel_angular=3.2,
    )
    return dataclasses.replace(base, **changes)


def diff_drive_contract(base: BaseSpec | None = None, **sections: Any) -> Contract:
    """The fixture's contract driving ``base`` (default :func:`diff_drive_base`); ``sections`` go to
    ``make_contract`` (``guard``, ``response``, ...)."""
    c = fixture_contract()
    base = base if base is not None else diff_drive_base()
    scaling = ActionScaling(base.v_forward, base.omega_max, False, drive=DIFF_DRIVE, v_backward=base.v_backward)
    data = make_contract(
        c.spec, scaling, c.control_period, c.goal_tolerance, 0.0, trained_fov=c.trained_fov, base=base, **sections
    )
    return parse_contract(data)


def write_diff_drive_bundle(out: Path, base: BaseSpec | None = None, **sections: Any) -> Path:
    """A hand-made diff-drive bundle whose 'policy' steers at the goal: a linear layer reads
    goal_polar's cos and sin and outputs ``v = 2 cos``, ``w = 2 sin`` of the goal's bearing (the
    runtime clips to [-1, 1] and scales: backward toward a goal behind, turning toward it). The
    contract is :func:`diff_drive_contract`'s (``sections`` go to ``make_contract``)."""
    from navtrain.onnx_graph import MlpWeights, write_bundle

    contract = diff_drive_contract(base, **sections)
    spec = contract.spec
    goal = spec.slices()["goal_polar"]
    w = np.zeros((2, spec.obs_dim), dtype=np.float32)
    w[0, goal.start + 2] = 2.0  # cos(bearing) -> v
    w[1, goal.start + 1] = 2.0  # sin(bearing) -> w
    ones, zeros = np.ones(spec.obs_dim, np.float32), np.zeros(spec.obs_dim, np.float32)
    write_bundle(out, MlpWeights(zeros, ones, 0.0, [(w, np.zeros(2, np.float32))], "identity"), contract.raw)
    return out
