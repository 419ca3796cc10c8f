"""Cheapest paths on a clearance grid: the search both planners run (numpy + scipy).

Two planners share this module: the world generator's (``navsim.grid_planner``), which certifies
that a training world is feasible and records the path the policy follows, and the robot's
(:mod:`navdeploy.scan_map`), which plans on a map of its own scans when no global path is given.

A grid holds, at each cell centre, the clearance ``c``: the distance to the nearest surface
(capped). :func:`edge_graph` joins two neighbouring centres (8-connected) when both clearances
exceed ``radius + l / 2``, ``l`` the edge's length. Clearance is 1-Lipschitz, so every point of
such an edge keeps more than ``radius`` from every surface (the world generator's certificate;
the robot's planner, whose clearance is an estimate from its scans anyway, passes
``certify=False`` and asks both clearances to exceed the radius alone). With ``keep`` > 0 an edge's weight
grows where it runs within ``radius + keep`` of a surface, by
``1 + CLEARANCE_WEIGHT * (1 - (c - radius) / keep)^2``: the path keeps away from surfaces where
the world leaves room, as a costmap's inflation layer makes a global planner do.
:func:`cheapest_cells` runs Dijkstra (scipy) from the goal cell; :func:`pull` shortens the cell
path greedily, accepting a shortcut only when :func:`sees` finds that it keeps its clearance
(a sound test on the grid, or with ``certify=False`` the same estimate as the edges).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scipy is imported where a graph is built or searched: a node that never plans never loads it
    from scipy.sparse import csr_matrix

CLEARANCE_WEIGHT = 4.0
"""Extra cost per metre of an edge at zero clearance beyond the radius."""

PULL_STRIDE = 3
"""String pulling tries every third grid waypoint (and the last)."""


@dataclass(frozen=True)
class GridFrame:
    """Where a grid's cells lie: cell (iy, ix) spans ``[x0 + ix*sx, x0 + (ix+1)*sx)`` in x (same in y)."""

    x0: float
    y0: float
    sx: float
    sy: float
    shape: tuple[int, int]  # (H, W)

    def centres(self) -> tuple[np.ndarray, np.ndarray]:
        """Cell-centre coordinates along x (W,) and y (H,)."""
        H, W = self.shape
        return self.x0 + (np.arange(W) + 0.5) * self.sx, self.y0 + (np.arange(H) + 0.5) * self.sy

    def cell(self, p: np.ndarray) -> tuple[int, int]:
        """The (iy, ix) of the cell holding point ``p`` (clipped to the grid)."""
        H, W = self.shape
        ix = int(np.clip(math.floor((float(p[0]) - self.x0) / self.sx), 0, W - 1))
        iy = int(np.clip(math.floor((float(p[1]) - self.y0) / self.sy), 0, H - 1))
        return iy, ix


def _neighbour_offsets(frame: GridFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's later neighbours, in ascending flat id: east, south-west, south, south-east at ids
    ``+1, +W-1, +W, +W+1``; ``(offsets (4,), lengths (4,))``."""
    W = frame.shape[1]
    diagonal = math.hypot(frame.sx, frame.sy)
    return np.array([1, W - 1, W, W + 1]), np.array([frame.sx, diagonal, frame.sy, diagonal])


def _later_neighbours(clear: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(valid (H, W, 4), c (H, W, 4))``: per cell, which of its later neighbours
    (:func:`_neighbour_offsets`' order) exist, and their clearances (0 where none)."""
    H, W = clear.shape
    c = np.zeros((H, W, 4), dtype=clear.dtype)
    valid = np.zeros((H, W, 4), dtype=bool)
    c[:, :-1, 0], valid[:, :-1, 0] = clear[:, 1:], True  # east
    c[:-1, 1:, 1], valid[:-1, 1:, 1] = clear[1:, :-1], True  # south-west
    c[:-1, :, 2], valid[:-1, :, 2] = clear[1:, :], True  # south
    c[:-1, :-1, 3], valid[:-1, :-1, 3] = clear[1:, 1:], True  # south-east
    return valid, c


def edge_graph(
    clear: np.ndarray,
    radius: float,
    frame: GridFrame,
    keep: float = 0.0,
    certify: bool = True,
) -> csr_matrix:
    """Edges between neighbouring cell centres whose clearances both exceed the radius plus half the
    edge's length (``certify``; else the radius alone), weighted by length (and with ``keep`` > 0 by
    how far inside ``radius + keep`` of a surface the edge runs). Each cell's edges to its later
    neighbours, read cell by cell, are already in compressed sparse row order (ascending ids,
    :func:`_neighbour_offsets`): the grid is sliced, never gathered or sorted."""
    from scipy.sparse import csr_matrix

    H, W = frame.shape
    offsets, length = _neighbour_offsets(frame)
    valid, c_second = _later_neighbours(clear)
    c_first = clear[..., None]
    # the threshold in the clearance's own precision, as a Python number compared with it would be
    need = np.asarray(radius + length / 2 if certify else radius, dtype=clear.dtype)
    both = valid & (c_first > need) & (c_second > need)
    if keep > 0:
        near = np.minimum(c_first, c_second)
        inside = np.clip(1.0 - (near - radius) / keep, 0.0, 1.0)
        weight = length * (1.0 + CLEARANCE_WEIGHT * inside * inside)
    else:
        weight = np.broadcast_to(length, both.shape)
    ids = np.arange(H * W).reshape(H, W, 1)
    per_cell = np.add.reduce(both.reshape(H * W, 4).view(np.uint8), axis=1, dtype=np.int64)
    rows = np.concatenate([[0], np.cumsum(per_cell)])
    return csr_matrix((weight[both], (ids + offsets)[both], rows), shape=(H * W, H * W))


def search_from(graph: csr_matrix, goal_id: int) -> tuple[np.ndarray, np.ndarray]:
    """The cost of the cheapest grid path from every cell to the goal cell (inf: none) and each
    cell's next cell on it."""
    from scipy.sparse.csgraph import dijkstra

    return dijkstra(graph, directed=False, indices=goal_id, return_predecessors=True)


def chain_to(pred: np.ndarray, start_id: int, goal_id: int) -> np.ndarray:
    """Flat cell ids from the start cell to the goal cell along ``pred`` of :func:`search_from`."""
    chain = [start_id]
    while chain[-1] != goal_id:
        chain.append(int(pred[chain[-1]]))
    return np.array(chain)


def cheapest_cells(graph: csr_matrix, goal_id: int, start_id: int) -> np.ndarray | None:
    """Flat cell ids of the cheapest grid path from the start cell to the goal cell, or None."""
    dist, pred = search_from(graph, goal_id)
    if not np.isfinite(dist[start_id]):
        return None
    return chain_to(pred, start_id, goal_id)


def cell_points(cells: np.ndarray, start: np.ndarray, goal: np.ndarray, frame: GridFrame) -> np.ndarray:
    """The start, the cells' centres, the goal: (P, 2)."""
    xs, ys = frame.centres()
    W = frame.shape[1]
    return np.concatenate([start[None], np.stack([xs[cells % W], ys[cells // W]], axis=1), goal[None]])


def sample_count(length: np.ndarray, frame: GridFrame) -> int:
    """How many evenly spaced samples :func:`sees` takes on each of segments of ``length`` (J,) [m]:
    half a cell apart or closer on the longest, both ends included."""
    return max(2, int(math.ceil(length.max() / (0.5 * min(frame.sx, frame.sy)))) + 1)


def sees(
    a: np.ndarray,
    b: np.ndarray,
    clear: np.ndarray,
    frame: GridFrame,
    radius: float | np.ndarray,
    certify: bool = True,
    samples: int | None = None,
) -> np.ndarray:
    """For one point ``a`` (2,) and many ends ``b`` (J, 2): does each segment keep more than
    ``radius`` (a scalar, or one per end) from every surface? ``certify``: a sound bound on the grid
    (each sample's cell clearance less the sample's offset from the centre and half the spacing);
    else the estimate: every sample's cell clearance exceeds the radius. Each segment is sampled at
    :func:`sample_count` points (of the longest of them), or at ``samples`` when given (the count of
    a larger set of ends this one is part of: the same answer as in that set)."""
    H, W = clear.shape
    sx, sy = frame.sx, frame.sy
    d = b - a
    length = np.sqrt(np.add.reduce(d * d, axis=1))
    m = sample_count(length, frame) if samples is None else samples
    t = np.arange(m) * (1.0 / (m - 1))  # np.linspace(0, 1, m), the same numbers in fewer calls
    t[-1] = 1.0
    pts = a[None, None, :] + t[None, :, None] * d[:, None, :]  # (J, m, 2)
    ix = np.minimum(np.maximum(np.floor((pts[..., 0] - frame.x0) / sx).astype(np.int64), 0), W - 1)
    iy = np.minimum(np.maximum(np.floor((pts[..., 1] - frame.y0) / sy).astype(np.int64), 0), H - 1)
    if not certify:
        return (clear[iy, ix] > np.reshape(radius, (-1, 1))).all(axis=1)
    cx = frame.x0 + (ix + 0.5) * sx
    cy = frame.y0 + (iy + 0.5) * sy
    off = np.hypot(pts[..., 0] - cx, pts[..., 1] - cy)
    gap = (length / (m - 1))[:, None] / 2
    ok = clear[iy, ix] - off - gap > np.reshape(radius, (-1, 1))
    return ok.all(axis=1)


def pull(
    points: np.ndarray,
    clear: np.ndarray,
    frame: GridFrame,
    radius: float,
    floor: np.ndarray | None = None,
    certify: bool = True,
) -> np.ndarray:
    """Greedy string pulling over ``points`` (P, 2), the first and last kept. With ``floor`` (P,),
    a shortcut from point i to point j must keep the smallest floor of points i..j (at least the
    radius) from every surface; ``certify`` as for :func:`sees`."""
    out = [points[0]]
    i, last = 0, len(points) - 1
    while i < last:
        cand = np.unique(np.concatenate([np.arange(i + 1, last + 1, PULL_STRIDE), [i + 1, last]]))
        need: float | np.ndarray = radius
        if floor is not None:
            need = np.maximum(radius, np.minimum.accumulate(floor[i:])[cand - i])
        ok = sees(points[i], points[cand], clear, frame, need, certify)
        j = int(cand[ok].max()) if ok.any() else i + 1
        out.append(points[j])
        i = j
    return np.asarray(out)


def clearance_floor(cells: np.ndarray, clear: np.ndarray, frame: GridFrame, radius: float, keep: float) -> np.ndarray:
    """Per point of :func:`cell_points` (start, cells, goal): the clearance a shortcut over it must
    keep, ``radius + keep`` at most, the cell's own clearance less a cell's diagonal where that is less."""
    flat = clear.reshape(-1)[cells]
    diagonal = math.hypot(frame.sx, frame.sy)
    return np.minimum(radius + keep, np.concatenate([flat[:1], flat, flat[-1:]]) - diagonal)


def polyline_length(points: np.ndarray) -> float:
    """Length of a polyline (P, 2)."""
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())
