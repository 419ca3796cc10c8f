"""Robot scans -> the training lidar's beams: the one documented resampling rule (numpy only).

Training sees ``num_beams`` ranges on the beams of :class:`BeamLayout` (``theta_j = -pi + j *
2pi/num_beams``, body frame, 0 = forward, counter-clockwise positive), each in [0, max_range], with
"no return" reading max_range. This module owns that layout: the simulator's lidar
(``navsim.lidar``), the C MuJoCo world and the sim node all take their beams from here.
A real lidar publishes a ``sensor_msgs/LaserScan``: any beam count, any start angle, either
direction, a field of view that may be under 360 degrees, and inf / NaN / out-of-range readings.
:func:`resample_scan` maps one onto the other. The rules (also in docs/deploy_contract.md):

0. **Mount.** The training lidar sits at the body's centre facing forward, upright. A real one may
   sit elsewhere (:class:`LidarMount`: its origin ``(x, y)`` on the body, its yaw, upside down):
   its readings are taken into the body frame first. Turned or upside down at the centre, a
   reading at lidar angle ``a`` points at body angle ``yaw + a`` (``yaw - a`` upside down) and
   keeps its range and arc. Off the centre, each reading's return (a no-return reading's point
   at ``max_range``, an object under ``range_min`` at ``range_min``) becomes a body point: its
   distance from the centre is its range, unless it was a no-return reading, which stays
   ``max_range``, and the body angles of its arc's two ends bound the sectors it overlaps. A
   reading without a valid value keeps its direction only, as at the centre. Where two neighbouring
   readings with values leave a gap between their arcs at the centre (the space behind a near
   edge, which the lidar off the centre cannot see and the centre would see past), the nearer
   one's arc is stretched over it.
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
   - finite negative ``r``: not a distance, dropped;
   - finite ``0 <= r < range_min`` (0.0 included): by default (``below_min="obstacle"``) an object
     closer than ``range_min``, like ``-inf`` (``range_min``): a box 0.30 m ahead that the
     driver reports as 0 or under ``range_min`` must not vanish; ``below_min="invalid"`` drops
     it instead (for drivers known to write 0 for "no measurement");
   - a value nearer than ``self_radius`` to the body's centre (after rule 0): the robot's own part
     that the lidar sees (a mast, a standoff), dropped; 0 (the default): none.
4. **Clip.** Every sector value is clipped to ``[0, max_range]`` (the contract's max range).
5. **Missing sectors.** A sector that receives no valid reading (outside a field of view under
   360 degrees, between the beams of a very sparse lidar, or where every reading was dropped) is
   filled by the ``fill`` policy:
   - ``"nearest"`` (default): the value of the angularly nearest sector that has data (ties take
     the smaller value); rule 7 bounds how much of the view it may invent;
   - ``"max_range"``: free space (optimistic: the policy was never trained with blind sectors);
   - ``"constant"``: ``fill_value`` metres (e.g. a conservative virtual wall), clipped to
     ``[0, max_range]``.
6. **Unusable scans** raise :class:`ScanUnusable` with a named ``code``; the node publishes a
   zero command for it: no readings (``empty``); ``range_min`` not finite and >= 0, or
   ``range_max`` not above ``range_min`` and positive (``range_limits``: unset metadata, or
   millimetres, would make every return "no return"); non-finite angles or a zero increment with
   more than one reading (``angles``); readings spanning more than 2pi (``angular_span``:
   angles in degrees); no valid reading at all (``no_valid_reading``).
7. **Doubt** (:class:`ScanOptions` thresholds), also :class:`ScanUnusable`: fewer than
   ``min_valid_share`` of the readings valid (``too_few_valid``: a mostly blind scan would be
   filled from its few readings); the scan's angular coverage (the training sectors its readings
   cover) below ``min_coverage`` of the field of view the policy was trained with
   (``low_coverage``: a 20 degree arc would be copied around the circle); a run of more than
   ``max_fill_gap`` consecutive filled sectors reaching into the front half (|bearing| < 90
   degrees) (``blind_front``: unseen space ahead would be invented from its neighbours).

A scan already on the training beams (``angle_min = -pi``, ``angle_increment = 2pi/num_beams``,
``num_beams`` readings, also with float32-rounded angles) passes through unchanged apart from the
clip to ``max_range``: each reading's arc is exactly its own sector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from navcontract.xp import ops_for

FILL_POLICIES = ("nearest", "max_range", "constant")
BELOW_MIN_RULES = ("invalid", "obstacle")
OVERLAP_EPS = 1e-3
"""Minimum overlap, in sectors, for a reading's arc to count in a sector (absorbs float32 angles)."""


TRAINING_ANGLE_MIN = -math.pi
"""Body-frame angle of training beam 0 (straight back); the beams then go counter-clockwise."""


SCAN_FAULTS = (
    "empty",
    "range_limits",
    "angles",
    "angular_span",
    "no_valid_reading",
    "too_few_valid",
    "low_coverage",
    "blind_front",
)
"""The named reasons a scan is refused (:attr:`ScanUnusable.code`), in the order they are checked."""

SPAN_TOLERANCE = 1e-4
"""Relative float tolerance on the 2pi limit of a scan's angular span (float32 angles)."""


class ScanUnusable(ValueError):
    """The scan cannot be given to the policy; ``code`` names why (one of :data:`SCAN_FAULTS`)."""

    def __init__(self, message: str, code: str = "malformed", report: ScanReport | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.report = report


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
class LidarMount:
    """Where a lidar sits on the body (rule 0): its origin ``(x, y)`` [m] in the body frame, its
    ``yaw`` [rad] (the direction of its angle 0 from the body's forward, counter-clockwise), and
    ``upside_down`` (its angles then run clockwise in the body frame). The default is the training
    lidar's: at the centre, facing forward, upright."""

    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0
    upside_down: bool = False

    def __post_init__(self) -> None:
        for name in ("x", "y", "yaw"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"lidar mount {name} must be a finite number, got {v!r}")

    @property
    def identity(self) -> bool:
        """At the centre, facing forward, upright: the readings are body-frame already."""
        return self.centred and self.yaw == 0.0 and not self.upside_down

    @property
    def centred(self) -> bool:
        return self.x == 0.0 and self.y == 0.0

    @property
    def sign(self) -> float:
        """+1 upright, -1 upside down: a lidar angle's sense in the body frame."""
        return -1.0 if self.upside_down else 1.0

    def body_angles(self, angles: Any) -> np.ndarray:
        """Body-frame directions of lidar-frame ``angles`` (from the lidar's origin)."""
        return self.yaw + self.sign * np.asarray(angles, dtype=np.float64)

    def body_points(self, ranges: Any, angles: Any) -> np.ndarray:
        """``(n, 2)`` body-frame points of returns at ``ranges`` along lidar-frame ``angles``."""
        a = self.body_angles(angles)
        r = np.asarray(ranges, dtype=np.float64)
        return np.stack([self.x + r * np.cos(a), self.y + r * np.sin(a)], axis=-1)

    def sensor_pose(self, pose: Any) -> Any:
        """The lidar's ``(..., 3)`` ``(x, y, yaw)`` in the frame of the body's ``pose`` ``(..., 3+)``
        ``(x, y, yaw)``, numpy or torch (one robot or a batch); a reading at lidar angle ``a`` points at
        ``yaw + sign * a`` there."""
        if not hasattr(pose, "shape"):
            pose = np.asarray(pose, dtype=np.float64)
        xp = ops_for(pose)
        px, py, pyaw = pose[..., 0], pose[..., 1], pose[..., 2]
        c, s = xp.cos(pyaw), xp.sin(pyaw)
        return xp.stack([px + c * self.x - s * self.y, py + s * self.x + c * self.y, pyaw + self.yaw], axis=-1)

    def to_dict(self) -> dict[str, Any]:
        return {"x": self.x, "y": self.y, "yaw": self.yaw, "upside_down": self.upside_down}


@dataclass(frozen=True)
class ScanInput:
    """What a ``sensor_msgs/LaserScan`` carries that the policy needs (SI units): readings in the
    frame of the lidar at ``mount`` on the body (None: the body frame itself, rule 0)."""

    ranges: Any
    angle_min: float
    angle_increment: float
    range_min: float = 0.0
    range_max: float = math.inf
    mount: LidarMount | None = None

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


DEFAULT_MIN_VALID_SHARE = 0.5
DEFAULT_MIN_COVERAGE = 0.75
DEFAULT_MAX_FILL_GAP = 2


@dataclass(frozen=True)
class ScanOptions:
    """The configurable parts of the rule (docs/deploy_contract.md justifies the defaults).

    ``fill`` / ``fill_value``: rule 5; ``below_min`` and ``self_radius`` [m]: rule 3;
    ``min_valid_share``: the share of a scan's readings that must be valid; ``min_coverage``: the
    share of the trained field of view a scan must cover; ``max_fill_gap``: the most consecutive
    filled sectors allowed in the front half (rule 7).
    """

    fill: str = "nearest"
    fill_value: float | None = None
    below_min: str = "obstacle"
    min_valid_share: float = DEFAULT_MIN_VALID_SHARE
    min_coverage: float = DEFAULT_MIN_COVERAGE
    max_fill_gap: int = DEFAULT_MAX_FILL_GAP
    self_radius: float = 0.0

    def __post_init__(self) -> None:
        if self.fill not in FILL_POLICIES:
            raise ValueError(f"fill must be one of {FILL_POLICIES}, got {self.fill!r}")
        if self.below_min not in BELOW_MIN_RULES:
            raise ValueError(f"below_min must be one of {BELOW_MIN_RULES}, got {self.below_min!r}")
        if self.fill == "constant" and (
            self.fill_value is None or not math.isfinite(self.fill_value) or self.fill_value < 0
        ):
            raise ValueError(f"fill 'constant' needs a finite fill_value >= 0 in metres, got {self.fill_value}")
        r = self.self_radius
        if isinstance(r, bool) or not isinstance(r, int | float) or not (math.isfinite(r) and r >= 0.0):
            raise ValueError(f"self_radius must be a finite distance >= 0 in metres, got {r}")
        for name in ("min_valid_share", "min_coverage"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and 0.0 <= v <= 1.0):
                raise ValueError(f"{name} must be a finite share in [0, 1], got {v}")
        gap = self.max_fill_gap
        if isinstance(gap, bool) or not isinstance(gap, int) or gap < 0:
            raise ValueError(f"max_fill_gap must be an integer number of sectors >= 0, got {gap}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "fill": self.fill,
            "fill_value": self.fill_value,
            "below_min": self.below_min,
            "min_valid_share": self.min_valid_share,
            "min_coverage": self.min_coverage,
            "max_fill_gap": self.max_fill_gap,
            "self_radius": self.self_radius,
        }


@dataclass(frozen=True)
class ScanReport:
    """What the resampling saw: the policy's beams and how much of them the scan really measured."""

    ranges: np.ndarray  # (num_beams,) metres, what the policy sees
    filled: np.ndarray  # (num_beams,) bool, sectors the fill policy supplied
    covered: np.ndarray  # (num_beams,) bool, sectors any reading's arc reaches
    valid_share: float  # valid readings / readings
    coverage: float  # covered sectors / num_beams (share of the full circle)
    trained_fov: float  # [rad] the field of view the policy was trained with

    @property
    def filled_sectors(self) -> int:
        return int(self.filled.sum())

    @property
    def coverage_deg(self) -> float:
        return math.degrees(self.coverage * 2.0 * math.pi)

    def to_status(self) -> dict[str, Any]:
        return {
            "coverage_deg": round(self.coverage_deg, 2),
            "filled_sectors": self.filled_sectors,
            "valid_share": round(self.valid_share, 4),
        }


def classify_readings(scan: ScanInput, max_range: float, below_min: str = "obstacle") -> tuple[np.ndarray, np.ndarray]:
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
        too_close |= np.isfinite(r) & (r >= 0.0) & (r < rmin)  # a negative distance is garbage: invalid
    value[too_close] = rmin
    valid |= too_close
    value[~valid] = np.inf
    return value, valid


@dataclass(frozen=True)
class _Layout:
    """Where a scan's readings fall on the training sectors; depends only on the scan's angles."""

    readings: np.ndarray  # (M,) reading index of each (reading, sector) overlap, ordered by sector
    starts: np.ndarray  # (S,) where each covered sector's run begins in ``readings``
    sectors: np.ndarray  # (S,) the covered sectors, ascending
    covered: np.ndarray  # (num_beams,) bool


@lru_cache(maxsize=16)
def _layout(n: int, a0: float, inc: float, num_beams: int) -> _Layout:
    """The overlaps of ``n`` readings from ``a0`` every ``inc`` [rad] with ``num_beams`` sectors: each
    reading's arc overlaps sectors ``lo .. lo + count - 1`` (mod ``num_beams``). Kept for the next scan
    with the same angles (a lidar's are fixed)."""
    layout = BeamLayout(num_beams)
    sector = layout.angle_increment
    # Position in sector units, measured so that sector j spans [j, j + 1).
    centre = (a0 + np.arange(n, dtype=np.float64) * inc - layout.angle_min) / sector + 0.5
    half = 0.5 * abs(inc) / sector
    return _overlaps(centre - half, centre + half, num_beams)


def _overlaps(start: np.ndarray, end: np.ndarray, num_beams: int) -> _Layout:
    """The sectors each reading's arc ``[start, end]`` (sector units, sector ``j`` spanning ``[j, j +
    1)``, any whole turn) overlaps by more than :data:`OVERLAP_EPS`; a point lands in its sector."""
    n = start.shape[0]
    lo = np.floor(start + OVERLAP_EPS)
    hi = np.ceil(end - OVERLAP_EPS) - 1.0
    hi = np.maximum(hi, lo)
    count = np.minimum(hi - lo + 1.0, num_beams).astype(np.int64)
    reading = np.repeat(np.arange(n, dtype=np.int64), count)
    first = np.repeat(np.cumsum(count) - count, count)
    sector_of = (lo.astype(np.int64)[reading] + np.arange(reading.shape[0]) - first) % num_beams
    order = np.argsort(sector_of, kind="stable")
    sector_of = sector_of[order]
    starts = np.flatnonzero(np.r_[True, sector_of[1:] != sector_of[:-1]])
    covered = np.zeros(num_beams, dtype=bool)
    covered[sector_of] = True
    parts = (reading[order], starts, sector_of[starts], covered)
    for part in parts:
        part.setflags(write=False)
    return _Layout(*parts)


def _check_metadata(scan: ScanInput, n: int) -> None:
    """Rule 6 on the scan's metadata (before any reading is looked at)."""
    if n == 0:
        raise ScanUnusable("the scan has no readings", "empty")
    rmin, rmax = float(scan.range_min), float(scan.range_max)
    if not (math.isfinite(rmin) and rmin >= 0.0):
        raise ScanUnusable(f"range_min {rmin} is not a finite distance >= 0", "range_limits")
    if not (rmax > rmin and rmax > 0.0):  # NaN fails too; +inf is allowed (no limit stated)
        raise ScanUnusable(
            f"range_max {rmax} is not above range_min {rmin} and positive (unset metadata, or not metres?)",
            "range_limits",
        )
    a0, inc = float(scan.angle_min), float(scan.angle_increment)
    if not (math.isfinite(a0) and math.isfinite(inc)):
        raise ScanUnusable(f"non-finite scan angles (angle_min={a0}, angle_increment={inc})", "angles")
    if inc == 0.0 and n > 1:
        raise ScanUnusable(f"angle_increment is 0 for {n} readings", "angles")
    span = (n - 1) * abs(inc)  # first to last reading (angle_max - angle_min)
    if span > 2.0 * math.pi * (1.0 + SPAN_TOLERANCE):
        raise ScanUnusable(
            f"the {n} readings span {span:.3f} rad ({math.degrees(span):.0f} deg), more than a full turn "
            "(angles in degrees, not radians?)",
            "angular_span",
        )


def _front_gap(filled: np.ndarray, max_gap: int) -> tuple[int, float] | None:
    """The longest run (circular) of more than ``max_gap`` filled sectors that reaches into the front
    half (|bearing| < 90 degrees): (length, bearing of its middle in degrees), or None."""
    b = filled.shape[0]
    if not filled.any() or filled.all():
        return (b, 0.0) if filled.all() and b > max_gap else None
    angles = BeamLayout(b).angles()
    front = np.abs(angles) < 0.5 * math.pi - 1e-12
    start = int(np.flatnonzero(~filled)[0])  # rotate so the sequence starts on a sector with data
    order = (start + np.arange(b)) % b
    worst: tuple[int, float] | None = None
    run: list[int] = []
    for j in [*order.tolist(), start]:
        if filled[j]:
            run.append(j)
            continue
        if len(run) > max_gap and front[run].any():
            mid = math.degrees(float(angles[run[len(run) // 2]]))
            if worst is None or len(run) > worst[0]:
                worst = (len(run), mid)
        run = []
    return worst


def turned_to_body(scan: ScanInput) -> ScanInput:
    """``scan`` with a centred mount (rule 0) folded into its angles (the same readings, body-frame
    angles, no mount); a scan without a mount, or with one off the centre, as it is."""
    mount = scan.mount
    if mount is None or not mount.centred:
        return scan
    return ScanInput(
        scan.ranges,
        mount.yaw + mount.sign * float(scan.angle_min),
        mount.sign * float(scan.angle_increment),
        scan.range_min,
        scan.range_max,
    )


def _off_centre(scan: ScanInput, value: np.ndarray, max_range: float, num_beams: int) -> tuple[np.ndarray, _Layout]:
    """Rule 0 off the centre: the readings' values (rule 3's, lidar frame) as distances from the body's
    centre, and the sectors their arcs overlap there."""
    mount = scan.mount
    assert mount is not None
    n = value.shape[0]
    a0, inc = float(scan.angle_min), float(scan.angle_increment)
    theta = a0 + np.arange(n, dtype=np.float64) * inc
    half = 0.5 * abs(inc)
    usable = np.isfinite(value)
    r = np.where(usable, value, 0.0)
    centre = mount.body_points(r, theta)
    ends = [mount.body_points(r, theta + side * half) for side in (-1.0, 1.0)]
    # A reading without a value keeps its direction, as at the centre (it only covers its sectors).
    direction = mount.body_angles(theta)
    phi = np.where(usable, np.arctan2(centre[:, 1], centre[:, 0]), direction)
    arcs = []
    for side, end in zip((-1.0, 1.0), ends, strict=True):
        at = np.where(usable, np.arctan2(end[:, 1], end[:, 0]), direction + side * mount.sign * half)
        arcs.append(phi + np.remainder(at - phi + math.pi, 2.0 * math.pi) - math.pi)
    layout = BeamLayout(num_beams)
    sector = layout.angle_increment
    start = (np.minimum(arcs[0], arcs[1]) - layout.angle_min) / sector + 0.5
    end = (np.maximum(arcs[0], arcs[1]) - layout.angle_min) / sector + 0.5
    body = np.where(usable, np.hypot(centre[:, 0], centre[:, 1]), np.inf)
    raw = np.asarray(scan.ranges, dtype=np.float64).reshape(-1)
    no_return = np.isposinf(raw) | (np.isfinite(raw) & (raw > float(scan.range_max)))
    body = np.where(no_return, value, body)  # a reading of no return stays one (rule 3)
    full_turn = n * abs(inc) >= 2.0 * math.pi * (1.0 - SPAN_TOLERANCE)
    start, end = _bridged(start, end, body, usable, full_turn, num_beams)
    return body, _overlaps(start, end, num_beams)


def _bridged(
    start: np.ndarray, end: np.ndarray, body: np.ndarray, usable: np.ndarray, full_turn: bool, num_beams: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rule 0's shadows: where two neighbouring readings (both with a value; the last and the first of
    a full turn too) leave a gap between their arcs at the body's centre, the lidar, off the centre,
    saw neither into it nor past it (the space behind the nearer one's edge). The nearer reading's arc
    is stretched over the gap: nothing in it is nearer than that reading's return."""
    n = start.shape[0]
    a = np.arange(n - 1) if not full_turn else np.arange(n)
    b = (a + 1) % n
    ok = usable[a] & usable[b]
    a, b = a[ok], b[ok]
    # b's arc unwrapped to the same turn as a's (sector units)
    shift = np.round(((start[b] + end[b]) - (start[a] + end[a])) / (2.0 * num_beams)) * num_beams
    bs, be = start[b] - shift, end[b] - shift
    right, left = bs > end[a], be < start[a]  # the gap lies after a's arc, or before it
    a_nearer = body[a] <= body[b]
    new_start, new_end = start.copy(), end.copy()
    # a nearer: a's arc reaches b's; b nearer: b's arc reaches a's
    np.maximum.at(new_end, a[right & a_nearer], bs[right & a_nearer])
    np.minimum.at(new_start, a[left & a_nearer], be[left & a_nearer])
    np.minimum.at(new_start, b[right & ~a_nearer], (end[a] + shift)[right & ~a_nearer])
    np.maximum.at(new_end, b[left & ~a_nearer], (start[a] + shift)[left & ~a_nearer])
    return new_start, new_end


def _without_own_parts(value: np.ndarray, valid: np.ndarray, self_radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Rule 3: readings nearer than ``self_radius`` to the body's centre are the robot's own parts,
    dropped like NaN; raises when no valid reading is left."""
    own = value < self_radius
    if not own.any():
        return value, valid
    valid = valid & ~own
    if not valid.any():
        raise ScanUnusable(
            f"every valid one of the {value.shape[0]} readings lies within self_radius {self_radius} m of the centre",
            "no_valid_reading",
        )
    return np.where(own, np.inf, value), valid


def resample_scan(
    scan: ScanInput,
    num_beams: int,
    max_range: float,
    fill: str = "nearest",
    fill_value: float | None = None,
    below_min: str = "obstacle",
    return_filled: bool = False,
    *,
    options: ScanOptions | None = None,
    trained_fov: float = 2.0 * math.pi,
    return_report: bool = False,
) -> Any:
    """Resample ``scan`` onto the ``num_beams`` training beams by the module's rules.

    ``options`` (a :class:`ScanOptions`) replaces ``fill`` / ``fill_value`` / ``below_min`` and
    sets the doubt thresholds of rule 7 (their defaults otherwise); ``trained_fov`` [rad] is the
    field of view the policy was trained with (the contract's; 2pi for every bundle so far).
    Returns the ``(num_beams,)`` float64 ranges in metres, in [0, max_range]; with
    ``return_filled`` also a bool mask of the sectors that the fill policy supplied; with
    ``return_report`` a :class:`ScanReport` instead. Raises :class:`ScanUnusable` (with its
    ``code``) by rules 6 and 7.
    """
    opts = options if options is not None else ScanOptions(fill, fill_value, below_min)
    scan = turned_to_body(scan)
    ranges = np.asarray(scan.ranges, dtype=np.float64).reshape(-1)
    n = ranges.shape[0]
    _check_metadata(scan, n)
    value, valid = classify_readings(scan, max_range, opts.below_min)
    if not valid.any():
        raise ScanUnusable(f"none of the {n} readings is valid (NaN or below range_min)", "no_valid_reading")
    if scan.mount is None:
        layout = _layout(n, float(scan.angle_min), float(scan.angle_increment), num_beams)
    else:
        value, layout = _off_centre(scan, value, max_range, num_beams)
    if opts.self_radius > 0.0:
        value, valid = _without_own_parts(value, valid, opts.self_radius)
    covered = layout.covered.copy()
    out = np.full(num_beams, np.inf)
    # Each covered sector: the least value of the readings overlapping it (invalid ones are inf).
    out[layout.sectors] = np.minimum.reduceat(value[layout.readings], layout.starts)
    filled = ~np.isfinite(out)
    if filled.any():
        out[filled] = _fill(out, filled, opts, max_range)
    out = np.minimum(np.maximum(out, 0.0), max_range)
    trained = float(trained_fov) if math.isfinite(trained_fov) and trained_fov > 0 else 2.0 * math.pi
    valid_share = np.count_nonzero(valid) / n
    report = ScanReport(
        out, filled, covered, valid_share, np.count_nonzero(covered) / num_beams, min(trained, 2.0 * math.pi)
    )
    if report.valid_share < opts.min_valid_share:
        raise ScanUnusable(
            f"only {int(valid.sum())} of {n} readings are valid ({report.valid_share:.0%} < min_valid_share "
            f"{opts.min_valid_share:.0%}): too blind to fill",
            "too_few_valid",
            report,
        )
    need = opts.min_coverage * report.trained_fov / (2.0 * math.pi)
    if report.coverage < need - 1e-9:
        raise ScanUnusable(
            f"the scan covers {report.coverage_deg:.0f} deg, below min_coverage {opts.min_coverage:.0%} of the "
            f"trained {math.degrees(report.trained_fov):.0f} deg field of view",
            "low_coverage",
            report,
        )
    gap = _front_gap(filled, opts.max_fill_gap)
    if gap is not None:
        raise ScanUnusable(
            f"{gap[0]} consecutive sectors ({gap[0] * 360.0 / num_beams:.0f} deg) without a valid reading around "
            f"bearing {gap[1]:.0f} deg, in front of the robot (max_fill_gap {opts.max_fill_gap})",
            "blind_front",
            report,
        )
    if return_report:
        return report
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
