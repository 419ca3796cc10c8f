"""Where the batched env's worlds come from: one object per source, with one interface.

:class:`RoomSource` serves the rooms of ``env.room`` drawn without the planner (a config that
draws from no planned pool, :func:`navsim.families.planned`); :class:`PlannedWorldSource` serves
planned worlds of the configured families (:mod:`navsim.world_pool`) with the curriculum. The env
asks a source for

- :attr:`~WorldSource.first`: the worlds it starts with;
- :meth:`~WorldSource.take`: worlds for the worlds that finished (auto-reset), without a host sync;
- :meth:`~WorldSource.end_step`: its own bookkeeping after a step (levels, pool refreshes);
- :meth:`~WorldSource.new_rooms`: ``n`` fresh worlds from a given generator (evaluation).

Every draw comes from the generator given at construction (the env's), in the order the env
makes its calls, so a seed fixes every world.
"""

from __future__ import annotations

from typing import Protocol

import torch

from navsim.config import EnvCfg
from navsim.families import active_families
from navsim.families.generate import generate_family
from navsim.families.rooms import RoomBatch, RoomGeometry, generate_rooms
from navsim.world_pool import Curriculum, WorldPool, planned_worlds


class WorldSource(Protocol):
    planned: bool
    curriculum: Curriculum | None
    first: RoomBatch

    def take(self, mask: torch.Tensor) -> RoomBatch:
        """Worlds for the worlds in ``mask`` (the others' entries are unused)."""
        ...

    def end_step(
        self, dones: torch.Tensor, success: torch.Tensor, auto_reset: bool, log: dict[str, torch.Tensor] | None
    ) -> None:
        """After a step: the source's bookkeeping; its statistics go into ``log`` when given."""
        ...

    def new_rooms(self, n: int, gen: torch.Generator) -> RoomBatch:
        """``n`` fresh worlds from ``gen``."""
        ...


class RoomSource:
    """Rooms of ``env.room``: the first ``n``, then a ring of spare rooms that finished worlds take
    in turn; a slice of the ring is regenerated every time it is drawn from, sized well above the
    usual completion rate (~1/30 of the worlds per step)."""

    planned = False
    curriculum = None

    def __init__(self, cfg: EnvCfg, geometry: RoomGeometry, n: int, gen: torch.Generator) -> None:
        self.cfg = cfg
        self.geometry = geometry
        self.gen = gen
        self.device = geometry.bound_r.device
        self.spare_size = max(64, n // 2)
        self.spare_refill = max(16, n // 16)
        self._spare_ptr = 0
        self._spare_head = torch.zeros((), dtype=torch.long, device=self.device)
        self.first = generate_rooms(n, cfg, geometry, gen)
        self.spare = generate_rooms(self.spare_size, cfg, geometry, gen)

    def take(self, mask: torch.Tensor) -> RoomBatch:
        """Rooms for the worlds in ``mask`` from the spare ring (no host sync), then a refill."""
        order = torch.cumsum(mask.long(), dim=0) - 1
        idx = (self._spare_head + order) % self.spare_size
        self._spare_head = (self._spare_head + mask.long().sum()) % self.spare_size
        taken = self.spare.index(idx)
        refill = (torch.arange(self.spare_refill, device=self.device) + self._spare_ptr) % self.spare_size
        self._spare_ptr = (self._spare_ptr + self.spare_refill) % self.spare_size
        self.spare.assign(refill, generate_rooms(self.spare_refill, self.cfg, self.geometry, self.gen))
        return taken

    def end_step(
        self, dones: torch.Tensor, success: torch.Tensor, auto_reset: bool, log: dict[str, torch.Tensor] | None
    ) -> None:
        """Nothing to keep: rooms have no levels and no pool."""

    def new_rooms(self, n: int, gen: torch.Generator) -> RoomBatch:
        return generate_rooms(n, self.cfg, self.geometry, gen)


class PlannedWorldSource:
    """Planned worlds of the configured families: each world keeps its family and level
    (:class:`~navsim.world_pool.Curriculum`) and takes a pool world of them
    (:class:`~navsim.world_pool.WorldPool`), one pool refreshed every ``env.worlds.refresh_interval``
    steps. Without the pool (``world_pool=False``: evaluation, which brings its own worlds) the
    first worlds are unplanned placeholders of the first family, and :meth:`take` refuses."""

    planned = True

    def __init__(
        self, cfg: EnvCfg, geometry: RoomGeometry, n: int, gen: torch.Generator, world_pool: bool = True
    ) -> None:
        self.cfg = cfg
        self.geometry = geometry
        self.gen = gen
        w = cfg.worlds
        self.curriculum = Curriculum(cfg, n, geometry.bound_r.device, gen)
        self.pool: WorldPool | None = None
        self._steps = 0
        if world_pool:
            self.pool = WorldPool(cfg, geometry, gen)
            self.first = self.pool.draw(self.curriculum.slot, self.curriculum.level, gen)
        else:
            family = active_families(w)[0]
            self.first = generate_family(family, w.curriculum.levels - 1, n, cfg, geometry, gen)

    def take(self, mask: torch.Tensor) -> RoomBatch:
        """A pool world of each world's family and level (drawn for every world; the env keeps
        those of ``mask``)."""
        if self.pool is None:
            raise RuntimeError("auto-reset of planned worlds needs the world pool (NavEnv(world_pool=True))")
        return self.pool.draw(self.curriculum.slot, self.curriculum.level, self.gen)

    def end_step(
        self, dones: torch.Tensor, success: torch.Tensor, auto_reset: bool, log: dict[str, torch.Tensor] | None
    ) -> None:
        """Levels move with the outcomes (auto-reset only); every ``refresh_interval`` steps one
        pool has ``refresh_size`` of its worlds redrawn."""
        if auto_reset:
            self.curriculum.update(dones, success)
            if log is not None:
                log.update(self.curriculum.log())
        if self.pool is not None:
            self._steps += 1
            if self._steps % self.cfg.worlds.refresh_interval == 0:
                self.pool.refresh(self.cfg.worlds.refresh_size)

    def new_rooms(self, n: int, gen: torch.Generator) -> RoomBatch:
        """Planned worlds of the configured families at their top level, in family order; the counts
        follow the shares, largest remainders rounded up."""
        w = self.cfg.worlds
        fams = active_families(w)
        shares = [w.families[f] for f in fams]
        exact = [n * s / sum(shares) for s in shares]
        counts = [int(e) for e in exact]
        by_remainder = sorted(range(len(fams)), key=lambda i: counts[i] - exact[i])  # largest remainder first
        for i in by_remainder[: n - sum(counts)]:
            counts[i] += 1
        top = w.curriculum.levels - 1
        parts = [
            planned_worlds(f, top, c, self.cfg, self.geometry, gen)[0] for f, c in zip(fams, counts, strict=True) if c
        ]
        return RoomBatch.cat(parts)
