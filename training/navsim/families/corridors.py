"""Corridors: a maze of cells (turns, dead ends) with doorways, start and goal at opposite ends
(``env.worlds.corridors``). The level sets how many walls beyond the spanning maze are opened."""

from __future__ import annotations

import math

import torch

from navsim.config import EnvCfg
from navsim.families import lerp
from navsim.families.rooms import RoomBatch, RoomGeometry, uniform


def maze_edges(cols: int, rows: int, cell: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The interior edges of the cell grid: endpoints (E, 2) cell ids, wall centre (E, 2), wall yaw
    (E,), and each edge's collinear neighbours (E, 2) (-1 at the border) in the -/+ direction."""
    ends, centre, yaw, along = [], [], [], []
    x0, y0 = -cols * cell / 2, -rows * cell / 2

    def cid(i: int, j: int) -> int:
        return j * cols + i

    index: dict[tuple[str, int, int], int] = {}
    for j in range(rows):
        for i in range(cols - 1):  # wall between (i, j) and (i+1, j): a vertical wall
            index[("v", i, j)] = len(ends)
            ends.append((cid(i, j), cid(i + 1, j)))
            centre.append((x0 + (i + 1) * cell, y0 + (j + 0.5) * cell))
            yaw.append(math.pi / 2)
    for j in range(rows - 1):
        for i in range(cols):  # wall between (i, j) and (i, j+1): a horizontal wall
            index[("h", i, j)] = len(ends)
            ends.append((cid(i, j), cid(i, j + 1)))
            centre.append((x0 + (i + 0.5) * cell, y0 + (j + 1) * cell))
            yaw.append(0.0)
    for (kind, i, j), e in index.items():
        if kind == "v":
            along.append((e, index.get(("v", i, j - 1), -1), index.get(("v", i, j + 1), -1)))
        else:
            along.append((e, index.get(("h", i - 1, j), -1), index.get(("h", i + 1, j), -1)))
    along.sort()
    return (
        torch.tensor(ends, dtype=torch.long),
        torch.tensor(centre, dtype=torch.float32),
        torch.tensor(yaw, dtype=torch.float32),
        torch.tensor([(a, b) for _, a, b in along], dtype=torch.long),
    )


def generate(batch: RoomBatch, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator, frac: float) -> None:
    """Fill ``batch`` (in place) with corridor mazes at level fraction ``frac``."""
    k = cfg.worlds.corridors
    device = batch.slot_pos.device
    n = batch.slot_pos.shape[0]
    ends, centre, yaw, along = (t.to(device) for t in maze_edges(k.cols, k.rows, k.cell))
    E, C = len(ends), k.cols * k.rows
    # A random spanning tree of the cells (randomised Prim, batched): its edges are the openings.
    in_tree = torch.zeros(n, C, dtype=torch.bool, device=device)
    root = torch.randint(0, C, (n,), generator=gen, device=device)
    in_tree[torch.arange(n, device=device), root] = True
    open_ = torch.zeros(n, E, dtype=torch.bool, device=device)
    for _ in range(C - 1):
        a, b = in_tree[:, ends[:, 0]], in_tree[:, ends[:, 1]]
        frontier = a ^ b
        weight = torch.rand(n, E, generator=gen, device=device).masked_fill(~frontier, -1.0)
        e = weight.argmax(dim=1)
        open_[torch.arange(n, device=device), e] = True
        in_tree[torch.arange(n, device=device), ends[e, 0]] = True
        in_tree[torch.arange(n, device=device), ends[e, 1]] = True
    loops = lerp(k.loops[0], k.loops[1], frac)
    open_ |= torch.rand(n, E, generator=gen, device=device) < loops
    # Some openings are doorways: the wall stays, shifted along its line by the door's width, and
    # only where the wall it then overlaps is closed (or the border), so no other opening narrows.
    door = open_ & (torch.rand(n, E, generator=gen, device=device) < k.doorway_share)
    side = (torch.rand(n, E, generator=gen, device=device) < 0.5).long()  # 0: shift towards -, 1: +
    neighbour = torch.where(side.bool(), along[:, 1].expand(n, E), along[:, 0].expand(n, E))
    nb_closed = torch.where(neighbour >= 0, ~open_.gather(1, neighbour.clamp(min=0)), torch.ones_like(door))
    door &= nb_closed
    width = uniform(gen, (n, E), k.doorway_width[0], k.doorway_width[1], device)
    shift = torch.where(side.bool(), width, -width)
    direction = torch.stack([torch.cos(yaw), torch.sin(yaw)], dim=-1)  # along the wall
    pos = centre.expand(n, E, 2) + shift[..., None] * direction
    pos = torch.where(door[..., None], pos, centre.expand(n, E, 2))
    slots = torch.as_tensor(geom.sizes.role("maze"), dtype=torch.long, device=device)
    batch.slot_pos[:, slots] = pos
    batch.slot_yaw[:, slots] = yaw.expand(n, E)
    batch.slot_active[:, slots] = ~open_ | door
    # Start in the first column, goal in the last (direction drawn per world), near cell centres.
    rows = torch.randint(0, k.rows, (n, 2), generator=gen, device=device)
    cy = -k.rows * k.cell / 2 + (rows.float() + 0.5) * k.cell
    cx = -k.cols * k.cell / 2 + 0.5 * k.cell
    j = uniform(gen, (n, 2, 2), -0.1, 0.1, device)
    flip = torch.where(torch.rand(n, generator=gen, device=device) < 0.5, -1.0, 1.0)
    batch.start[:, 0] = flip * cx + j[:, 0, 0]
    batch.start[:, 1] = cy[:, 0] + j[:, 0, 1]
    batch.start[:, 2] = uniform(gen, (n,), -math.pi, math.pi, device)
    batch.goal[:, 0] = -flip * cx + j[:, 1, 0]
    batch.goal[:, 1] = cy[:, 1] + j[:, 1, 1]
