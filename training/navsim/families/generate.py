"""A batch of worlds of any family at a difficulty level (the families' generators in
:mod:`navsim.families.rooms`, :mod:`~navsim.families.clutter`, :mod:`~navsim.families.corridors`
and :mod:`~navsim.families.arenas`), closed by the ``bound`` slots where it is smaller than the
fixed walls."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from navsim.config import ConfigError, EnvCfg
from navsim.families import (
    FAMILY_INDEX,
    arenas,
    clutter,
    corridors,
    family_half_extent,
    level_fraction,
    rooms,
)
from navsim.families.rooms import RoomBatch, RoomGeometry
from navsim.robot import SlotSizes

Generator = Callable[[RoomBatch, EnvCfg, RoomGeometry, torch.Generator, float], None]
GENERATORS: dict[str, Generator] = {
    "rooms": rooms.generate,
    "clutter": clutter.generate,
    "corridors": corridors.generate,
    "arenas": arenas.generate,
}
"""Each family's generator: fills a batch in place at a level fraction in [0, 1]."""


def _empty_batch(n: int, sizes: SlotSizes, half: tuple[float, float], family: str, level: int, device) -> RoomBatch:
    S = sizes.num_slots
    return RoomBatch(
        slot_pos=torch.zeros(n, S, 2, device=device),
        slot_yaw=torch.zeros(n, S, device=device),
        slot_active=torch.zeros(n, S, dtype=torch.bool, device=device),
        start=torch.zeros(n, 3, device=device),
        goal=torch.zeros(n, 2, device=device),
        half=torch.tensor([half], dtype=torch.float32, device=device).expand(n, 2).clone(),
        family=torch.full((n,), FAMILY_INDEX[family], dtype=torch.long, device=device),
        level=torch.full((n,), level, dtype=torch.long, device=device),
    )


def place_bounds(batch: RoomBatch, sizes: SlotSizes, wall_thickness: float) -> None:
    """Close each world at its half extents with the four ``bound`` slots (no-op without them)."""
    idx = torch.as_tensor(sizes.role("bound"), device=batch.slot_pos.device)
    if idx.numel() == 0:
        return
    hx, hy = batch.half[:, 0], batch.half[:, 1]
    t = wall_thickness / 2.0
    zero = torch.zeros_like(hx)
    xs = torch.stack([hx + t, -hx - t, zero, zero], dim=1)
    ys = torch.stack([zero, zero, hy + t, -hy - t], dim=1)
    yaw = torch.tensor([math.pi / 2, math.pi / 2, 0.0, 0.0], device=hx.device).expand(len(hx), 4)
    batch.slot_pos[:, idx] = torch.stack([xs, ys], dim=-1)
    batch.slot_yaw[:, idx] = yaw
    batch.slot_active[:, idx] = True


def generate_family(
    family: str, level: int, n: int, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator
) -> RoomBatch:
    """``n`` fresh worlds of ``family`` at ``level`` (not yet planned: see navsim.grid_planner)."""
    if family not in GENERATORS:
        raise ConfigError(f"unknown world family '{family}'")
    sizes = geom.sizes
    batch = _empty_batch(n, sizes, family_half_extent(cfg, family), family, level, geom.bound_r.device)
    place_bounds(batch, sizes, cfg.room.wall_thickness)
    GENERATORS[family](batch, cfg, geom, gen, level_fraction(level, cfg.worlds.curriculum.levels))
    return batch
