"""World families: rooms, clutter fields, corridors and arenas, drawn in batches at a difficulty level.

This package's top level is the catalog: which families a config draws from, their extents and
their levels, pure functions of the config (it imports nothing but the schema, so the model
builder and the planner may use it). The generators live in its modules:

- :mod:`navsim.families.rooms`: the worlds' batch (:class:`~navsim.families.rooms.RoomBatch`), the
  signed distances to their surfaces (:class:`~navsim.families.rooms.RoomGeometry`) and the rooms
  of ``env.room``;
- :mod:`navsim.families.clutter`, :mod:`navsim.families.corridors`, :mod:`navsim.families.arenas`:
  the other families;
- :mod:`navsim.families.generate`: a batch of any family at a level.

Every family fills the same :class:`~navsim.families.rooms.RoomBatch` (obstacle slots of the one
model, start, goal, the world's own half extents) from an explicit ``torch.Generator``, vectorised
over worlds. A family takes the slots of its roles (``navsim.robot.SlotSizes.roles``); a world
smaller than the fixed walls is closed by the four ``bound`` slots. The grid planner
(:mod:`navsim.grid_planner`) then certifies each world and records its shortest path; the world
pool (:mod:`navsim.world_pool`) redraws the ones it refuses.

Levels run from 0 (easiest) to ``levels - 1`` (the family as configured); :func:`level_fraction`
maps a level onto [0, 1] and each family interpolates its difficulty knobs with it:

- ``rooms`` (``env.room``): obstacle count and goal distance, from a quarter of the configured
  count and the first third of the goal range up to the configured ranges;
- ``clutter`` (``env.worlds.clutter``): the grid's occupied share;
- ``corridors`` (``env.worlds.corridors``): how many walls beyond the spanning maze are opened
  (many loops = few dead ends at level 0; nearly a perfect maze at the top);
- ``arenas`` (``env.worlds.arenas``): obstacle count and goal distance, as rooms.
"""

from __future__ import annotations

import math
from typing import Any

from navsim.config import ConfigError, EnvCfg, WorldsCfg

FAMILIES = ("rooms", "clutter", "corridors", "arenas")
FAMILY_INDEX = {name: i for i, name in enumerate(FAMILIES)}


def active_families(worlds: WorldsCfg) -> list[str]:
    """Families with a share > 0, in registry order."""
    return [f for f in FAMILIES if worlds.families.get(f, 0.0) > 0]


def planned(worlds: WorldsCfg) -> bool:
    """True when worlds come from planned pools: anything but the rooms of ``env.room`` alone,
    without curriculum and without path following."""
    return active_families(worlds) != ["rooms"] or worlds.curriculum.enabled or worlds.path_following > 0


def family_half_extent(cfg: EnvCfg, family: str) -> tuple[float, float]:
    """The (x, y) half extents of a family's worlds, inside their walls."""
    w = cfg.worlds
    if family == "rooms":
        return (cfg.room.size / 2.0, cfg.room.size / 2.0)
    if family == "clutter":
        return (w.clutter.length / 2.0, w.clutter.width / 2.0)
    if family == "corridors":
        return (w.corridors.cols * w.corridors.cell / 2.0, w.corridors.rows * w.corridors.cell / 2.0)
    if family == "arenas":
        return (w.arenas.size / 2.0, w.arenas.size / 2.0)
    raise ConfigError(f"unknown world family '{family}' (known: {', '.join(FAMILIES)})")


def extent_half(cfg: EnvCfg) -> float:
    """Half side of the square inside the fixed walls: the rooms' size, or the largest family's."""
    sizes = [cfg.room.size / 2.0]
    sizes += [max(family_half_extent(cfg, f)) for f in active_families(cfg.worlds)]
    return max(sizes)


def world_half(rooms: Any, world: int, cfg: EnvCfg) -> tuple[float, float]:
    """The (x, y) half extents inside world ``world``'s walls: its own (``RoomBatch.half``), or the
    fixed walls' (:func:`extent_half`) where it has none recorded (NaN)."""
    fallback = extent_half(cfg)
    hx, hy = (float(v) for v in rooms.half[world])
    return (hx if math.isfinite(hx) else fallback, hy if math.isfinite(hy) else fallback)


def maze_edge_count(cols: int, rows: int) -> int:
    """Interior cell edges of a cols x rows maze: one wall slot each."""
    return (cols - 1) * rows + cols * (rows - 1)


def level_fraction(level: int, levels: int) -> float:
    """Level ``level`` of ``levels`` on [0, 1] (1: the top level, the family as configured)."""
    return 1.0 if levels <= 1 else min(max(level, 0), levels - 1) / (levels - 1)


def lerp(lo: float, hi: float, t: float) -> float:
    return lo + (hi - lo) * t
