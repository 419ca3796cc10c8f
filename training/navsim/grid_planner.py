"""Grid planner: certify that a world is feasible for the robot and record its shortest path.

For a batch of worlds of one family (same half extents) the planner

1. rasterises the exact clearance (2D distance to the nearest obstacle or wall surface) at the
   centres of a grid of ``env.worlds.grid_resolution`` cells, batched in torch: each obstacle slot
   writes only a window of cells around itself (``scatter_reduce`` with ``amin``), the world's walls
   are analytic; values are capped at ``radius + CAP_MARGIN``;
2. runs Dijkstra from the goal cell on the 8-connected grid (scipy), joining two neighbouring
   cell centres only when both clearances exceed ``radius + l / 2`` with ``l`` the edge's length
   (``h`` along an axis, ``h * sqrt(2)`` diagonally): clearance is 1-Lipschitz, so every point of
   such an edge keeps more than ``radius`` from every surface (the grid path is collision-free for
   the real robot, not just for the grid). At 0.05 m an axis-aligned passage of the robot's
   diameter + 0.1 m is certified;
3. walks the predecessors from the start cell and pulls the string: each waypoint is joined to
   the furthest later one it sees, a segment being accepted only when at every sample ``p`` (spaced
   ``s``) the clearance of the nearest cell centre ``c`` satisfies
   ``clearance(c) - |p - c| - s / 2 > radius`` (again a sound bound).

A world is feasible when the start and the goal lie in free cells joined by a path; its recorded
path (at most ``env.worlds.path_points`` waypoints, start first, goal last) is then collision-free
for the robot's radius, and the shortest such path's length is the reference for SPL.

The path the policy follows (``clearance`` > 0, ``env.worlds.path_clearance``) keeps away from
surfaces where the world leaves room, as a costmap's inflation layer makes a global planner do:
a second Dijkstra weighs each edge by ``1 + CLEARANCE_WEIGHT * (1 - (c - radius) / clearance)^2``
when its cells' clearance ``c`` is below ``radius + clearance``, and its string pulling accepts a
shortcut only when it keeps the clearance of the stretch of grid path it replaces (up to
``radius + clearance``, less a cell's diagonal; never less than the radius). A narrow passage is
still taken when the detour around it costs more. The shortest path's length stays the SPL
reference. That length is the one of
the pulled path on a grid that keeps ``h * sqrt(2) / 2`` more than the radius from surfaces: a
slight overestimate of the true shortest path (within a few percent in open space). The
certificate is sound, not complete: a world whose only passage is narrower than the grid can
certify is refused and redrawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import dijkstra

from navsim.robot import SlotSizes

CAP_MARGIN = 0.5  # [m] clearance is rasterised up to radius + this
CLEARANCE_WEIGHT = 4.0  # extra cost per metre of an edge at zero clearance beyond the radius
PULL_STRIDE = 3  # string pulling tries every third grid waypoint (and the goal)


@dataclass
class Grid:
    """Cell centres of a world of half extents (hx, hy) at resolution h."""

    hx: float
    hy: float
    h: float

    @property
    def shape(self) -> tuple[int, int]:
        return (max(1, int(math.ceil(2 * self.hy / self.h))), max(1, int(math.ceil(2 * self.hx / self.h))))

    def centres(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        H, W = self.shape
        x = -self.hx + (torch.arange(W, device=device, dtype=torch.float32) + 0.5) * (2 * self.hx / W)
        y = -self.hy + (torch.arange(H, device=device, dtype=torch.float32) + 0.5) * (2 * self.hy / H)
        return x, y

    @property
    def step(self) -> tuple[float, float]:
        H, W = self.shape
        return 2 * self.hx / W, 2 * self.hy / H


def clearance_grid(
    slot_pos: torch.Tensor,
    slot_yaw: torch.Tensor,
    slot_active: torch.Tensor,
    sizes: SlotSizes,
    grid: Grid,
    cap: float,
) -> torch.Tensor:
    """Exact planar clearance at the grid's cell centres, (n, H, W), capped at ``cap``.

    Obstacle slots of every role but ``bound`` are rasterised in windows around them; the world's
    walls at its half extents are added analytically (``bound`` slots lie exactly there)."""
    device = slot_pos.device
    n = slot_pos.shape[0]
    H, W = grid.shape
    sx, sy = grid.step
    xs, ys = grid.centres(device)
    wall = torch.minimum(grid.hx - xs.abs()[None, :], grid.hy - ys.abs()[:, None])  # (H, W)
    flat = torch.minimum(wall, torch.tensor(cap, device=device)).reshape(1, -1).repeat(n, 1)
    flat = torch.cat([flat, torch.full((n, 1), cap, device=device)], dim=1)  # last column: a dump
    nc = len(sizes.cylinder_radius)
    bound = set(int(i) for i in sizes.role("bound"))
    bound_r = sizes.bounding_radius()
    half_ext = np.zeros((sizes.num_slots, 2))
    half_ext[:nc, 0] = sizes.cylinder_radius
    half_ext[nc:] = sizes.box_half
    for j in range(sizes.num_slots):
        if j in bound or not bool(slot_active[:, j].any()):
            continue
        reach = bound_r[j] + cap
        wx, wy = int(math.ceil(2 * reach / sx)) + 1, int(math.ceil(2 * reach / sy)) + 1
        cx, cy = slot_pos[:, j, 0], slot_pos[:, j, 1]
        ix0 = torch.floor((cx - reach + grid.hx) / sx).long()
        iy0 = torch.floor((cy - reach + grid.hy) / sy).long()
        ix = ix0[:, None] + torch.arange(wx, device=device)[None, :]  # (n, wx)
        iy = iy0[:, None] + torch.arange(wy, device=device)[None, :]  # (n, wy)
        px = -grid.hx + (ix.float() + 0.5) * sx
        py = -grid.hy + (iy.float() + 0.5) * sy
        dx = px[:, None, :] - cx[:, None, None]  # (n, wy, wx)
        dy = py[:, :, None] - cy[:, None, None]
        if j < nc:
            dist = torch.sqrt(dx * dx + dy * dy) - float(half_ext[j, 0])
        else:
            c, s = torch.cos(slot_yaw[:, j])[:, None, None], torch.sin(slot_yaw[:, j])[:, None, None]
            lx = (c * dx + s * dy).abs() - float(half_ext[j, 0])
            ly = (-s * dx + c * dy).abs() - float(half_ext[j, 1])
            outside = torch.sqrt(lx.clamp(min=0) ** 2 + ly.clamp(min=0) ** 2)
            dist = outside + torch.clamp(torch.maximum(lx, ly), max=0.0)
        inside = (ix[:, None, :] >= 0) & (ix[:, None, :] < W) & (iy[:, :, None] >= 0) & (iy[:, :, None] < H)
        use = inside & slot_active[:, j][:, None, None]
        index = torch.where(use, iy[:, :, None] * W + ix[:, None, :], torch.full_like(dist, H * W, dtype=torch.long))
        flat.scatter_reduce_(1, index.reshape(n, -1), dist.reshape(n, -1), reduce="amin")
    return flat[:, : H * W].reshape(n, H, W)


@dataclass
class PlanResult:
    feasible: np.ndarray  # (n,) bool
    path: np.ndarray  # (n, K, 2) float32, padded with the goal
    count: np.ndarray  # (n,) int
    length: np.ndarray  # (n,) float: the recorded path's length
    shortest: np.ndarray  # (n,) float: the shortest feasible path's length (the SPL reference)


_OFFSETS = ((0, 1, 1.0), (1, 0, 1.0), (1, 1, math.sqrt(2)), (1, -1, math.sqrt(2)))


def _graph(clear: np.ndarray, radius: float, sx: float, sy: float, keep: float = 0.0) -> coo_matrix:
    """Edges between neighbouring cell centres whose clearances both exceed the radius plus half
    the edge's length (so the whole segment clears the robot), weighted by length, and with
    ``keep`` > 0 also by how far inside ``radius + keep`` of a surface the edge runs."""
    H, W = clear.shape
    ids = np.arange(H * W).reshape(H, W)
    rows, cols, weights = [], [], []
    for dy, dx, _ in _OFFSETS:
        ys, yd = slice(0, H - dy), slice(dy, H)
        x0, x1 = max(0, -dx), W - max(0, dx)
        xs, xd = slice(x0, x1), slice(x0 + dx, x1 + dx)
        free = clear > radius + math.hypot(dx * sx, dy * sy) / 2
        both = free[ys, xs] & free[yd, xd]
        rows.append(ids[ys, xs][both])
        cols.append(ids[yd, xd][both])
        weight = np.full(int(both.sum()), math.hypot(dx * sx, dy * sy))
        if keep > 0:
            near = np.minimum(clear[ys, xs][both], clear[yd, xd][both])
            inside = np.clip(1.0 - (near - radius) / keep, 0.0, 1.0)
            weight = weight * (1.0 + CLEARANCE_WEIGHT * inside * inside)
        weights.append(weight)
    r, c, w = np.concatenate(rows), np.concatenate(cols), np.concatenate(weights)
    return coo_matrix((w, (r, c)), shape=(H * W, H * W)).tocsr()


def _sees(a: np.ndarray, b: np.ndarray, clear: np.ndarray, grid: Grid, radius: float | np.ndarray) -> np.ndarray:
    """For one point ``a`` (2,) and many ends ``b`` (J, 2): does each segment keep more than
    ``radius`` (a scalar, or one per end) from every surface (sound)?"""
    H, W = clear.shape
    sx, sy = grid.step
    spacing = 0.5 * min(sx, sy)
    length = np.linalg.norm(b - a, axis=1)
    m = max(2, int(math.ceil(length.max() / spacing)) + 1)
    t = np.linspace(0.0, 1.0, m)
    pts = a[None, None, :] + t[None, :, None] * (b - a)[:, None, :]  # (J, m, 2)
    ix = np.clip(np.floor((pts[..., 0] + grid.hx) / sx).astype(np.int64), 0, W - 1)
    iy = np.clip(np.floor((pts[..., 1] + grid.hy) / sy).astype(np.int64), 0, H - 1)
    cx = -grid.hx + (ix + 0.5) * sx
    cy = -grid.hy + (iy + 0.5) * sy
    off = np.hypot(pts[..., 0] - cx, pts[..., 1] - cy)
    gap = (length / (m - 1))[:, None] / 2
    ok = clear[iy, ix] - off - gap > np.reshape(radius, (-1, 1))
    return ok.all(axis=1)


def _pull(
    points: np.ndarray, clear: np.ndarray, grid: Grid, radius: float, floor: np.ndarray | None = None
) -> np.ndarray:
    """Greedy string pulling over ``points`` (P, 2), the first and last kept. With ``floor`` (P,),
    a shortcut from point i to point j must keep the smallest floor of points i..j (at least the
    radius) from every surface."""
    out = [points[0]]
    i, last = 0, len(points) - 1
    while i < last:
        cand = np.unique(np.concatenate([np.arange(i + 1, last + 1, PULL_STRIDE), [i + 1, last]]))
        need: float | np.ndarray = radius
        if floor is not None:
            need = np.maximum(radius, np.minimum.accumulate(floor[i:])[cand - i])
        ok = _sees(points[i], points[cand], clear, grid, need)
        j = int(cand[ok].max()) if ok.any() else i + 1
        out.append(points[j])
        i = j
    return np.asarray(out)


def plan_paths(
    slot_pos: torch.Tensor,
    slot_yaw: torch.Tensor,
    slot_active: torch.Tensor,
    start: torch.Tensor,
    goal: torch.Tensor,
    sizes: SlotSizes,
    grid: Grid,
    radius: float,
    path_points: int,
    clearance: float = 0.0,
) -> PlanResult:
    """Plan every world of a batch sharing ``grid`` (tensors on any device; results on the host);
    with ``clearance`` > 0 the recorded path keeps away from surfaces where it can (module doc)."""
    clear_t = clearance_grid(slot_pos, slot_yaw, slot_active, sizes, grid, radius + CAP_MARGIN)
    clear_all = clear_t.cpu().numpy().astype(np.float64)
    start_np = start[:, :2].detach().cpu().numpy().astype(np.float64)
    goal_np = goal.detach().cpu().numpy().astype(np.float64)
    n = clear_all.shape[0]
    H, W = grid.shape
    sx, sy = grid.step
    xs = -grid.hx + (np.arange(W) + 0.5) * sx
    ys = -grid.hy + (np.arange(H) + 0.5) * sy
    margin = radius + max(sx, sy) / 2  # a start or goal cell must at least join its axis neighbours
    paths = np.zeros((n, path_points, 2), dtype=np.float32)
    count = np.zeros(n, dtype=np.int64)
    length = np.zeros(n, dtype=np.float64)
    shortest = np.zeros(n, dtype=np.float64)
    feasible = np.zeros(n, dtype=bool)
    diagonal = math.hypot(sx, sy)
    for w in range(n):
        clear = clear_all[w]
        free = clear > margin
        s_ix = int(np.clip((start_np[w, 0] + grid.hx) // sx, 0, W - 1))
        s_iy = int(np.clip((start_np[w, 1] + grid.hy) // sy, 0, H - 1))
        g_ix = int(np.clip((goal_np[w, 0] + grid.hx) // sx, 0, W - 1))
        g_iy = int(np.clip((goal_np[w, 1] + grid.hy) // sy, 0, H - 1))
        paths[w, :] = goal_np[w]
        if not (free[s_iy, s_ix] and free[g_iy, g_ix]):
            continue
        # The start and goal join their cells' centres soundly (both inside a free cell's disc).
        ends = np.array([start_np[w], goal_np[w]])
        centres = np.array([[xs[s_ix], ys[s_iy]], [xs[g_ix], ys[g_iy]]])
        if not (
            _sees(ends[0], centres[:1], clear, grid, radius)[0] and _sees(ends[1], centres[1:], clear, grid, radius)[0]
        ):
            continue
        g_id, s_id = g_iy * W + g_ix, s_iy * W + s_ix
        graph = _graph(clear, radius, sx, sy)
        cells = _cells(graph, g_id, s_id)
        if cells is None:
            continue
        pulled = _pull(_points(cells, start_np[w], goal_np[w], xs, ys, W), clear, grid, radius)
        if len(pulled) > path_points:
            continue
        feasible[w] = True
        shortest[w] = _length(pulled)
        if clearance > 0:
            kept = _cells(_graph(clear, radius, sx, sy, keep=clearance), g_id, s_id)  # same edges, other weights
            flat = clear.reshape(-1)[kept]
            floor = np.minimum(radius + clearance, np.concatenate([flat[:1], flat, flat[-1:]]) - diagonal)
            wide = _pull(_points(kept, start_np[w], goal_np[w], xs, ys, W), clear, grid, radius, floor)
            if len(wide) <= path_points:  # else the shortest path, which fits
                pulled = wide
                shortest[w] = min(shortest[w], _length(wide))  # greedy pulling is not exactly optimal
        count[w] = len(pulled)
        paths[w, : len(pulled)] = pulled
        length[w] = _length(pulled)
    return PlanResult(feasible, paths, count, length, shortest)


def _cells(graph: csr_matrix, goal_id: int, start_id: int) -> np.ndarray | None:
    """Cell ids of the cheapest grid path from the start cell to the goal cell, or None."""
    dist, pred = dijkstra(graph, directed=False, indices=goal_id, return_predecessors=True)
    if not np.isfinite(dist[start_id]):
        return None
    chain = [start_id]
    while chain[-1] != goal_id:
        chain.append(int(pred[chain[-1]]))
    return np.array(chain)


def _points(
    cells: np.ndarray, start: np.ndarray, goal: np.ndarray, xs: np.ndarray, ys: np.ndarray, W: int
) -> np.ndarray:
    """The start, the cells' centres, the goal: (P, 2)."""
    return np.concatenate([start[None], np.stack([xs[cells % W], ys[cells // W]], axis=1), goal[None]])


def _length(points: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())
