"""The training lidar's scan rule as geometry: sub-rays per sector, field of view, fill map (numpy).

The robot reduces a dense scan to the training beams by :func:`navcontract.scan.resample_scan`:
training beam ``j`` is the *minimum* over its sector (``d = 2pi/num_beams`` wide, centred on the
beam of :class:`navcontract.scan.BeamLayout`) of every reading whose arc overlaps it. As a lidar
gets denser, the readings that count in sector ``j`` converge to the *closed* sector
``[theta_j - d/2, theta_j + d/2]``: a reading centred on a sector edge covers both neighbours
(the half-open ``[.., ..)`` of the docstring is the rule for single points). The simulator
renders that limit, the exact sector minimum, by casting ``rays_per_beam = K`` sub-rays per
sector and taking their minimum:

* ``K = 0``: the exact sector minimum (below);
* ``K = 1``: one ray at the sector centre (the lidar before the sector-minimum rule; its readings unchanged);
* ``K >= 2``: ``K`` rays evenly spaced from edge to edge, both edges included, spacing
  ``d / (K - 1)``. A ray on an edge belongs to both neighbours, so one scan casts
  ``num_beams * (K - 1)`` distinct rays. With ``d / (K - 1)`` equal to a real lidar's increment
  (``K = 21`` for 0.25 degrees) the sub-rays are that lidar's own reading directions.

**Field of view** (``fov_deg``, centred on forward, default 360): a sub-ray counts only inside
``[-fov/2, +fov/2]``; a sector none of whose sub-rays is inside is *unseen*, as a sector that a
scanner of that field of view leaves without readings. Unseen sectors are filled as the robot
fills them: :class:`FovFill` takes the fill from :func:`navcontract.scan.resample_scan` itself
(the runtime's function, with the runtime's fill policy), see there.

**Exact** (``K = 0``): no sampling at all. Every collidable geom is convex (a vertical cylinder
or a box rotated about z) and the scan is planar, so the minimum over the wedge of a sector is
either the geom's closest point to the lidar, when its direction lies inside the sector, or the
first hit of one of the sector's two edge rays (a convex distance function on a convex set takes
its minimum at the unconstrained minimiser or on the boundary of the constraint). ``ray_angles``
are then the distinct sector edges (clipped to the field of view) and each window holds a
sector's two edges; :attr:`SectorRays.seen_lo` / :attr:`SectorRays.seen_width` give the arc a
closest point must fall in. The cost is about one ray per sector plus one closest point per geom.

Both simulators use this module: the Warp lidar (``navsim.lidar``) and the C MuJoCo world of the
ROS 2 sim node (``navsim.sim_world``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from navcontract.scan import BeamLayout, ScanInput, ScanOptions, resample_scan

FOV_TOL = 1e-9
"""Angular tolerance (rad) for a sub-ray on the edge of the field of view (counts as inside)."""


def wrap_angle(a: np.ndarray) -> np.ndarray:
    """Angles wrapped to [-pi, pi)."""
    return (np.asarray(a, dtype=np.float64) + math.pi) % (2.0 * math.pi) - math.pi


@dataclass(frozen=True)
class SectorRays:
    """The distinct sub-rays of one scan and, per sector, which of them it takes the minimum of.

    ``ray_angles`` (R,) body-frame angles of the distinct rays (float64); ``windows`` (B, K) ray
    indices of each sector; ``window_valid`` (B, K) whether that ray is inside the field of view;
    ``seen`` (B,) sectors with at least one such ray. With ``rays_per_beam = 0`` (exact) the rays
    are the sector edges inside the field of view, ``windows`` (B, 2) a sector's lower and upper
    edge, and ``seen_lo`` / ``seen_width`` (B,) the arc of each sector inside the field of view
    (width < 0 for an unseen sector).
    """

    num_beams: int
    rays_per_beam: int = 1
    fov_deg: float = 360.0
    ray_angles: np.ndarray = field(init=False, repr=False, compare=False)
    windows: np.ndarray = field(init=False, repr=False, compare=False)
    window_valid: np.ndarray = field(init=False, repr=False, compare=False)
    seen: np.ndarray = field(init=False, repr=False, compare=False)
    seen_lo: np.ndarray = field(init=False, repr=False, compare=False)
    seen_width: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        layout = BeamLayout(int(self.num_beams))
        b, k = layout.num_beams, int(self.rays_per_beam)
        if k < 0:
            raise ValueError(f"rays_per_beam must be >= 0 (0 = exact), got {self.rays_per_beam}")
        if not 0.0 < float(self.fov_deg) <= 360.0:
            raise ValueError(f"fov_deg must be in (0, 360], got {self.fov_deg}")
        d = layout.angle_increment
        lo = layout.angle_min - 0.5 * d + np.arange(b) * d
        if k == 0:
            self._exact(lo, d)
            return
        if k == 1:
            angles = layout.angles()
            windows = np.arange(b)[:, None]
        else:
            d = layout.angle_increment
            n = b * (k - 1)
            angles = layout.angle_min - 0.5 * d + np.arange(n) * (d / (k - 1))
            windows = (np.arange(b)[:, None] * (k - 1) + np.arange(k)[None, :]) % n
        if float(self.fov_deg) >= 360.0:
            inside = np.ones(angles.shape[0], dtype=bool)
        else:
            inside = np.abs(wrap_angle(angles)) <= math.radians(float(self.fov_deg)) / 2.0 + FOV_TOL
        valid = inside[windows]
        seen = valid.any(axis=1)
        if not seen.any():
            raise ValueError(f"a field of view of {self.fov_deg} degrees holds none of the {b}x{k} sub-rays: widen it")
        width = np.where(seen, d, -1.0)
        self._store(angles, windows, valid, seen, lo, width)

    def _store(
        self,
        angles: np.ndarray,
        windows: np.ndarray,
        valid: np.ndarray,
        seen: np.ndarray,
        seen_lo: np.ndarray,
        seen_width: np.ndarray,
    ) -> None:
        for name, value in (
            ("ray_angles", angles),
            ("windows", windows),
            ("window_valid", valid),
            ("seen", seen),
            ("seen_lo", seen_lo),
            ("seen_width", seen_width),
        ):
            value = np.asarray(value)
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    def _exact(self, lo: np.ndarray, d: float) -> None:
        """Edges and seen arcs of the exact rule: each sector's closed arc ``[lo, lo + d]`` cut
        to the field of view (one arc per sector; a field of view that splits the back sector in
        two is refused)."""
        b = lo.shape[0]
        if float(self.fov_deg) >= 360.0:
            angles = lo.copy()
            windows = np.stack([np.arange(b), (np.arange(b) + 1) % b], axis=1)
            seen = np.ones(b, dtype=bool)
            self._store(angles, windows, np.ones((b, 2), dtype=bool), seen, lo.copy(), np.full(b, d))
            return
        half = math.radians(float(self.fov_deg)) / 2.0
        seen_lo, seen_hi = np.full(b, np.nan), np.full(b, np.nan)
        for j in range(b):
            # The sector in unwrapped angles and the copies of [-half, half] that can meet it.
            pieces = []
            for shift in (-2.0 * math.pi, 0.0, 2.0 * math.pi):
                a0, a1 = max(lo[j], shift - half), min(lo[j] + d, shift + half)
                if a1 >= a0 - FOV_TOL:
                    pieces.append((a0, max(a0, a1)))
            if len(pieces) > 1:
                raise ValueError(
                    f"a field of view of {self.fov_deg} degrees splits sector {j} in two; use 360 degrees "
                    "or a sub-ray count (rays_per_beam >= 1)"
                )
            if pieces:
                seen_lo[j], seen_hi[j] = pieces[0]
        seen = np.isfinite(seen_lo)
        if not seen.any():
            raise ValueError(f"a field of view of {self.fov_deg} degrees holds no sector: widen it")
        edges: list[float] = []
        windows = np.zeros((b, 2), dtype=np.int64)

        def edge(a: float) -> int:
            a = float(wrap_angle(np.array(a)))
            for i, e in enumerate(edges):
                if abs(float(wrap_angle(np.array(a - e)))) < 1e-12:
                    return i
            edges.append(a)
            return len(edges) - 1

        for j in np.flatnonzero(seen):
            windows[j] = (edge(seen_lo[j]), edge(seen_hi[j]))
        valid = np.repeat(seen[:, None], 2, axis=1)
        width = np.where(seen, seen_hi - seen_lo, -1.0)
        self._store(np.array(edges), windows, valid, seen, np.where(seen, seen_lo, 0.0), width)

    @property
    def exact(self) -> bool:
        return int(self.rays_per_beam) == 0

    @property
    def num_rays(self) -> int:
        return int(self.ray_angles.shape[0])

    @property
    def full_view(self) -> bool:
        return bool(self.seen.all())

    def sector_min(self, ray_dist: np.ndarray) -> np.ndarray:
        """(..., R) ranges of the distinct rays -> (..., B) sector minima; unseen sectors NaN."""
        d = np.asarray(ray_dist, dtype=np.float64)[..., self.windows]
        d = np.where(self.window_valid, d, np.inf).min(axis=-1)
        return np.where(self.seen, d, np.nan)

    def sector_of(self, angle: np.ndarray) -> np.ndarray:
        """Body-frame angles -> index of the sector whose seen arc holds them, -1 for none (an
        angle on an edge gets one of the two sectors; the other sees it through its edge ray)."""
        layout = BeamLayout(int(self.num_beams))
        d = layout.angle_increment
        a = np.asarray(angle, dtype=np.float64)
        j = np.floor((a - (layout.angle_min - 0.5 * d)) / d).astype(np.int64) % self.num_beams
        delta = (a - self.seen_lo[j]) % (2.0 * math.pi)
        inside = (self.seen_width[j] >= 0) & (
            (delta <= self.seen_width[j] + FOV_TOL) | (delta >= 2.0 * math.pi - FOV_TOL)
        )
        return np.where(inside, j, -1)

    def add_closest_points(self, sectors: np.ndarray, dist: np.ndarray, angle: np.ndarray) -> np.ndarray:
        """The exact rule's second half: (B,) edge minima and the geoms' closest points (``dist``
        from the lidar, body-frame ``angle``) -> (B,) sector minima."""
        out = np.array(sectors, dtype=np.float64, copy=True)
        j = self.sector_of(angle)
        inside = j >= 0
        np.minimum.at(out, j[inside], np.asarray(dist, dtype=np.float64)[inside])
        return out


@dataclass(frozen=True)
class FovFill:
    """The runtime's fill of unseen sectors, for a fixed set of unseen sectors, in closed form.

    Built by probing :func:`navcontract.scan.resample_scan` (a scan on the training beams whose
    unseen sectors hold NaN, i.e. no valid reading, exactly what a scanner of that field of view
    leaves them) and checked against it on random scans: for every unseen sector the fill is the
    minimum over a fixed set of seen sectors (``"nearest"``: the angularly nearest, ties taking
    the smaller) or a constant (``"max_range"``, ``"constant"``). Applying the map is then one
    gather per step for a whole batch. If the runtime's fill rule ever stops being of that form,
    building this raises instead of training with a different rule.
    """

    seen: np.ndarray
    max_range: float
    fill: str = "nearest"
    fill_value: float | None = None
    unseen: np.ndarray = field(init=False, repr=False, compare=False)
    sources: np.ndarray = field(init=False, repr=False, compare=False)  # (U, S) indices into the scan
    source_valid: np.ndarray = field(init=False, repr=False, compare=False)  # (U, S)
    constant: np.ndarray = field(init=False, repr=False, compare=False)  # (U,) used where no source

    def __post_init__(self) -> None:
        ScanOptions(self.fill, self.fill_value)  # the runtime's own validation of the policy
        seen = np.asarray(self.seen, dtype=bool)
        b = seen.shape[0]
        unseen = np.flatnonzero(~seen)
        have = np.flatnonzero(seen)
        if unseen.shape[0] == 0:  # full view: nothing to fill
            object.__setattr__(self, "unseen", unseen)
            object.__setattr__(self, "sources", np.zeros((0, 1), dtype=np.int64))
            object.__setattr__(self, "source_valid", np.zeros((0, 1), dtype=bool))
            object.__setattr__(self, "constant", np.zeros(0))
            return
        base = np.full(b, np.nan)
        base[have] = 0.75 * self.max_range
        const = self._resample(base)[unseen]
        member = np.zeros((unseen.shape[0], have.shape[0]), dtype=bool)
        for col, i in enumerate(have):
            probe = base.copy()
            probe[i] = 0.25 * self.max_range
            member[:, col] = self._resample(probe)[unseen] != const
        width = max(1, int(member.sum(axis=1).max(initial=0)))
        sources = np.zeros((unseen.shape[0], width), dtype=np.int64)
        valid = np.zeros((unseen.shape[0], width), dtype=bool)
        for row in range(unseen.shape[0]):
            src = have[member[row]]
            sources[row, : src.shape[0]] = src
            valid[row, : src.shape[0]] = True
        for name, value in (("unseen", unseen), ("sources", sources), ("source_valid", valid), ("constant", const)):
            object.__setattr__(self, name, value)
        rng = np.random.default_rng(0)
        for _ in range(8):
            scan = np.where(seen, rng.uniform(0.0, self.max_range, b), np.nan)
            ours = self.apply(np.where(seen, scan, 0.0)[None])[0]
            if not np.array_equal(ours, self._resample(scan)):
                raise RuntimeError(
                    f"navcontract.scan's fill rule {self.fill!r} is not a minimum over fixed sectors or a "
                    "constant any more: update navsim.sectors.FovFill to follow it"
                )

    def _resample(self, ranges: np.ndarray) -> np.ndarray:
        scan = ScanInput.training_beams(ranges, ranges.shape[0])
        return resample_scan(scan, ranges.shape[0], self.max_range, fill=self.fill, fill_value=self.fill_value)

    @property
    def active(self) -> bool:
        return self.unseen.shape[0] > 0

    def apply(self, scan: np.ndarray) -> np.ndarray:
        """(N, B) ranges (seen sectors valid, unseen ignored) -> (N, B) with unseen sectors filled."""
        out = np.array(scan, dtype=np.float64, copy=True)
        if not self.active:
            return out
        vals = np.where(self.source_valid, out[:, self.sources], np.inf).min(axis=-1)
        out[:, self.unseen] = np.where(self.source_valid.any(axis=1), vals, self.constant)
        return out
