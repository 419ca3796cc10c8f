"""Clutter fields: posts and short wall pieces on a grid, clustered by a cellular automaton, in a
corridor-shaped arena; start and goal in the free strips at opposite ends (``env.worlds.clutter``).
The level sets the grid's occupied share."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from navsim.config import EnvCfg
from navsim.families import lerp
from navsim.families.rooms import RoomBatch, RoomGeometry, uniform


def generate(batch: RoomBatch, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator, frac: float) -> None:
    """Fill ``batch`` (in place) with clutter fields at level fraction ``frac``."""
    c = cfg.worlds.clutter
    device = batch.slot_pos.device
    n = batch.slot_pos.shape[0]
    gx = int((c.length - 2 * c.end_zone) // c.cell)
    gy = int(c.width // c.cell)
    fill = lerp(c.fill[0], c.fill[1], frac)
    occ = torch.rand(n, gy, gx, generator=gen, device=device) < fill
    for _ in range(c.smoothing_steps):
        # Cave-generator growth: a free cell with >= 5 occupied neighbours fills (clusters form).
        k = torch.ones(1, 1, 3, 3, device=device)
        around = F.conv2d(occ.float()[:, None], k, padding=1)[:, 0] - occ.float()
        occ = occ | (around >= 5)
    cx = (torch.arange(gx, device=device) - (gx - 1) / 2) * c.cell
    cy = (torch.arange(gy, device=device) - (gy - 1) / 2) * c.cell
    centers = torch.stack(torch.meshgrid(cx, cy, indexing="xy"), dim=-1).reshape(-1, 2)  # (gy*gx, 2)
    occ = occ.reshape(n, -1)
    C = occ.shape[1]
    piece = torch.rand(n, C, generator=gen, device=device) < c.piece_share
    order = torch.argsort(torch.rand(n, C, generator=gen, device=device), dim=1)
    jitter = uniform(gen, (n, C, 2), -c.jitter, c.jitter, device)
    piece_yaw = (torch.rand(n, C, generator=gen, device=device) < 0.5).float() * (math.pi / 2)
    occ_o = occ.gather(1, order)
    piece_o = piece.gather(1, order)
    pos_o = centers[order] + jitter.gather(1, order[..., None].expand(-1, -1, 2))
    yaw_o = piece_yaw.gather(1, order)
    for role, want in (("post", occ_o & ~piece_o), ("piece", occ_o & piece_o)):
        slots = torch.as_tensor(geom.sizes.role(role), dtype=torch.long, device=device)
        cap = len(slots)
        if cap == 0:
            continue
        rank = torch.cumsum(want.long(), dim=1) - 1
        keep = want & (rank < cap)
        dest = torch.where(keep, rank, torch.full_like(rank, cap))  # cap = a dump column
        pos = torch.zeros(n, cap + 1, 2, device=device).scatter_(1, dest[..., None].expand(-1, -1, 2), pos_o)
        yaw = torch.zeros(n, cap + 1, device=device).scatter_(
            1, dest, yaw_o if role == "piece" else torch.zeros_like(yaw_o)
        )
        act = torch.zeros(n, cap + 1, dtype=torch.bool, device=device).scatter_(1, dest, keep)
        batch.slot_pos[:, slots] = pos[:, :cap]
        batch.slot_yaw[:, slots] = yaw[:, :cap]
        batch.slot_active[:, slots] = act[:, :cap]
    # Start and goal: in the free end zones, at opposite ends (direction drawn per world).
    hx, hy = c.length / 2, c.width / 2
    margin = cfg.robot.radius + cfg.room.clearance
    x_in = uniform(gen, (n, 2), hx - c.end_zone + margin, hx - margin, device)
    y = uniform(gen, (n, 2), -hy + margin, hy - margin, device)
    flip = torch.where(torch.rand(n, generator=gen, device=device) < 0.5, -1.0, 1.0)
    batch.start[:, 0] = -flip * x_in[:, 0]
    batch.start[:, 1] = y[:, 0]
    batch.start[:, 2] = uniform(gen, (n,), -math.pi, math.pi, device)
    batch.goal[:, 0] = flip * x_in[:, 1]
    batch.goal[:, 1] = y[:, 1]
