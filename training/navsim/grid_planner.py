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

from navdeploy.grid_search import (
    GridFrame,
    cell_points,
    cheapest_cells,
    clearance_floor,
    edge_graph,
    polyline_length,
    pull,
    sees,
)
from navsim.robot import SlotSizes

CAP_MARGIN = 0.5  # [m] clearance is rasterised up to radius + this


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

    @property
    def frame(self) -> GridFrame:
        """The grid for the shared search (:mod:`navdeploy.grid_search`)."""
        sx, sy = self.step
        return GridFrame(-self.hx, -self.hy, sx, sy, self.shape)


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
    frame = grid.frame
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
            sees(ends[0], centres[:1], clear, frame, radius)[0] and sees(ends[1], centres[1:], clear, frame, radius)[0]
        ):
            continue
        g_id, s_id = g_iy * W + g_ix, s_iy * W + s_ix
        cells = cheapest_cells(edge_graph(clear, radius, frame), g_id, s_id)
        if cells is None:
            continue
        pulled = pull(cell_points(cells, start_np[w], goal_np[w], frame), clear, frame, radius)
        if len(pulled) > path_points:
            continue
        feasible[w] = True
        shortest[w] = polyline_length(pulled)
        if clearance > 0:
            kept = cheapest_cells(edge_graph(clear, radius, frame, keep=clearance), g_id, s_id)  # other weights
            assert kept is not None  # same edges as the shortest path's graph
            floor = clearance_floor(kept, clear, frame, radius, clearance)
            wide = pull(cell_points(kept, start_np[w], goal_np[w], frame), clear, frame, radius, floor)
            if len(wide) <= path_points:  # else the shortest path, which fits
                pulled = wide
                shortest[w] = min(shortest[w], polyline_length(wide))  # greedy pulling is not exactly optimal
        count[w] = len(pulled)
        paths[w, : len(pulled)] = pulled
        length[w] = polyline_length(pulled)
    return PlanResult(feasible, paths, count, length, shortest)
