"""The geometry of a lidar's scan, shared by the tests that render other robots' scans (no torch,
no ROS): the bag shapes of :mod:`support.bag_shapes` and the scan formats of the lidar parity test."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScanGeometry:
    """``beams`` readings from ``angle_min`` in steps of ``increment`` (negative: a scan that turns
    clockwise); no return beyond ``range_max``."""

    beams: int
    angle_min: float
    increment: float
    range_max: float = 12.0
