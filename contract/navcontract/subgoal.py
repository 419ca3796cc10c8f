"""Path following: a global path and the robot's position -> a sub-goal a lookahead along the path.

The policy is trained to drive to a goal point. To follow a path (a global planner's plan), the
robot hands the policy a sub-goal that slides along the path ahead of it: the point
``lookahead`` metres of arc length beyond the robot's projection onto the path. This module is the
one implementation of that rule, written against the array namespace of :mod:`navcontract.xp`, so
that training (torch tensors, batched over N worlds) and the robot (numpy arrays, N = 1) run the
very same code.

The rule, per world:

1. Arc length is measured along the path's valid waypoints (``path[:count]``); padding beyond
   ``count`` is ignored (internally every padding point is replaced by the last valid point, so
   padding segments have zero length and sit at the path's end).
2. ``progress`` (the arc length already reached, taken in [0, total length]) bounds the search:
   only the segments whose arc-length interval overlaps ``[progress, progress + search_window]``
   are considered, and on each the projection is clamped to that interval, so it never goes back
   and never jumps further ahead than the window. Where a path passes close to itself (a U-turn
   around a wall), the leg further along is outside the window and cannot capture the robot.
3. The robot's position is projected onto each of those segments; the nearest projection wins
   (a tie: the one furthest along). ``new_progress = max(progress, its arc length)``.
4. The sub-goal is the point of the path at arc length ``min(new_progress + lookahead, total)``;
   ``remaining = (total - new_progress) + |position - projection|`` is the path distance still to go.

A path of one valid point gives that point as the sub-goal. Repeated points (zero-length segments)
are harmless. Everything is float32; torch in gives torch out on the same device. The computation
is vectorised over worlds and over segments (no Python loop).

The rule a policy was trained with travels in its bundle: the contract's optional
``path_following`` section (:class:`TrainedPathFollowing`: the lookahead, the search window and the
share of training episodes that followed a planned path), which the training side fills in through
:meth:`TrainedPathFollowing.checked`. A bundle without the section is followed with
:class:`LookaheadRule`'s defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from navcontract.xp import ops_for

SECTION = "path_following"
"""The contract key of the trained rule (:class:`TrainedPathFollowing`)."""

MIN_SEGMENT = 1e-6
"""[m] Segments shorter than this count as points (no division by their length)."""

TIE_TOLERANCE = 1e-6
"""Relative tolerance on squared distances under which two projections count as equally near."""

TIE_FLOOR = 1e-10
"""[m^2] Absolute part of that tolerance (a robot on a corner is at the same point of both legs)."""


@dataclass(frozen=True)
class LookaheadRule:
    """Parameters of :func:`follow_path`."""

    lookahead: float = 1.0  # [m] distance along the path ahead of the robot's projection
    search_window: float = 2.0  # [m] how far ahead of the last progress the projection may jump

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lookahead) and self.lookahead >= 0.0):
            raise ValueError(f"lookahead must be finite and >= 0, got {self.lookahead}")
        if not (math.isfinite(self.search_window) and self.search_window > 0.0):
            raise ValueError(f"search_window must be finite and > 0, got {self.search_window}")


class PathFollowingError(ValueError):
    """The values of a path_following section (from training or from a contract) are unusable."""


def _number(where: str, value: Any, lo: float, hi: float = math.inf, *, lo_open: bool = False) -> float:
    """``value`` as a finite float in [lo, hi] (``(lo, hi]`` with ``lo_open``); PathFollowingError
    naming ``where`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PathFollowingError(f"{where} must be a number, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi):
        rng = f"{'> ' if lo_open else '>= '}{lo:g}" + ("" if hi == math.inf else f" and <= {hi:g}")
        raise PathFollowingError(f"{where} = {value!r} must be finite and {rng}")
    return v


@dataclass(frozen=True)
class TrainedPathFollowing:
    """The contract's ``path_following`` section: the rule the policy's path-following episodes used."""

    rule: LookaheadRule
    trained_share: float  # share of training episodes fed a sub-goal along a planned path, in [0, 1]

    @classmethod
    def from_dict(cls, data: Any) -> TrainedPathFollowing:
        """Parse and check a contract section; PathFollowingError naming the key if unusable."""
        if not isinstance(data, Mapping):
            raise PathFollowingError(f"{SECTION} must be a mapping, got {type(data).__name__}")
        missing = [k for k in ("lookahead", "search_window", "trained_share") if k not in data]
        if missing:
            raise PathFollowingError(f"{SECTION} has no {', '.join(missing)}")
        return cls.checked(SECTION, data["lookahead"], data["search_window"], data["trained_share"])

    @classmethod
    def checked(
        cls, where: str, lookahead: Any, search_window: Any, share: Any, share_key: str = "trained_share"
    ) -> TrainedPathFollowing:
        """From unchecked values: finite numbers, ``lookahead >= 0``, ``search_window > 0``, the share
        in [0, 1]; PathFollowingError naming ``where.lookahead``, ``where.search_window`` or
        ``where.<share_key>`` otherwise."""
        rule = LookaheadRule(
            _number(f"{where}.lookahead", lookahead, 0.0),
            _number(f"{where}.search_window", search_window, 0.0, lo_open=True),
        )
        return cls(rule, _number(f"{where}.{share_key}", share, 0.0, 1.0))

    def to_dict(self) -> dict[str, Any]:
        """The contract section as plain JSON data."""
        return {
            "lookahead": self.rule.lookahead,
            "search_window": self.rule.search_window,
            "trained_share": self.trained_share,
            "rule": "navcontract.subgoal.follow_path: the sub-goal is lookahead m of arc length beyond the "
            "robot's projection onto the path; the projection moves at most search_window m ahead of its progress",
        }

    def describe(self) -> str:
        """One line for logs."""
        return (
            f"trained with lookahead {self.rule.lookahead:g} m, search window {self.rule.search_window:g} m "
            f"on {self.trained_share * 100:g}% of its episodes"
        )


@dataclass
class PathSegments:
    """The path's segments with padding folded onto the last valid point; all (N, S) or (N, S, 2).
    :func:`path_segments` makes them; a caller that follows one path for many ticks keeps them and
    hands them to :func:`follow_path`."""

    start: Any  # (N, S, 2) segment start points
    delta: Any  # (N, S, 2) end - start
    length: Any  # (N, S)
    safe_length: Any  # (N, S): length, or 1 for (near) zero-length segments
    arc_start: Any  # (N, S) arc length at the segment start
    arc_end: Any  # (N, S)
    total: Any  # (N,) total arc length


def path_segments(path: Any, count: Any) -> PathSegments:
    """The segments of ``path`` (N, K, 2) over its first ``count`` (N,) waypoints."""
    xp = ops_for(path)
    path = xp.as_float(path)
    n, k = path.shape[0], path.shape[1]
    if k == 1:  # one waypoint: a zero-length segment onto itself
        path = xp.concat([path, path], axis=1)
        k = 2
    count = xp.as_index(count, path)
    last = xp.maximum(xp.minimum(count, k), 1) - 1  # (N,) index of the last valid point
    index = xp.minimum(xp.arange(k, path)[None, :], last[:, None])  # (N, K): padding -> last point
    pts = xp.stack([xp.take_along(path[..., 0], index, axis=1), xp.take_along(path[..., 1], index, axis=1)])
    start, end = pts[:, :-1], pts[:, 1:]
    delta = end - start
    length = xp.sqrt(delta[..., 0] * delta[..., 0] + delta[..., 1] * delta[..., 1])
    arc = xp.cumsum(length, axis=1)
    arc_start = xp.concat([xp.zeros((n, 1), like=path), arc[:, :-1]], axis=1)
    return PathSegments(
        start=start,
        delta=delta,
        length=length,
        safe_length=xp.where(length > MIN_SEGMENT, length, 1.0),
        arc_start=arc_start,
        arc_end=arc,
        total=arc[:, -1],
    )


def path_length(path: Any, count: Any) -> Any:
    """(N,) total arc length of ``path`` (N, K, 2) over its first ``count`` (N,) waypoints."""
    return path_segments(path, count).total


def _point_at(seg: PathSegments, arc: Any) -> Any:
    """(N, 2) the point of the path at arc length ``arc`` (N,), taken in [0, total]."""
    return _points_at(seg, arc[:, None])[:, 0]


def _points_at(seg: PathSegments, arc: Any) -> Any:
    """(N, M, 2) the points of the path at the arc lengths ``arc`` (N, M), each taken in [0, total]."""
    xp = ops_for(arc)
    # Segments ending before ``arc`` precede the one holding it (arc_end is non-decreasing).
    before = xp.sum(seg.arc_end[:, None, :] < arc[:, :, None], axis=2)
    j = xp.minimum(before, seg.length.shape[1] - 1)  # (N, M)
    t = xp.clip((arc - xp.take_along(seg.arc_start, j, axis=1)) / xp.take_along(seg.safe_length, j, axis=1), 0.0, 1.0)
    t = xp.where(xp.take_along(seg.length, j, axis=1) > MIN_SEGMENT, t, 0.0)
    x = xp.take_along(seg.start[..., 0], j, axis=1) + t * xp.take_along(seg.delta[..., 0], j, axis=1)
    y = xp.take_along(seg.start[..., 1], j, axis=1) + t * xp.take_along(seg.delta[..., 1], j, axis=1)
    return xp.stack([x, y], axis=-1)


def follow_path(
    path: Any,
    count: Any,
    position: Any,
    progress: Any,
    rule: LookaheadRule = LookaheadRule(),
    segments: PathSegments | None = None,
) -> tuple[Any, Any, Any]:
    """One step of the lookahead rule (module docstring) for N worlds at once.

    path:      (N, K, 2) waypoints (the robot: odometry frame); rows at index >= count are padding.
    count:     (N,) number of valid waypoints (>= 1; values outside [1, K] are clamped).
    position:  (N, 2) robot position in the same frame.
    progress:  (N,) arc length already reached (0 for a new path).

    segments:  :func:`path_segments` of ``path`` and ``count``, when the caller keeps them (else made here).

    Returns ``(subgoal (N, 2), new_progress (N,), remaining (N,))``, float32, in the array type of
    ``path``.
    """
    xp = ops_for(path)
    seg = path_segments(path, count) if segments is None else segments
    position = xp.as_float(position)
    progress = xp.minimum(xp.maximum(xp.as_float(progress), 0.0), seg.total)
    lo = progress[:, None]
    hi = lo + float(rule.search_window)

    # Projection onto each segment, clamped to the part of it inside [progress, progress + window].
    rel_x = position[:, None, 0] - seg.start[..., 0]
    rel_y = position[:, None, 1] - seg.start[..., 1]
    along = (rel_x * seg.delta[..., 0] + rel_y * seg.delta[..., 1]) / (seg.safe_length * seg.safe_length)
    t_lo = xp.maximum((lo - seg.arc_start) / seg.safe_length, 0.0)
    t_hi = xp.minimum((hi - seg.arc_start) / seg.safe_length, 1.0)
    t = xp.minimum(xp.maximum(along, t_lo), t_hi)
    t = xp.where(seg.length > MIN_SEGMENT, t, 0.0)
    px = seg.start[..., 0] + t * seg.delta[..., 0]
    py = seg.start[..., 1] + t * seg.delta[..., 1]
    arc = seg.arc_start + t * seg.length
    dx, dy = position[:, None, 0] - px, position[:, None, 1] - py
    d2 = dx * dx + dy * dy

    # Only the segments overlapping the window; the segment holding ``progress`` always does.
    inside = (seg.arc_end >= lo) & (seg.arc_start <= hi)
    d2 = xp.where(inside, d2, math.inf)
    nearest = xp.amin(d2, axis=1)
    tied = d2 <= (nearest * (1.0 + TIE_TOLERANCE) + TIE_FLOOR)[:, None]
    j = xp.amax(xp.where(tied, xp.arange(d2.shape[1], d2)[None, :], 0), axis=1)[:, None]  # 0 if NaN

    proj_arc = xp.take_along(arc, j, axis=1)[:, 0]
    off_x = xp.take_along(dx, j, axis=1)[:, 0]
    off_y = xp.take_along(dy, j, axis=1)[:, 0]
    new_progress = xp.maximum(progress, proj_arc)
    target = xp.minimum(new_progress + float(rule.lookahead), seg.total)
    subgoal = _point_at(seg, target)
    remaining = (seg.total - new_progress) + xp.sqrt(off_x * off_x + off_y * off_y)
    return subgoal, new_progress, remaining


SIGHT_STEP = 0.05
"""[m] :func:`open_subgoal` tries the path's points this far apart, back from the sub-goal."""

OPEN_SLACK = 0.05
"""[m] A straight line counts as open when the guard lets it go to this short of its end (the rule of
:func:`open_subgoal`, and of the gate's blocked watch, :mod:`navdeploy.gate`)."""


def open_subgoal(
    path: Any,
    count: Any,
    pose: Any,
    progress: Any,
    subgoal: Any,
    rule: LookaheadRule,
    ranges: Any,
    seen: Any,
    guard: Any,
    v_max: float,
    max_range: float,
) -> Any:
    """The sub-goal a driver following a path behind the guard is given, for N worlds at once:
    ``subgoal`` (:func:`follow_path`'s), or where the guard (:class:`navcontract.guard.GuardRule`
    ``guard``, rule steps 0-2 on the beams ``ranges`` (N, B) seen per ``seen`` (N, B) or None)
    would stop a straight motion toward it more than :data:`OPEN_SLACK` short of it, the point at
    the same distance from the robot in the direction of the furthest point of the path before it
    (:data:`SIGHT_STEP` apart, back to ``progress``) whose straight line the guard leaves open
    (``subgoal`` when none is). ``pose`` (N, 3): x, y, yaw in the path's frame. A robot drifted off
    the path beside a post or a wall's end so sees a goal at the distance it is trained with, in a
    direction it can go. The same code in training (torch) and on the robot (numpy)."""
    from navcontract.guard import free_distances, in_slices

    xp = ops_for(path)
    seg = path_segments(path, count)
    pose = xp.as_float(pose)
    subgoal = xp.as_float(subgoal)
    progress = xp.minimum(xp.maximum(xp.as_float(progress), 0.0), seg.total)
    s_sub = xp.minimum(progress + float(rule.lookahead), seg.total)
    k_count = int(math.ceil(float(rule.lookahead) / SIGHT_STEP)) + 1
    back = xp.constant([k * SIGHT_STEP for k in range(1, k_count)], subgoal)  # (K - 1,) [m]
    s = s_sub[:, None] - back[None, :]  # (N, K - 1): back along the path from the sub-goal
    behind = _points_at(seg, xp.maximum(s, progress[:, None]))
    q = xp.concat([subgoal[:, None, :], behind], axis=1)  # (N, K, 2): the sub-goal first
    ok = xp.concat([(progress <= s_sub)[:, None], s >= progress[:, None] - 1e-9], axis=1)
    dx, dy = q[..., 0] - pose[:, None, 0], q[..., 1] - pose[:, None, 1]
    dist = xp.sqrt(dx * dx + dy * dy)
    ok = ok & (dist >= SIGHT_STEP)
    c, s = xp.cos(pose[:, 2])[:, None], xp.sin(pose[:, 2])[:, None]
    safe = xp.maximum(dist, SIGHT_STEP)
    ux, uy = (c * dx + s * dy) / safe, (-s * dx + c * dy) / safe
    probes = xp.stack([v_max * ux, v_max * uy, ux * 0.0], axis=-1)  # (N, K, 3)
    seen_k = None if seen is None else seen[:, None, :]

    def reach_of(r: Any, pr: Any, sn: Any) -> Any:
        free, blocks = free_distances(r, pr, guard, max_range, sn)
        return xp.amin(xp.where(blocks, free, math.inf), axis=-1)

    beams = xp.as_float(ranges)[:, None, :]
    reach = in_slices(xp, reach_of, [beams, probes, seen_k], (*probes.shape[:-1], beams.shape[-1]))  # (N, K)
    open_ = ok & (reach >= dist - OPEN_SLACK)
    rank = xp.where(open_, k_count - xp.arange(k_count, dist)[None, :], 0)  # the first open point ranks highest
    best = xp.amax(rank, axis=-1)
    j = xp.where(best > 0, k_count - best, 0)[:, None]  # (N, 1); 0 (the sub-goal) where none is open
    turn = ok[:, 0] & ~open_[:, 0] & (best > 0)
    dist_j = xp.take_along(dist, j, axis=1)[:, 0]
    scale = dist[:, 0] / xp.maximum(dist_j, SIGHT_STEP)
    new_x = pose[:, 0] + scale * xp.take_along(dx, j, axis=1)[:, 0]
    new_y = pose[:, 1] + scale * xp.take_along(dy, j, axis=1)[:, 0]
    return xp.stack([xp.where(turn, new_x, subgoal[:, 0]), xp.where(turn, new_y, subgoal[:, 1])], axis=-1)
