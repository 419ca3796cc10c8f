"""Robot scans -> the training lidar's beams: the one documented resampling rule (numpy only).

Training sees ``num_beams`` ranges on the beams of :class:`BeamLayout` (``theta_j = -pi + j *
2pi/num_beams``, body frame, 0 = forward, counter-clockwise positive), each in [0, max_range], with
"no return" reading max_range. This module owns that layout: the simulator's lidar
(``navsim.lidar``), the C MuJoCo world and the sim node all take their beams from here.
A real lidar publishes a ``sensor_msgs/LaserScan``: any beam count, any start angle, either
direction, a field of view that may be under 360 degrees, and inf / NaN / out-of-range readings.
:func:`resample_scan` maps one onto the other. The rules (also in docs/deploy_contract.md):

1. **Sectors.** Training beam ``j`` owns the angular sector ``[theta_j - d/2, theta_j + d/2)``
   with ``d = 2pi/num_beams`` (angles wrap modulo 2pi). Reading ``i`` of the scan points at
   ``angle_min + i * angle_increment`` and covers ``|angle_increment|`` of arc centred there. It
   contributes to every sector that its arc overlaps by more than ``OVERLAP_EPS`` of a sector
   (a single reading, or a zero increment, is a point and lands in the sector containing it).
   Order and sign of the increment do not matter; nor does the start angle (0 or -pi).
2. **Minimum.** A sector's range is the *minimum* over the valid readings it receives: the
   nearest return is the safe summary of a sector.
3. **Reading classes** (REP-117 conventions):
   - finite ``range_min <= r <= range_max``: a return at ``r``;
   - ``+inf``, or finite ``r > range_max``: no return -> ``max_range`` (the training value);
   - ``-inf``: an object closer than ``range_min`` -> ``range_min``;
   - ``NaN``: an invalid measurement, dropped;
   - finite ``r < range_min``: dropped by default (``below_min="invalid"``: many drivers write 0
     for "no measurement"); ``below_min="obstacle"`` treats it like ``-inf`` (``range_min``).
4. **Clip.** Every sector value is clipped to ``[0, max_range]`` (the contract's max range).
5. **Missing sectors.** A sector that receives no valid reading (outside a field of view under
   360 degrees, between the beams of a very sparse lidar, or where every reading was dropped) is
   filled by the ``fill`` policy:
   - ``"nearest"`` (default): the value of the angularly nearest sector that has data (ties take
     the smaller value);
   - ``"max_range"``: free space (optimistic: the policy was never trained with blind sectors);
   - ``"constant"``: ``fill_value`` metres (e.g. a conservative virtual wall), clipped to
     ``[0, max_range]``.
6. **Unusable scans.** No readings at all, malformed metadata (non-finite angles, a zero
   increment with more than one reading, ``range_min > range_max``), or no valid reading in the
   whole scan raise :class:`ScanUnusable`; the node publishes a zero command for it.

A scan already on the training beams (``angle_min = -pi``, ``angle_increment = 2pi/num_beams``,
``num_beams`` readings, also with float32-rounded angles) passes through unchanged apart from the
clip to ``max_range``: each reading's arc is exactly its own sector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

FILL_POLICIES = ("nearest", "max_range", "constant")
BELOW_MIN_RULES = ("invalid", "obstacle")
OVERLAP_EPS = 1e-3
"""Minimum overlap, in sectors, for a reading's arc to count in a sector (absorbs float32 angles)."""


TRAINING_ANGLE_MIN = -math.pi
"""Body-frame angle of training beam 0 (straight back); the beams then go counter-clockwise."""


class ScanUnusable(ValueError):
    """The scan carries no usable information (empty, malformed or no valid reading)."""


@dataclass(frozen=True)
class BeamLayout:
    """The training lidar's beams: ``num_beams`` over 360 degrees, beam ``j`` at body-frame angle
    ``angle_min + j * angle_increment`` (0 = forward, counter-clockwise positive), as a ROS
    ``LaserScan`` describes them. The one definition of the layout, robot side and simulator."""

    num_beams: int

    def __post_init__(self) -> None:
        if int(self.num_beams) < 1:
            raise ValueError(f"num_beams must be >= 1, got {self.num_beams}")

    @property
    def angle_min(self) -> float:
        return TRAINING_ANGLE_MIN

    @property
    def angle_increment(self) -> float:
        return 2.0 * math.pi / self.num_beams

    @property
    def angle_max(self) -> float:
        return self.angle_min + (self.num_beams - 1) * self.angle_increment

    @property
    def fov(self) -> float:
        return 2.0 * math.pi

    def angles(self) -> np.ndarray:
        """(num_beams,) float64 body-frame beam angles."""
        return TRAINING_ANGLE_MIN + np.arange(self.num_beams) * (2.0 * math.pi / self.num_beams)

    def to_dict(self) -> dict[str, Any]:
        """The layout as the contract's ``lidar`` section states it."""
        return {
            "num_beams": self.num_beams,
            "fov": self.fov,
            "fov_deg": 360.0,
            "angle_min": self.angle_min,
            "angle_increment": self.angle_increment,
        }


def beam_angles(num_beams: int) -> np.ndarray:
    """Body-frame angles (float64) of the ``num_beams`` training beams."""
    return BeamLayout(num_beams).angles()


@dataclass(frozen=True)
class ScanInput:
    """What a ``sensor_msgs/LaserScan`` carries that the policy needs (SI units, body frame)."""

    ranges: Any
    angle_min: float
    angle_increment: float
    range_min: float = 0.0
    range_max: float = math.inf

    @classmethod
    def from_msg(cls, msg: Any) -> ScanInput:
        """From a LaserScan-like object (``ranges``, ``angle_min``, ... attributes)."""
        return cls(
            ranges=np.asarray(msg.ranges, dtype=np.float64),
            angle_min=float(msg.angle_min),
            angle_increment=float(msg.angle_increment),
            range_min=float(msg.range_min),
            range_max=float(msg.range_max),
        )

    @classmethod
    def training_beams(cls, ranges: Any, num_beams: int, range_max: float = math.inf) -> ScanInput:
        """A scan laid out exactly like the training lidar (as the simulator renders it)."""
        layout = BeamLayout(num_beams)
        return cls(ranges, layout.angle_min, layout.angle_increment, 0.0, range_max)


@dataclass(frozen=True)
class ScanOptions:
    """The configurable parts of the rule: fill policy for missing sectors, below-range_min rule."""

    fill: str = "nearest"
    fill_value: float | None = None
    below_min: str = "invalid"

    def __post_init__(self) -> None:
        if self.fill not in FILL_POLICIES:
            raise ValueError(f"fill must be one of {FILL_POLICIES}, got {self.fill!r}")
        if self.below_min not in BELOW_MIN_RULES:
            raise ValueError(f"below_min must be one of {BELOW_MIN_RULES}, got {self.below_min!r}")
        if self.fill == "constant" and (self.fill_value is None or not math.isfinite(self.fill_value)):
            raise ValueError("fill='constant' needs a finite fill_value in metres")

    def to_dict(self) -> dict[str, Any]:
        return {"fill": self.fill, "fill_value": self.fill_value, "below_min": self.below_min}


def classify_readings(scan: ScanInput, max_range: float, below_min: str = "invalid") -> tuple[np.ndarray, np.ndarray]:
    """Per-reading (value in metres, valid flag) by rule 3 (values of invalid readings are inf)."""
    r = np.asarray(scan.ranges, dtype=np.float64).reshape(-1)
    rmin = float(scan.range_min)
    rmax = float(scan.range_max)
    value = r.copy()
    valid = np.isfinite(r) & (r >= rmin)
    no_return = np.isposinf(r) | (np.isfinite(r) & (r > rmax))
    value[no_return] = max_range
    valid |= no_return
    too_close = np.isneginf(r)
    if below_min == "obstacle":
        too_close |= np.isfinite(r) & (r < rmin)
    value[too_close] = rmin
    valid |= too_close
    value[~valid] = np.inf
    return value, valid


def _sector_span(scan: ScanInput, n: int, num_beams: int) -> tuple[np.ndarray, np.ndarray]:
    """First sector index and number of sectors each reading's arc overlaps (unwrapped)."""
    a0 = float(scan.angle_min)
    inc = float(scan.angle_increment)
    if not (math.isfinite(a0) and math.isfinite(inc)):
        raise ScanUnusable(f"non-finite scan angles (angle_min={a0}, angle_increment={inc})")
    if inc == 0.0 and n > 1:
        raise ScanUnusable(f"angle_increment is 0 for {n} readings")
    layout = BeamLayout(num_beams)
    sector = layout.angle_increment
    # Position in sector units, measured so that sector j spans [j, j + 1).
    centre = (a0 + np.arange(n, dtype=np.float64) * inc - layout.angle_min) / sector + 0.5
    half = 0.5 * abs(inc) / sector
    lo = np.floor(centre - half + OVERLAP_EPS)
    hi = np.ceil(centre + half - OVERLAP_EPS) - 1.0
    hi = np.maximum(hi, lo)
    count = np.minimum(hi - lo + 1.0, num_beams)
    return lo.astype(np.int64), count.astype(np.int64)


def resample_scan(
    scan: ScanInput,
    num_beams: int,
    max_range: float,
    fill: str = "nearest",
    fill_value: float | None = None,
    below_min: str = "invalid",
    return_filled: bool = False,
) -> Any:
    """Resample ``scan`` onto the ``num_beams`` training beams by the module's rules.

    Returns the ``(num_beams,)`` float64 ranges in metres, in [0, max_range]; with
    ``return_filled`` also a bool mask of the sectors that the fill policy supplied.
    Raises :class:`ScanUnusable` for an empty, malformed or all-invalid scan.
    """
    opts = ScanOptions(fill, fill_value, below_min)
    ranges = np.asarray(scan.ranges, dtype=np.float64).reshape(-1)
    n = ranges.shape[0]
    if n == 0:
        raise ScanUnusable("the scan has no readings")
    if not (float(scan.range_min) <= float(scan.range_max)):
        raise ScanUnusable(f"range_min {scan.range_min} > range_max {scan.range_max}")
    value, valid = classify_readings(scan, max_range, opts.below_min)
    if not valid.any():
        raise ScanUnusable(f"none of the {n} readings is valid (NaN or below range_min)")
    lo, count = _sector_span(scan, n, num_beams)
    out = np.full(num_beams, np.inf)
    v, lo, count = value[valid], lo[valid], count[valid]
    for k in range(int(count.max())):
        sel = count > k
        np.minimum.at(out, (lo[sel] + k) % num_beams, v[sel])
    filled = ~np.isfinite(out)
    if filled.any():
        out[filled] = _fill(out, filled, opts, max_range)
    out = np.clip(out, 0.0, max_range)
    return (out, filled) if return_filled else out


def _fill(out: np.ndarray, filled: np.ndarray, opts: ScanOptions, max_range: float) -> np.ndarray:
    if opts.fill == "max_range":
        return np.full(int(filled.sum()), float(max_range))
    if opts.fill == "constant":
        return np.full(int(filled.sum()), float(opts.fill_value))
    b = out.shape[0]
    have = np.flatnonzero(~filled)
    miss = np.flatnonzero(filled)
    diff = np.abs(miss[:, None] - have[None, :])
    dist = np.minimum(diff, b - diff)
    nearest = dist == dist.min(axis=1, keepdims=True)
    candidates = np.where(nearest, out[have][None, :], np.inf)
    return candidates.min(axis=1)
