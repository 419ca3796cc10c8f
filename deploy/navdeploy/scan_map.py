"""Planning on a map of the robot's own scans, for a goal given without a global path.

The policy has no memory: given only a goal behind a wall of clutter it can drive into a pocket,
turn, and drive back in. A robot with no global planner still sees the world; this module keeps
what it saw and plans around it, as a costmap with an obstacle layer and a global planner do.

:class:`ScanMap` is an occupancy grid in the odometry frame (log-odds per cell). Each scan marks
the cell of every return within ``mark_range`` (``hit``) and clears the cells its beams passed
through before their return, or up to the scanner's range without one (``miss``), each cell at most
once per scan. Dropped beams (NaN) and returns below the scan's ``range_min`` change nothing. A cell
is occupied while its log-odds is above zero. With ``return_filter`` 1 a cell keeps its last
return; with N > 1, the mean of the returns that fell in it during one scan, folded into its earlier
ones as a running mean over at most N scans, and a cell that is cleared starts again. A lidar's
noise moves each scan's returns by centimetres, and one short draw inside a path's clearance would
block the path (``block_margin``). The map is a square window of ``size`` metres; when
the robot comes within ``recentre_margin`` of its edge, the window is moved to centre on the robot
(what falls outside is forgotten).

:class:`ScanPlanner` plans from the robot to the goal on that map with the grid search the world
generator uses (:mod:`navdeploy.grid_search`). A cell's clearance is the distance from its centre
to the return kept in the nearest occupied cell (the distance transform of the occupied cells
finds that cell); unknown cells are free. The world generator certifies its paths on the grid,
which costs up to half an edge's length of clearance; the robot's clearance is an estimate from
its scans anyway, so its planner judges clearance at the cell centres alone (``certify=False``).

**One clearance with the guard.** The clearance a path must keep is the one the collision guard the
node applies lets the robot drive (``clearance``, :meth:`navcontract.guard.GuardRule.passing_clearance`:
the guard's ``radius + margin`` plus the lidar sector's spread at that very distance, ``c = (radius_g
+ margin_g) / (1 - sin(delta))`` with ``delta`` half the contract's beam increment; a return passed
closer than ``c`` stops the robot), plus half a cell for judging it at cell centres: the map
certifies ``C = c + resolution / 2``. The path keeps ``C + margin`` from mapped returns where it can,
and only where no such path exists one that keeps ``C`` (never less: a gap the guard refuses is no
path). Without a guard (a bundle without a guard section, the guard turned off) ``C`` is the robot's
``radius``: the path keeps ``radius + margin``, and only where no such path exists one that keeps
``radius - squeeze`` (a gap the robot fits only just is the last resort, not a short cut). The
line-of-sight check below keeps ``c`` (without a guard, the radius). Edges are weighted to keep
``keep`` metres more where there is room. Planning is limited
to the box around robot and goal plus ``box_margin``; where that box holds no path (the way round
lies outside it), boxes twice as wide are tried, up to ``box_margin_max`` beyond both. The path is planned again every
``replan_period`` seconds, and at once when a newly mapped return blocks the path ahead (beyond
``clear_ahead``, and ``block_margin`` inside the clearance the path was planned with, so that
the lidar's noise on a return does not flip the route every tick), and at once when the command
gate reports that the guard keeps refusing the path (:meth:`ScanPlanner.block`: the return the guard
stopped the robot before is raised to a disc of ``block_raise`` metres, a disc that one more refusal
within it widens by ``block_raise`` again, for as long as the goal stands; the path in use then
counts as blocked). The mapped return that blocked the path in use is kept for as long as the goal
stands (:attr:`ScanPlanner.kept`), as a return even where later scans clear its cell: seen again from
further away a thin return can be cleared by beams passing beside it, and the map would send the
robot back to the gap it found closed, again and again. A new plan replaces a usable
path only when it is ``switch_gain`` shorter than what is left of it, or when the path in use is a
squeezed one and the new plan keeps the full clearance: without a guard whatever its length (a
squeezed path kept for its length led the robot into passages narrower than itself, where it stood
wedged), with one (the squeezed path still keeps the guard's clearance) only when it is no longer than
``switch_gain`` beyond what is left of the squeezed one (a gap mapped at about the squeezed clearance
flipped the robot between it and a long way round). The policy's sub-goal then
comes from the path as for a global path (:func:`navcontract.subgoal.follow_path`); with
``line_of_sight`` a sub-goal round a corner that the straight line from the robot would cut into
a mapped return (keeping the robot's radius) is pulled back along the path to the furthest point
the robot reaches straight.

**Backing out.** The planner keeps the robot's own trail, its last ``retreat`` metres (points
:data:`TRAIL_STEP` apart, kept across goals). Where no path leaves the robot's position (it drove
into a pocket between returns narrower than the clearance a path keeps, where the map's returns
came into view only once it was inside), the same search tries the trail's points going back,
:data:`RETREAT_STEP` apart: the path is then the trail back to the nearest point with a path, and
that path on (:attr:`ScanPlanner.retreating`). The robot fitted there a moment ago, so the trail's
part of the path (and the step from its end to the first free cell) is not checked against the
clearance (the blocked check starts beyond it). The point the robot backed out from is a dead end
for as long as the goal stands (:attr:`ScanPlanner.dead_ends`): every later plan keeps the
clearance from it as from a return. Seen again from further away, the thin returns that closed the
pocket can be cleared by beams passing between them, and the map would route the robot back in, to
find it closed once more (a robot going in and out of one pocket until its time ran out). When
no path exists from the robot or its trail (the goal in a mapped obstacle, the robot boxed in),
:meth:`ScanPlanner.subgoal` returns None and the caller drives to the goal itself.

**Forgetting.** The raised returns, the dead ends and the kept returns are memories of the goal:
each closes a gap the robot found closed. Where together they leave no path at all, a gap was
closed that is open (a return raised too wide, a pocket that was a way through seen from inside),
and a robot without a path drives at the goal straight into what stands between. So when a plan
finds no path while memories stand, they are dropped (:meth:`ScanPlanner.forget`, counted in
:attr:`ScanPlanner.forgotten`) and the map plans again on what it shows now, as a navigation
stack's recovery clears its costmap.

A tick is two halves: :meth:`ScanPlanner.update_path` (the map's: plan again when due or blocked)
and :meth:`ScanPlanner.follow` (the tick's: the lookahead rule and the line-of-sight check).
:meth:`ScanPlanner.step` runs both inline (the evaluation, the bag tools, the node with
``scan_map_worker`` false); :mod:`navdeploy.scan_worker` runs the map's update and the first half
on a worker process and leaves the second to the tick.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from navcontract.subgoal import LookaheadRule, follow_path, path_segments
from navdeploy.grid_search import (
    GridFrame,
    cell_points,
    chain_to,
    clearance_floor,
    edge_graph,
    polyline_length,
    pull,
    sample_count,
    search_from,
    sees,
)

TRAIL_STEP = 0.1
"""[m] The robot's trail keeps a point each time it moved this far from the last one."""

RETREAT_STEP = 0.25
"""[m] Where no path leaves the robot's position, the trail's points this far apart are tried going back."""

LOGODDS_MIN, LOGODDS_MAX = -2.0, 3.5
"""Log-odds clamps: a cell seen occupied many times is freed after a few clear views again."""


@dataclass(frozen=True)
class ScanMapCfg:
    """Settings of the robot's own map and its planner (the node's ``scan_map`` turns it on)."""

    resolution: float = 0.05  # [m] cell side
    size: float = 30.0  # [m] side of the square window kept
    mark_range: float = 4.0  # [m] returns further away are not marked (angular error grows with range)
    hit: float = 1.2  # log-odds added to a cell with a return
    miss: float = 0.4  # log-odds taken from a cell a beam passed through
    margin: float = 0.015  # [m] the path keeps radius + margin from mapped returns (judged at cell centres)
    squeeze: float = 0.01  # [m] where no such path exists, one keeping radius - squeeze is taken (-margin: none)
    keep: float = 0.25  # [m] and this much more where there is room
    replan_period: float = 1.0  # [s] between plans (sooner when the path ahead is blocked)
    box_margin: float = 2.0  # [m] planning box beyond robot and goal
    box_margin_max: float = 8.0  # [m] no path in the box: again in boxes twice as wide, up to this margin
    recentre_margin: float = 7.0  # [m] the window moves when the robot is this close to its edge
    start_search: float = 0.4  # [m] a robot inside the clearance starts from the nearest free cell this close
    switch_gain: float = 0.5  # [m] a new plan replaces the current path only when this much shorter
    clear_ahead: float = 0.3  # [m] the blocked check starts this far ahead of the robot's progress
    block_margin: float = 0.02  # [m] and counts a return only this much inside the clearance the path was planned with
    line_of_sight: bool = True  # a sub-goal round a corner is pulled back to where the robot reaches it straight
    block_raise: float = 0.1  # [m] a return the guard keeps refusing the path by is raised by this (each time)
    retreat: float = (
        3.0  # [m] of the robot's own trail kept: no path from where it stands -> back out along it (0: off)
    )
    return_filter: int = 1  # a cell's return: the running mean of its scans' returns over at most this many scans

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type in (bool, "bool"):
                if not isinstance(v, bool):
                    raise ValueError(f"scan map: {f.name} must be true or false, got {v!r}")
            elif isinstance(v, bool) or not (isinstance(v, int | float) and math.isfinite(v)):
                raise ValueError(f"scan map: {f.name} must be a finite number, got {v!r}")
        positive = ("resolution", "size", "mark_range", "hit", "miss", "keep", "box_margin", "recentre_margin")
        if self.box_margin_max < self.box_margin:
            raise ValueError(
                f"scan map: box_margin_max {self.box_margin_max} m must be >= box_margin ({self.box_margin} m)"
            )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"scan map: {name} must be > 0, got {getattr(self, name)}")
        non_negative = (
            "replan_period",
            "start_search",
            "switch_gain",
            "clear_ahead",
            "block_margin",
            "block_raise",
            "retreat",
        )
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ValueError(f"scan map: {name} must be >= 0, got {getattr(self, name)}")
        if not isinstance(self.return_filter, int) or self.return_filter < 1:
            raise ValueError(
                f"scan map: return_filter must be a whole number of scans >= 1, got {self.return_filter!r}"
            )
        if self.squeeze < -self.margin:  # squeeze = -margin: no last resort
            raise ValueError(f"scan map: squeeze {self.squeeze} m must be >= -margin ({-self.margin} m)")
        if self.size < 4 * self.resolution or self.size / self.resolution > 4000:
            raise ValueError(
                f"scan map: size {self.size} m at resolution {self.resolution} m: between 4 and 4000 cells a side"
            )
        if 2 * self.recentre_margin >= self.size:
            raise ValueError(f"scan map: recentre_margin {self.recentre_margin} m must be under half the size")


CELL_REACH = 1.5
"""[cells] How far beyond its clearance a change of the map may lie from the path ahead and still
matter to the blocked check (:meth:`ScanPlanner._blocked`): a cell's diagonal, rounded up."""

CHANGES_MAX = 100_000
"""[points] :meth:`ScanMap.take_changes` keeps at most this many points between two calls."""


class ScanMap:
    """Occupancy log-odds on a square window in the odometry frame (module doc)."""

    def __init__(self, cfg: ScanMapCfg) -> None:
        self.cfg = cfg
        self.n = int(round(cfg.size / cfg.resolution))
        self.h = cfg.size / self.n
        self.logodds = np.zeros((self.n, self.n), dtype=np.float32)
        self.hit_xy = np.zeros((self.n, self.n, 2), dtype=np.float32)  # the cell's return (odometry frame; module doc)
        self.hit_scans = np.zeros((self.n, self.n), dtype=np.int32)  # scans folded into it (at most return_filter)
        self._seen = np.zeros(self.n * self.n, dtype=bool)  # scratch of update(): all False between scans
        self.x0: float | None = None  # window corner (odometry frame); None before the first scan
        self.y0 = 0.0
        self._changes: list[np.ndarray] | None = None  # see take_changes(); None: not known

    def reset(self) -> None:
        self.logodds[:] = 0.0
        self.hit_scans[:] = 0
        self.x0 = None
        self._changes = None

    def take_changes(self) -> np.ndarray | None:
        """The points (K, 2) where the map changed since the last call, and forget them: the return of
        each cell a scan marked that is occupied after it (newly occupied, or its return seen again,
        which the lidar's noise moves), the centre of each cell a scan freed. None where that is not
        known: at the first call, after the window moved or the map was reset, or beyond
        :data:`CHANGES_MAX` points."""
        changes, self._changes = self._changes, []
        if changes is None:
            return None
        return np.concatenate(changes) if changes else np.zeros((0, 2))

    @property
    def frame(self) -> GridFrame:
        if self.x0 is None:
            raise RuntimeError("the scan map has no scan yet")
        return GridFrame(self.x0, self.y0, self.h, self.h, (self.n, self.n))

    def occupied(self, rows: slice = slice(None), cols: slice = slice(None)) -> np.ndarray:
        """The occupied cells of the window, or of its block ``rows`` x ``cols``."""
        return self.logodds[rows, cols] > 0.0

    def _place(self, x: float, y: float) -> None:
        """Centre the window on (x, y) (whole cells), keeping what overlaps."""
        half = self.n * self.h / 2
        nx0 = math.floor((x - half) / self.h) * self.h
        ny0 = math.floor((y - half) / self.h) * self.h
        if self.x0 is not None:
            dx = int(round((nx0 - self.x0) / self.h))
            dy = int(round((ny0 - self.y0) / self.h))
            n = self.n
            self._changes = None  # cells moved and fell off the window
            for name in ("logodds", "hit_xy", "hit_scans"):
                old = getattr(self, name)
                moved = np.zeros_like(old)
                if abs(dx) < n and abs(dy) < n:
                    src = old[max(dy, 0) : n + min(dy, 0), max(dx, 0) : n + min(dx, 0)]
                    moved[max(-dy, 0) : n + min(-dy, 0), max(-dx, 0) : n + min(-dx, 0)] = src
                setattr(self, name, moved)
        self.x0, self.y0 = nx0, ny0

    def update(
        self, ranges: np.ndarray, angles: np.ndarray, pose: np.ndarray, range_min: float, range_max: float
    ) -> None:
        """Fold one scan: ``ranges`` (B,) at body-frame ``angles`` (B,), taken at ``pose`` (x, y, yaw).

        Vectorised over beams and samples, and incremental: only the cells the scan touches are
        read or written. A beam's samples lie every half cell from the robot up to one cell short of
        its return (or of the scanner's range); the cells holding a sample are cleared, the cells
        holding a return marked, each at most once per scan, a cell with a return never cleared."""
        x, y, yaw = (float(v) for v in pose[:3])
        if self.x0 is None:
            self._place(x, y)
        else:
            lo = self.cfg.recentre_margin
            far = self.n * self.h - lo
            if not (lo <= x - self.x0 <= far and lo <= y - self.y0 <= far):
                self._place(x, y)
        r = np.asarray(ranges, dtype=np.float64)
        a = np.asarray(angles, dtype=np.float64) + yaw
        keep = np.isfinite(r) & (r >= range_min)
        r, a = r[keep], a[keep]
        top = float(range_max) if math.isfinite(range_max) else self.cfg.mark_range
        hit = r < top
        cos, sin = np.cos(a), np.sin(a)
        miss = self._flat(*self._passed(x, y, cos, sin, np.minimum(r, top) - self.h, top))
        hx = x + r[hit] * np.cos(a[hit])
        hy = y + r[hit] * np.sin(a[hit])
        near = r[hit] <= self.cfg.mark_range
        hx, hy = hx[near], hy[near]
        hits, inside = self._flat(hx, hy, with_mask=True)
        self._fold_returns(hits, np.stack([hx[inside], hy[inside]], axis=1))
        # Each cell at most once: a scan's cells as a mask over the window (only its cells are set
        # and reset), a cell with a return never cleared.
        seen = self._seen
        seen[miss] = True
        seen[hits] = False
        miss_cells = np.flatnonzero(seen)
        seen[miss_cells] = False
        seen[hits] = True
        hit_cells = np.flatnonzero(seen)
        seen[hit_cells] = False
        flat = self.logodds.reshape(-1)
        was = flat[miss_cells] > 0.0
        flat[miss_cells] -= self.cfg.miss
        flat[hit_cells] += self.cfg.hit
        touched = np.concatenate([miss_cells, hit_cells])
        flat[touched] = np.clip(flat[touched], LOGODDS_MIN, LOGODDS_MAX)
        self.hit_scans.reshape(-1)[miss_cells[flat[miss_cells] <= 0.0]] = 0  # cleared: its next return starts anew
        if self._changes is not None:
            self._note_changes(miss_cells[was & (flat[miss_cells] <= 0.0)], hit_cells[flat[hit_cells] > 0.0])

    def _fold_returns(self, cells: np.ndarray, points: np.ndarray) -> None:
        """Fold one scan's returns ``points`` (K, 2), in flat ``cells`` (K,), into the cells' returns."""
        xy = self.hit_xy.reshape(-1, 2)
        if self.cfg.return_filter == 1:
            xy[cells] = points  # of several returns in one cell, the last
            return
        if not len(cells):
            return
        uniq, inverse = np.unique(cells, return_inverse=True)
        sums = np.zeros((len(uniq), 2))
        np.add.at(sums, inverse, points)
        mean = sums / np.bincount(inverse, minlength=len(uniq))[:, None]
        scans = self.hit_scans.reshape(-1)
        before = np.minimum(scans[uniq], self.cfg.return_filter - 1)
        weight = 1.0 / (before + 1.0)
        xy[uniq] = xy[uniq] + weight[:, None] * (mean - xy[uniq])
        scans[uniq] = before + 1

    def _note_changes(self, freed: np.ndarray, marked: np.ndarray) -> None:
        """Keep the points of :meth:`take_changes` of one scan: ``freed`` and ``marked`` flat cells."""
        changes = self._changes
        if changes is None:
            return
        if len(freed):
            frame = self.frame
            iy, ix = np.divmod(freed, self.n)
            changes.append(np.stack([frame.x0 + (ix + 0.5) * self.h, frame.y0 + (iy + 0.5) * self.h], axis=1))
        if len(marked):
            changes.append(self.hit_xy.reshape(-1, 2)[marked].astype(np.float64))
        if sum(len(c) for c in changes) > CHANGES_MAX:
            self._changes = None

    def _passed(
        self, x: float, y: float, cos: np.ndarray, sin: np.ndarray, end: np.ndarray, top: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """The samples of every beam, every half cell ``t = k * h / 2`` (``k < ceil(top / (h / 2))``)
        while ``t < end`` of the beam, as points (N,), (N,): only those samples are generated."""
        step = self.h / 2
        m = int(math.ceil(top / step))
        # An upper bound of each beam's sample count; the exact test t < end below decides.
        count = np.clip(np.ceil(end / step) + 1, 0, m).astype(np.int64)
        total = int(count.sum())
        if total == 0:
            return np.zeros(0), np.zeros(0)
        beam = np.repeat(np.arange(len(count)), count)
        k = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        t = k * step
        along = t < end[beam]
        beam, t = beam[along], t[along]
        return x + t * cos[beam], y + t * sin[beam]

    def _flat(self, px: np.ndarray, py: np.ndarray, with_mask: bool = False) -> Any:
        """Flat indices of the cells holding the points inside the window (and which points those are)."""
        ix = np.floor((px - self.x0) / self.h).astype(np.int64)
        iy = np.floor((py - self.y0) / self.h).astype(np.int64)
        inside = (ix >= 0) & (ix < self.n) & (iy >= 0) & (iy < self.n)
        flat = iy[inside] * self.n + ix[inside]
        return (flat, inside) if with_mask else flat


def arc_lengths(path: np.ndarray) -> np.ndarray:
    """Arc length at each waypoint of ``path`` (P, 2), starting at 0."""
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(path, axis=0), axis=1))])


def segments_near(points: np.ndarray, line: np.ndarray, reach: float) -> np.ndarray:
    """(P - 1,) for each segment of the polyline ``line`` (P, 2): does any of ``points`` (K, 2) lie
    within ``reach`` of it?"""
    a, b = line[:-1], line[1:]
    if not len(points) or not len(a):
        return np.zeros(len(a), dtype=bool)
    d = b - a
    length2 = np.maximum(np.einsum("ij,ij->i", d, d), 1e-18)
    rel = points[:, None, :] - a[None, :, :]  # (K, S, 2)
    t = np.clip(np.einsum("ksj,sj->ks", rel, d) / length2, 0.0, 1.0)
    off = rel - t[..., None] * d[None, :, :]
    return (np.einsum("ksj,ksj->ks", off, off) < reach * reach).any(axis=0)


def points_at(path: np.ndarray, arc: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The points (S, 2) of ``path`` at arc lengths ``s`` (S,) within [0, arc[-1]]."""
    k = np.minimum(np.maximum(np.searchsorted(arc, s, side="right"), 1), len(path) - 1)
    t = ((s - arc[k - 1]) / np.maximum(arc[k] - arc[k - 1], 1e-9))[:, None]
    return path[k - 1] + t * (path[k] - path[k - 1])


@dataclass(frozen=True)
class SightRule:
    """The line-of-sight check of a sub-goal: the robot's ``radius``, the ``step`` between the path's
    points tried, the ``margin`` of the clearance box round them."""

    radius: float
    step: float
    margin: float


Clearance = Callable[[np.ndarray, float], "tuple[GridFrame, np.ndarray] | None"]
"""The clearance grid on the box round some points plus a margin (None: not known there)."""


class PathShape:
    """What following one path tick after tick needs of it, computed once per path: the lookahead
    rule's segments (float32, as :func:`follow_on` hands the path to it) and the arc length at each
    waypoint. :meth:`of` keeps one and makes a new one only when the path is another array."""

    def __init__(self, path: np.ndarray) -> None:
        self.path = path
        self.batch = path[None].astype(np.float32)
        self.count = np.array([len(path)])
        self.segments = path_segments(self.batch, self.count)
        self.arc = arc_lengths(path)

    @staticmethod
    def of(shape: PathShape | None, path: np.ndarray) -> PathShape:
        """``shape`` when it is ``path``'s (the same array), else a new one."""
        return shape if shape is not None and shape.path is path else PathShape(path)


def sensor_rays(scan: Any, pose: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the ``n`` readings of ``scan`` (a :class:`navcontract.scan.ScanInput`) taken at the body's
    ``pose`` start from, as a pose ``(x, y, yaw)``, and their angles in that pose's frame: the body's
    pose and the scan's angles, or with a mount (:class:`navcontract.scan.LidarMount`) the lidar's
    pose and its angles (clockwise when upside down)."""
    angles = float(scan.angle_min) + float(scan.angle_increment) * np.arange(n)
    mount = getattr(scan, "mount", None)
    if mount is None:
        return pose, angles
    return mount.sensor_pose(pose), mount.sign * angles


def follow_on(
    path: np.ndarray, progress: float, rule: LookaheadRule, p: np.ndarray, shape: PathShape | None = None
) -> tuple[np.ndarray, float, float]:
    """The lookahead rule (:func:`navcontract.subgoal.follow_path`) on one path from ``p``: the
    sub-goal (2,), the new progress and the path still to go. ``shape``: ``path``'s, when kept."""
    shape = PathShape.of(shape, path)
    sub, new, remaining = follow_path(
        shape.batch,
        shape.count,
        p[None].astype(np.float32),
        np.array([progress], dtype=np.float32),
        rule,
        segments=shape.segments,
    )
    return np.asarray(sub[0], dtype=np.float64), float(new[0]), float(remaining[0])


def visible(
    path: np.ndarray,
    progress: float,
    lookahead: float,
    p: np.ndarray,
    sub: np.ndarray,
    rule: SightRule,
    clearance: Clearance,
    arc: np.ndarray | None = None,
) -> tuple[float, float]:
    """The sub-goal ``sub``, or where it cuts a corner into a mapped surface, the furthest point of the
    path before it that the robot at ``p`` reaches in a straight line keeping its radius. Where
    ``clearance`` knows nothing of the box, the sub-goal stands. ``arc``: :func:`arc_lengths` of
    ``path``, when kept."""
    arc = arc_lengths(path) if arc is None else arc
    s_end = min(progress + lookahead, float(arc[-1]))
    pts = points_at(path, arc, np.arange(s_end, progress - 1e-9, -rule.step))  # sub-goal first
    if not len(pts):  # progress at the path's end (within float32 rounding): the sub-goal is its end
        return float(sub[0]), float(sub[1])
    grid = clearance(np.vstack([p[None], pts]), rule.margin)
    if grid is None:
        return float(sub[0]), float(sub[1])
    frame, clear = grid
    # The sub-goal first, sampled as among all the points: where the robot sees it, nothing else is asked.
    d = pts - p
    count = sample_count(np.sqrt(np.add.reduce(d * d, axis=1)), frame)
    if sees(p, pts[:1], clear, frame, rule.radius, certify=False, samples=count)[0]:
        return float(sub[0]), float(sub[1])
    ok = sees(p, pts[1:], clear, frame, rule.radius, certify=False, samples=count)
    if not ok.any():
        return float(sub[0]), float(sub[1])
    q = pts[1 + int(np.argmax(ok))]
    return float(q[0]), float(q[1])


def cell_side(cfg: ScanMapCfg) -> float:
    """[m] The map's cell side: ``size`` over a whole number of cells, ``resolution`` at the defaults."""
    return cfg.size / int(round(cfg.size / cfg.resolution))


def certified_clearance(cfg: ScanMapCfg, radius: float, clearance: float | None) -> float:
    """[m] ``C`` of the module doc: the guard's passing ``clearance`` plus half a cell, or without a
    guard (``clearance`` None) the robot's ``radius``."""
    if clearance is None:
        return float(radius)
    return float(clearance) + cell_side(cfg) / 2


def plan_radii(cfg: ScanMapCfg, radius: float, clearance: float | None) -> tuple[float, float]:
    """The clearance a path keeps from mapped returns at cell centres (module doc): where it can, and
    at the least. Without a guard ``(radius + margin, radius - squeeze)``; with the guard's passing
    ``clearance`` ``(C + margin, C - squeeze)``, the second never below ``C``."""
    base = certified_clearance(cfg, radius, clearance)
    if clearance is None:
        return base + cfg.margin, max(base - cfg.squeeze, 0.0)
    return base + cfg.margin, max(base - cfg.squeeze, base)


def clearance_text(cfg: ScanMapCfg, radius: float, clearance: float | None, guard: Any = None, beams: int = 0) -> str:
    """One line for the log: the clearance rule in use, with its numbers."""
    full, least = plan_radii(cfg, radius, clearance)
    if clearance is None:
        return (
            f"the path keeps {full:.3f} m from mapped returns (radius {radius:g} m + {cfg.margin:g} m; no guard), "
            f"{least:.3f} m as the last resort"
        )
    spread = ""
    if guard is not None and beams:
        spread = (
            f" = (guard radius {guard.radius:g} + margin {guard.margin:g}) / (1 - sin(180/{beams} deg)): "
            f"+{clearance - guard.radius - guard.margin:.4f} m of sector spread"
        )
    return (
        f"the path keeps {full:.3f} m from mapped returns at cell centres ({least:.3f} m as the last resort): "
        f"the guard's passing clearance {clearance:.4f} m{spread}, + half a cell {cell_side(cfg) / 2:g} m"
        f"{f', + {cfg.margin:g} m where there is room' if full > least else ''}"
    )


def checked_geometry(radius: float, clearance: float | None) -> tuple[float, float | None]:
    """The robot's radius and the guard's passing clearance (None: no guard) as floats; ValueError
    unless each is finite and > 0."""
    if not (math.isfinite(radius) and radius > 0):
        raise ValueError(f"scan map: robot radius must be > 0, got {radius}")
    if clearance is not None and not (math.isfinite(clearance) and clearance > 0):
        raise ValueError(f"scan map: the guard's passing clearance must be > 0, got {clearance}")
    return float(radius), None if clearance is None else float(clearance)


class ScanPlanner:
    """The robot's map, its path to the goal and the sub-goal along it (module doc). ``clearance``: the
    passing clearance of the guard the node applies (None: no guard; the robot's ``radius`` rules)."""

    def __init__(
        self, cfg: ScanMapCfg, radius: float, rule: LookaheadRule | None = None, clearance: float | None = None
    ) -> None:
        self.cfg = cfg
        self.radius, self.clearance = checked_geometry(radius, clearance)
        self.base = certified_clearance(cfg, self.radius, self.clearance)  # C of the module doc
        self.rule = rule if rule is not None else LookaheadRule()
        self.map = ScanMap(cfg)
        self.path_id = 0  # changes whenever the path in use does (the worker's plans name their path by it)
        self.reset()

    def reset(self) -> None:
        """Forget the map, the robot's trail and the path (a new goal keeps the map and the trail: see
        :meth:`new_goal`)."""
        self.map.reset()
        self.trail: list[np.ndarray] = []  # the robot's own positions, oldest first (module doc: backing out)
        self.new_goal()

    def new_goal(self) -> None:
        """Drop the path and the returns raised for the guard (:meth:`block`); the map stays (what was
        seen is still there)."""
        self.path: np.ndarray | None = None
        self._shape: PathShape | None = None  # the path's, kept while it is followed
        self.raised: list[list[float]] = []  # [x, y, radius] of each return raised for the guard (odometry frame)
        self.dead_ends: list[tuple[float, float]] = []  # where no path left the robot (module doc: backing out)
        self.kept: list[tuple[float, float]] = []  # returns that blocked the path in use (module doc: blocked)
        self._forced = False  # the guard refused the path in use: the next update plans again
        self._open_key: tuple | None = None  # the path in use as last found open (_blocked), and when
        self._open_at: float | None = None
        self.path_id += 1
        self.progress = 0.0  # [m] arc length of the path reached
        self.remaining = 0.0  # [m] path still to go
        self.planned_at: float | None = None
        self.plans = 0
        self.forgotten = 0  # how often the memories were dropped for leaving no path (forget)
        self.failed = False  # the last plan found no path
        self.path_radius = self.plan_radii[0]  # the clearance the path in use was planned with
        self.planned_radius = self.plan_radii[0]  # the clearance of the last plan found
        self.retreating = False  # the path in use begins with the robot's trail back (module doc)
        self.path_trail = 0.0  # [m] its length: the blocked check starts beyond it
        self._planned_trail = 0.0  # the same of the last plan found
        self.switch_reason = ""  # why the path in use last changed: no path in use, asked to plan again (the guard refused the path, a recovery), blocked on the map, safer, shorter, further, lost

    @property
    def plan_radii(self) -> tuple[float, float]:
        """The clearance a path keeps from mapped returns: what it keeps where it can, and at the least."""
        return plan_radii(self.cfg, self.radius, self.clearance)

    def observe(self, scan: Any, pose: np.ndarray) -> None:
        """Fold a :class:`navcontract.scan.ScanInput` taken at ``pose`` (odometry frame), each reading
        cast from where its lidar sits (:func:`sensor_rays`)."""
        ranges = np.asarray(scan.ranges, dtype=np.float64).reshape(-1)
        origin, angles = sensor_rays(scan, np.asarray(pose, dtype=np.float64), len(ranges))
        self.map.update(ranges, angles, origin, float(scan.range_min), float(scan.range_max))

    def step(
        self, scan: Any | None, pose: np.ndarray, goal: tuple[float, float], now: float
    ) -> tuple[float, float] | None:
        """One control tick, as the node and the evaluation run it: fold ``scan`` (None: no new scan
        since the last tick) and return the sub-goal (None: drive to the goal itself)."""
        if scan is not None:
            self.observe(scan, pose)
        return self.subgoal(pose, goal, now)

    def subgoal(self, pose: np.ndarray, goal: tuple[float, float], now: float) -> tuple[float, float] | None:
        """This tick's sub-goal toward ``goal``, or None when the map gives no path (drive to the goal)."""
        if self.map.x0 is None:
            return None
        p = np.asarray(pose[:2], dtype=np.float64)
        self.update_path(p, np.asarray(goal, dtype=np.float64), now)
        return self.follow(p)

    def update_path(self, p: np.ndarray, goal: np.ndarray, now: float) -> None:
        """The map's half of a tick: plan again when ``replan_period`` has passed since the last plan,
        or at once when the path ahead is blocked or the guard refused it (from the robot's position ``p``)."""
        self._record(p)
        forced = self._forced
        blocked = self.path is not None and (forced or self._blocked(now))
        self._forced = False
        due = self.planned_at is None or not (0.0 <= now - self.planned_at < self.cfg.replan_period)
        if due or blocked:
            self._replan(p, goal, blocked, now, "asked to plan again" if forced else "blocked on the map")

    def follow(self, p: np.ndarray) -> tuple[float, float] | None:
        """The tick's half: advance along the path from ``p`` and return the sub-goal (None: no path)."""
        if self.path is None:
            return None
        self._shape = shape = PathShape.of(self._shape, self.path)
        sub, self.progress, self.remaining = follow_on(self.path, self.progress, self.rule, p, shape)
        if self.cfg.line_of_sight:
            lookahead = self.rule.lookahead
            return visible(self.path, self.progress, lookahead, p, sub, self.sight_rule, self._sight, shape.arc)
        return float(sub[0]), float(sub[1])

    @property
    def sight_rule(self) -> SightRule:
        """What the line-of-sight check keeps (:func:`visible`): the guard's passing clearance (without
        a guard the radius)."""
        keeps = self.radius if self.clearance is None else self.clearance
        return SightRule(keeps, self.map.h, self.base + self.cfg.keep + 2 * self.map.h)

    def block(self, point: np.ndarray) -> None:
        """The guard keeps refusing the path by the return at ``point`` (odometry frame): raise that return
        to a disc of ``block_raise`` (a disc already within ``block_raise`` of it grows by
        ``block_raise``), and count the path in use as blocked at the next update (module doc)."""
        x, y = float(point[0]), float(point[1])
        step = self.cfg.block_raise
        for disc in self.raised:
            if math.hypot(x - disc[0], y - disc[1]) <= disc[2] + step:
                disc[2] += step
                break
        else:
            self.raised.append([x, y, step])
        self.replan()

    def forget(self) -> None:
        """Drop the goal's memories: the raised returns, the dead ends and the kept returns (module doc,
        *Forgetting*); the map and the path in use stay."""
        self.raised, self.dead_ends, self.kept = [], [], []
        self.forgotten += 1
        self._open_key = None

    def replan(self) -> None:
        """Plan again at the next update; the new plan replaces the path in use whatever its length
        (the path counts as blocked; none found: no path)."""
        self._forced = True
        self.planned_at = None

    def _sight(self, points: np.ndarray, margin: float) -> tuple[GridFrame, np.ndarray]:
        """The clearance the line-of-sight check reads, on the box round ``points`` plus one cell: its
        lines lie between them, and the grid's values do not depend on the box (``margin`` is for a grid
        kept while the robot moves on, :meth:`sight_clearance`)."""
        return self._clearance(points, margin=self.map.h)

    def _record(self, p: np.ndarray) -> None:
        """Add ``p`` to the robot's trail (once it moved :data:`TRAIL_STEP`) and drop what lies more
        than ``retreat`` metres back along it."""
        if self.cfg.retreat <= 0:
            return
        trail = self.trail
        if trail and float(np.hypot(*(p - trail[-1]))) < TRAIL_STEP:
            return
        trail.append(np.array(p[:2], dtype=np.float64))
        length = 0.0
        for k in range(len(trail) - 1, 0, -1):
            length += float(np.hypot(*(trail[k] - trail[k - 1])))
            if length > self.cfg.retreat:
                del trail[: k - 1]
                break

    def _way_back(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The line from ``p`` back through the trail, newest point first (P, 2), and its arc lengths."""
        back = np.vstack([p[None], np.asarray(self.trail[::-1]).reshape(-1, 2)])
        return back, arc_lengths(back)

    def _retreat_starts(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The points tried where no path leaves ``p``: along the line from ``p`` back through the trail,
        every :data:`RETREAT_STEP` (K, 2), and their arc lengths back from ``p`` (K,)."""
        back, arc = self._way_back(p)
        s = np.arange(RETREAT_STEP, float(arc[-1]) + 1e-9, RETREAT_STEP)
        if not len(s):
            return np.zeros((0, 2)), np.zeros(0)
        return points_at(back, arc, s), s

    def _trail_back(self, p: np.ndarray, s: float) -> np.ndarray:
        """The path from ``p`` back along the trail to arc length ``s`` (its last point)."""
        back, arc = self._way_back(p)
        inner = back[(arc > 1e-9) & (arc < s - 1e-9)]
        return np.vstack([p[None], inner, points_at(back, arc, np.array([s]))])

    def sight_clearance(self, p: np.ndarray, slack: float) -> tuple[GridFrame, np.ndarray] | None:
        """The clearance the line-of-sight check may ask for while the robot moves up to ``slack``
        from ``p`` along the current path: the box round the robot and the path from ``slack`` before
        its progress to ``slack`` beyond its lookahead (None: no path)."""
        path = self.path
        if path is None or self.map.x0 is None:
            return None
        arc = arc_lengths(path)
        s0 = max(self.progress - slack, 0.0)
        s1 = min(self.progress + self.rule.lookahead + slack, float(arc[-1]))
        ahead = points_at(path, arc, np.append(np.arange(s0, s1, self.map.h), s1))
        box = np.vstack([p[None] - slack, p[None] + slack, ahead])
        return self._clearance(box, margin=self.sight_rule.margin)

    def _replan(self, p: np.ndarray, goal: np.ndarray, blocked: bool, now: float, cause: str = "") -> None:
        """Plan again (``cause``: what blocked the path in use, for :attr:`switch_reason`); a new path
        replaces a usable current one only when it leaves ``switch_gain``
        less to the goal than what is left of it (its length plus the straight line from its end to
        the goal, which lies beyond the window when the goal is far; two routes of about the same
        length do not alternate), or when it ends ``switch_gain`` closer to a far goal (the window
        moved on), or wider: one keeping the full clearance replaces a squeezed one whatever its
        length."""
        new = self.plan(p, goal)
        if new is None and (self.raised or self.dead_ends or self.kept):
            self.forget()  # the memories leave no path: plan on what the map shows now (module doc)
            new = self.plan(p, goal)
        self.planned_at, self.plans = now, self.plans + 1
        self.failed = new is None
        if new is None:
            if blocked and self.path is not None:
                self.path, self.path_id = None, self.path_id + 1
                self.retreating, self.path_trail = False, 0.0
                self.switch_reason = "lost"
            return
        # A path with the full clearance replaces a squeezed one: whatever its length where the squeezed
        # one keeps less than the robot's radius (no guard), else only where it is no longer than what
        # is left of the squeezed one (a gap mapped at about the squeezed clearance, now open, now
        # closed, would flip the robot between it and a long way round once a second).
        safer = self.planned_radius > self.path_radius and (
            self.path_radius < self.radius or polyline_length(new) <= self.remaining + self.cfg.switch_gain
        )
        # What is left to the goal itself: a path ends at the goal clipped into the window it was planned
        # in, so a far goal's old path can end short of where the window now reaches.
        beyond_new = float(np.hypot(*(goal - new[-1])))
        beyond_old = float(np.hypot(*(goal - self.path[-1]))) if self.path is not None else 0.0
        shorter = polyline_length(new) + beyond_new < self.remaining + beyond_old - self.cfg.switch_gain
        further = beyond_new < beyond_old - self.cfg.switch_gain  # the window moved on toward a far goal
        if self.path is None or blocked or safer or shorter or further:
            reasons = (
                ("no path in use", self.path is None),
                (cause, blocked),
                ("safer", safer),
                ("shorter", shorter),
            )
            self.switch_reason = next((name for name, why in reasons if why), "further")
            self.path, self.progress, self.path_id = new, 0.0, self.path_id + 1
            self.path_radius = self.planned_radius
            self.path_trail = self._planned_trail
            self.retreating = self.path_trail > 0
            self.remaining = polyline_length(new)

    def _blocked(self, now: float) -> bool:
        """Has a mapped return come ``block_margin`` inside the clearance the path was planned with,
        on the path ahead of the robot's progress (beyond ``clear_ahead`` of it)?

        Once the path was found open, only its segments near which the map changed since are checked
        again (:meth:`ScanMap.take_changes`): the grid's clearance at a cell centre is the distance to
        the return of the nearest occupied cell, and a segment's samples lie in cells whose centres are
        within half a diagonal of it, so a change further than the clearance the path must keep plus
        :data:`CELL_REACH` cells from a segment (a cell's diagonal: a freed cell's centre lies within
        half a diagonal of the return it held) cannot bring a return inside it. The whole path ahead is
        checked at least every ``replan_period``. The clearance grid is built on the box round the
        segments checked (its values do not depend on the box: the distance transform sees the returns
        up to its cap beyond it)."""
        changes = self.map.take_changes()
        path = self.path
        if path is None or len(path) < 2:
            return False
        arc = arc_lengths(path)
        s0 = max(self.progress + self.cfg.clear_ahead, self.path_trail)
        if s0 >= arc[-1]:
            return False
        k = int(np.searchsorted(arc, s0, side="right"))  # first waypoint beyond s0
        ahead = np.vstack([points_at(path, arc, np.array([s0])), path[k:]])
        keep = self.path_radius * 0.999 - self.cfg.block_margin
        key = (
            self.path_id,
            self.path_radius,
            tuple(tuple(d) for d in self.raised),
            len(self.dead_ends),
            len(self.kept),
        )
        recent = self._open_at is not None and 0.0 <= now - self._open_at < self.cfg.replan_period
        if key == self._open_key and recent and changes is not None:
            check = segments_near(changes, ahead, keep + CELL_REACH * self.map.h)
        else:
            check = np.ones(len(ahead) - 1, dtype=bool)
            self._open_at = now
        if check.any():
            ends = np.concatenate([ahead[:-1][check], ahead[1:][check]])
            frame, clear = self._clearance(ends, margin=self.map.h)
            for a, b in zip(ahead[:-1][check], ahead[1:][check], strict=True):
                if not sees(a, b[None], clear, frame, keep, certify=False)[0]:
                    self._keep_blocking(a, b, clear, frame, keep)
                    self._open_key = None
                    return True
        self._open_key = key
        return False

    def _clearance(self, points: np.ndarray, margin: float | None = None) -> tuple[GridFrame, np.ndarray]:
        """The clearance grid (cell centre to the return kept in the nearest occupied cell) on the box
        around ``points`` plus ``margin`` (default: the planning margin), inside the window."""
        m = self.map
        frame = m.frame
        margin = self.cfg.box_margin if margin is None else margin
        lo = points.min(axis=0) - margin
        hi = points.max(axis=0) + margin
        ix0 = int(np.clip(math.floor((lo[0] - frame.x0) / m.h), 0, m.n - 1))
        ix1 = int(np.clip(math.ceil((hi[0] - frame.x0) / m.h), ix0 + 1, m.n))
        iy0 = int(np.clip(math.floor((lo[1] - frame.y0) / m.h), 0, m.n - 1))
        iy1 = int(np.clip(math.ceil((hi[1] - frame.y0) / m.h), iy0 + 1, m.n))
        # The distance transform sees obstacles up to the cap beyond the box.
        pad = int(math.ceil((self.base + self.cfg.keep) / m.h)) + 1
        ox0, oy0 = max(ix0 - pad, 0), max(iy0 - pad, 0)
        ox1, oy1 = min(ix1 + pad, m.n), min(iy1 + pad, m.n)
        occ = m.occupied(slice(oy0, oy1), slice(ox0, ox1))
        cap = self.base + self.cfg.keep + m.h
        if occ.any():
            # Distance from each cell centre to the return kept in the nearest occupied cell.
            from scipy.ndimage import distance_transform_edt  # here: a node that never plans never loads scipy

            _, (ny, nx) = distance_transform_edt(~occ, return_indices=True)
            ny, nx = ny[iy0 - oy0 : iy1 - oy0, ix0 - ox0 : ix1 - ox0], nx[iy0 - oy0 : iy1 - oy0, ix0 - ox0 : ix1 - ox0]
            hit = m.hit_xy[ny + oy0, nx + ox0]
            xs = frame.x0 + (np.arange(ix0, ix1) + 0.5) * m.h
            ys = frame.y0 + (np.arange(iy0, iy1) + 0.5) * m.h
            dist = np.hypot(xs[None, :] - hit[..., 0], ys[:, None] - hit[..., 1])
        else:
            dist = np.full((iy1 - iy0, ix1 - ix0), cap)
        clear = np.minimum(dist, cap)
        sub = GridFrame(frame.x0 + ix0 * m.h, frame.y0 + iy0 * m.h, m.h, m.h, clear.shape)
        # The returns raised for the guard (the distance to their discs), the dead ends and the returns
        # kept for blocking a path (as returns); only those the capped clearance of the box can see.
        discs = np.array([*self.raised, *([x, y, 0.0] for x, y in (*self.dead_ends, *self.kept))]).reshape(-1, 3)
        x_lo, y_lo = sub.x0 - cap, sub.y0 - cap
        x_hi, y_hi = sub.x0 + sub.shape[1] * m.h + cap, sub.y0 + sub.shape[0] * m.h + cap
        near = (discs[:, 0] + discs[:, 2] > x_lo) & (discs[:, 0] - discs[:, 2] < x_hi)
        near &= (discs[:, 1] + discs[:, 2] > y_lo) & (discs[:, 1] - discs[:, 2] < y_hi)
        if near.any():
            xs, ys = sub.centres()
            for x, y, r in discs[near]:
                clear = np.minimum(clear, np.maximum(np.hypot(xs[None, :] - x, ys[:, None] - y) - r, 0.0))
        return sub, clear

    def plan(self, start: np.ndarray, goal: np.ndarray) -> np.ndarray | None:
        """A path (P, 2) from ``start`` to ``goal`` on the map (the goal clipped into the window), or None:
        in the box :attr:`ScanMapCfg.box_margin` beyond both, else in wider ones (``box_margin_max``).
        Where none leaves ``start``, the trail back to the nearest of its points with one, and that path
        (module doc: backing out)."""
        m = self.map
        frame = m.frame
        edge = m.n * m.h
        goal = np.clip(goal, [frame.x0 + m.h, frame.y0 + m.h], [frame.x0 + edge - m.h, frame.y0 + edge - m.h])
        back, back_s = self._retreat_starts(start) if self.cfg.retreat > 0 else (np.zeros((0, 2)), np.zeros(0))
        starts = np.vstack([start[None], back])
        ends = np.vstack([starts, goal[None]])
        margin = self.cfg.box_margin
        self._planned_trail = 0.0
        while True:
            # The box beyond robot (its trail) and goal; without a path in it (the way round lies
            # outside), boxes twice as wide, up to box_margin_max or the whole window.
            sub, clear = self._clearance(ends, margin)
            for radius in self.plan_radii:
                found = self._plan_at(starts, goal, sub, clear, radius)
                if found is not None:
                    k, path = found
                    self.planned_radius = radius
                    if k == 0:
                        return path
                    self._dead_end(start)
                    trail = self._trail_back(start, float(back_s[k - 1]))
                    # Unchecked: the trail, and the step from its end to the free cell the path leaves from.
                    self._planned_trail = polyline_length(trail) + float(np.hypot(*(path[1] - path[0])))
                    return np.vstack([trail, path[1:]])
            if margin >= self.cfg.box_margin_max or sub.shape == (m.n, m.n):
                return None
            margin = min(2.0 * margin, self.cfg.box_margin_max)

    def _keep_blocking(self, a: np.ndarray, b: np.ndarray, clear: np.ndarray, frame: GridFrame, keep: float) -> None:
        """The segment ``a``-``b`` of the path in use is blocked: keep the mapped return nearest its
        first sample closer than ``keep`` to one (module doc: blocked), unless one kept is already in
        that return's cell."""
        m = self.map
        length = float(np.hypot(*(b - a)))
        t = np.linspace(0.0, 1.0, max(2, int(math.ceil(length / (m.h / 2))) + 1))
        pts = a[None] + t[:, None] * (b - a)[None]
        iy = np.clip(np.floor((pts[:, 1] - frame.y0) / frame.sy).astype(np.int64), 0, clear.shape[0] - 1)
        ix = np.clip(np.floor((pts[:, 0] - frame.x0) / frame.sx).astype(np.int64), 0, clear.shape[1] - 1)
        close = np.flatnonzero(clear[iy, ix] <= keep)
        if not len(close):
            return
        q = pts[int(close[0])]
        reach = int(math.ceil(keep / m.h)) + 2
        cy, cx = m.frame.cell(q)
        y0, y1, x0, x1 = max(cy - reach, 0), min(cy + reach + 1, m.n), max(cx - reach, 0), min(cx + reach + 1, m.n)
        ys, xs = np.nonzero(m.occupied(slice(y0, y1), slice(x0, x1)))
        if not len(ys):
            return  # a raised return or a dead end blocks it: already kept
        hits = m.hit_xy[ys + y0, xs + x0].astype(np.float64)
        d = np.hypot(hits[:, 0] - q[0], hits[:, 1] - q[1])
        j = int(np.argmin(d))
        if d[j] > keep + m.h:
            return
        x, y = float(hits[j, 0]), float(hits[j, 1])
        if all(math.hypot(x - kx, y - ky) > m.h for kx, ky in self.kept):
            self.kept.append((x, y))

    def _dead_end(self, p: np.ndarray) -> None:
        """No path leaves ``p``: keep it as a dead end (module doc: backing out), unless it lies within
        the clearance a path keeps of one already kept."""
        keep = self.plan_radii[1]
        if all(math.hypot(p[0] - x, p[1] - y) > keep for x, y in self.dead_ends):
            self.dead_ends.append((float(p[0]), float(p[1])))

    def _plan_at(
        self, starts: np.ndarray, goal: np.ndarray, sub: GridFrame, clear: np.ndarray, radius: float
    ) -> tuple[int, np.ndarray] | None:
        """The cheapest path keeping ``radius`` from mapped returns at cell centres, pulled tight, from
        the first of ``starts`` (K, 2) that has one: (its index, the path), or None."""
        free = clear > radius  # a cell the path may start or end in
        g_cell = self._free_cell(goal, free, sub)
        if g_cell is None:
            return None
        W = sub.shape[1]
        graph = edge_graph(clear, radius, sub, keep=self.cfg.keep, certify=False)
        dist, pred = search_from(graph, g_cell[0] * W + g_cell[1])
        for k, start in enumerate(starts):
            s_cell = self._free_cell(start, free, sub)
            if s_cell is None or not np.isfinite(dist[s_cell[0] * W + s_cell[1]]):
                continue
            cells = chain_to(pred, s_cell[0] * W + s_cell[1], g_cell[0] * W + g_cell[1])
            floor = clearance_floor(cells, clear, sub, radius, self.cfg.keep)
            path = pull(cell_points(cells, start, goal, sub), clear, sub, radius, floor, certify=False)
            return k, path.astype(np.float64)
        return None

    def _free_cell(self, p: np.ndarray, free: np.ndarray, frame: GridFrame) -> tuple[int, int] | None:
        """The cell of ``p`` when free, else the nearest free cell within ``start_search``."""
        iy, ix = frame.cell(p)
        if free[iy, ix]:
            return iy, ix
        k = int(math.ceil(self.cfg.start_search / frame.sx))
        y0, y1 = max(iy - k, 0), min(iy + k + 1, free.shape[0])
        x0, x1 = max(ix - k, 0), min(ix + k + 1, free.shape[1])
        ys, xs = np.nonzero(free[y0:y1, x0:x1])
        if len(ys) == 0:
            return None
        d = (ys + y0 - iy) ** 2 + (xs + x0 - ix) ** 2
        j = int(np.argmin(d))
        if math.sqrt(float(d[j])) * frame.sx > self.cfg.start_search:
            return None
        return int(ys[j] + y0), int(xs[j] + x0)
