"""Arenas: the rooms' obstacles in a larger square, with long goals (``env.worlds.arenas``)."""

from __future__ import annotations

import torch

from navsim.config import EnvCfg
from navsim.families.rooms import RoomBatch, RoomGeometry, place_level_rooms


def generate(batch: RoomBatch, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator, frac: float) -> None:
    """Fill ``batch`` (in place) with arenas at level fraction ``frac``."""
    a = cfg.worlds.arenas
    place_level_rooms(batch, cfg, geom, gen, "arenas", frac, a.num_obstacles, a.goal_distance)
