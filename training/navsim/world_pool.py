"""Planned worlds: drawing certified worlds of a family and level, and the pools training uses.

:func:`planned_worlds` draws worlds of one family and level (:mod:`navsim.families`), plans each
(:mod:`navsim.grid_planner`) and redraws the ones the planner refuses until every world is
feasible for the robot; the result carries its path and the path's length. Feasible means
passable at :func:`certified_clearance`: by default the clearance the collision guard lets the
robot pass at, so that no world asks for a gap the guard refuses.

:class:`WorldPool` holds ``env.worlds.pool_size`` planned worlds per family and level on the
simulation device. A world that resets takes a random one of its family and level with one
gather (no host sync, no planning in ``step()``); every ``refresh_interval`` steps one
(family, level) pool has ``refresh_size`` of its worlds redrawn, round robin, so training keeps
seeing new worlds. The curriculum (:class:`Curriculum`) keeps each world's family (drawn once by
the configured shares) and level (up one on success, down one on any failure).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from navsim.config import EnvCfg
from navsim.contract_objects import guard_geometry
from navsim.families import FAMILIES, FAMILY_INDEX, active_families
from navsim.families.generate import generate_family
from navsim.families.rooms import RoomBatch, RoomGeometry
from navsim.grid_planner import Grid, PlanResult, plan_paths

MAX_ROUNDS = 50
MIN_DRAW = 16
CERTIFY = ("guard", "radius")
"""``env.worlds.certify``: the clearance a world must leave the robot to count as feasible."""


class InfeasibleWorlds(RuntimeError):
    """A family's configuration keeps producing worlds without a path for the robot."""


def certified_clearance(cfg: EnvCfg) -> float:
    """[m] How far from every surface a world must let the robot's centre pass to be feasible, and
    what its recorded path keeps (``env.worlds.certify``): ``guard``, the passing clearance of
    ``env.guard`` on the policy's beams (:meth:`navcontract.guard.GuardRule.passing_clearance`: the
    robot drives past a return no closer without the guard stopping it; the node applies the same
    rule, so this holds whether or not the simulator's guard is on); ``radius``, the robot's radius."""
    if cfg.worlds.certify == "radius":
        return float(cfg.robot.radius)
    return guard_geometry(cfg).passing_clearance(int(cfg.lidar.num_beams))


def plan_worlds(batch: RoomBatch, cfg: EnvCfg, geom: RoomGeometry, radius: float | None = None) -> PlanResult:
    """The grid planner on a batch of one family's worlds (their half extents are the grid's), for
    a robot that needs ``radius`` from every surface (default: :func:`certified_clearance`)."""
    hx, hy = (float(v) for v in batch.half[0])
    grid = Grid(hx, hy, cfg.worlds.grid_resolution)
    with _one_thread():  # small tensor work: extra threads only contend (and stall on busy cores)
        return plan_paths(
            batch.slot_pos,
            batch.slot_yaw,
            batch.slot_active,
            batch.start,
            batch.goal,
            geom.sizes,
            grid,
            certified_clearance(cfg) if radius is None else float(radius),
            cfg.worlds.path_points,
            cfg.worlds.path_clearance,
        )


def planned_worlds(
    family: str, level: int, n: int, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator
) -> tuple[RoomBatch, int]:
    """``n`` feasible worlds of ``family`` at ``level`` with their planned paths, and how many
    draws the planner refused on the way."""
    device = geom.bound_r.device
    out: RoomBatch | None = None
    need = torch.ones(n, dtype=torch.bool)
    refused = 0
    for round_ in range(MAX_ROUNDS):
        todo = int(need.sum())
        if todo == 0:
            break
        # After a refusal, draw at least MIN_DRAW: a dense family may refuse most of its draws.
        batch = generate_family(family, level, todo if round_ == 0 else max(todo, MIN_DRAW), cfg, geom, gen)
        plan = plan_worlds(batch, cfg, geom)
        batch.path = torch.as_tensor(plan.path, device=device)
        batch.path_count = torch.as_tensor(plan.count, device=device)
        batch.path_length = torch.as_tensor(plan.length, dtype=torch.float32, device=device)
        batch.shortest_length = torch.as_tensor(plan.shortest, dtype=torch.float32, device=device)
        ok = torch.as_tensor(plan.feasible)
        refused += int((~ok).sum())
        if out is None:
            out = batch.index(torch.zeros(n, dtype=torch.long, device=device))
        slots = need.nonzero()[:, 0]
        take = ok.nonzero()[:, 0]
        k = min(len(take), len(slots))
        if k:
            out.assign(slots[:k].to(device), batch.index(take[:k].to(device)))
            need[slots[:k]] = False
    if bool(need.any()):
        raise InfeasibleWorlds(
            f"env.worlds.{family} (level {level}): {int(need.sum())} of {n} worlds still infeasible after "
            f"{MAX_ROUNDS} draws each; make the family easier (fewer obstacles, wider passages)"
        )
    return out, refused


@contextmanager
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Curriculum:
    """Per-world family (fixed, drawn by share) and level (moved by outcomes)."""

    def __init__(self, cfg: EnvCfg, n: int, device: torch.device, gen: torch.Generator) -> None:
        w = cfg.worlds
        self.families = active_families(w)
        self.levels = w.curriculum.levels
        self.enabled = w.curriculum.enabled
        shares = torch.tensor([w.families[f] for f in self.families], dtype=torch.float32)
        pick = torch.multinomial(shares / shares.sum(), n, replacement=True, generator=_cpu_gen(gen)).to(device)
        self.slot = pick  # index into self.families
        self.family = torch.tensor([FAMILY_INDEX[f] for f in self.families], device=device)[pick]
        start = w.curriculum.start_level if self.enabled else self.levels - 1
        self.level = torch.full((n,), start, dtype=torch.long, device=device)

    def update(self, done: torch.Tensor, success: torch.Tensor) -> None:
        """Up one level on success, down one on any other ending (clamped)."""
        if not self.enabled:
            return
        step = torch.where(success, 1, -1) * done.long()
        self.level = (self.level + step).clamp(0, self.levels - 1)

    def state(self) -> dict[str, list[int]]:
        """How many worlds of each family are at each level: what a checkpoint keeps of the
        curriculum (a resumed run may have another number of worlds)."""
        return {
            name: torch.bincount(self.level[self.slot == i], minlength=self.levels).tolist()
            for i, name in enumerate(self.families)
        }

    def restore(self, state: dict[str, list[int]], gen: torch.Generator) -> list[str]:
        """Draw each world's level from its family's saved level counts (:meth:`state`); families
        the state lacks, or saved with another number of levels, keep their levels. Returns the
        restored families. Does nothing when the curriculum is off."""
        restored: list[str] = []
        if not self.enabled:
            return restored
        for i, name in enumerate(self.families):
            counts = state.get(name)
            if counts is None or len(counts) != self.levels or sum(counts) <= 0:
                continue
            mine = (self.slot == i).nonzero()[:, 0]
            if len(mine) == 0:
                continue
            weights = torch.tensor(counts, dtype=torch.float32)
            drawn = torch.multinomial(weights, len(mine), replacement=True, generator=_cpu_gen(gen))
            self.level[mine] = drawn.to(self.level.device)
            restored.append(name)
        return restored

    def log(self) -> dict[str, torch.Tensor]:
        """Level statistics for TensorBoard: mean level per family and the share at each level."""
        out: dict[str, torch.Tensor] = {}
        lv = self.level.float()
        for i, name in enumerate(self.families):
            mine = self.slot == i
            out[f"Curriculum/mean_level_{name}"] = (lv * mine).sum() / mine.sum().clamp(min=1)
        for k in range(self.levels):
            out[f"Curriculum/share_level_{k}"] = (self.level == k).float().mean()
        return out


def _cpu_gen(gen: torch.Generator) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen, device=gen.device).item()))
    return g


class WorldPool:
    """Planned worlds per (family, level), on the simulation device."""

    def __init__(self, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator, verbose: bool = True) -> None:
        self.cfg = cfg
        self.geom = geom
        self.gen = gen
        w = cfg.worlds
        self.families = active_families(w)
        self.levels = w.curriculum.levels if w.curriculum.enabled else 1
        self.top = w.curriculum.levels - 1
        self.size = w.pool_size
        self.refused = 0
        t0 = time.perf_counter()
        parts = []
        for f in self.families:
            for lv in range(self.levels):
                batch, refused = planned_worlds(f, self._level(lv), self.size, cfg, geom, gen)
                self.refused += refused
                parts.append(batch)
        self.worlds = RoomBatch.cat(parts)
        self._next = 0
        if verbose:
            total = len(self.families) * self.levels * self.size
            print(
                f"[worlds] {total} planned worlds ({', '.join(self.families)}; {self.levels} level(s) x "
                f"{self.size}) in {time.perf_counter() - t0:.1f} s, {self.refused} infeasible draws redrawn",
                flush=True,
            )

    def _level(self, lv: int) -> int:
        """Pool level index -> the family level (the top one when the curriculum is off)."""
        return lv if self.levels > 1 else self.top

    def pool_index(self, family_slot: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        lv = level if self.levels > 1 else torch.zeros_like(level)
        return family_slot * self.levels + lv

    def draw(self, family_slot: torch.Tensor, level: torch.Tensor, gen: torch.Generator) -> RoomBatch:
        """One world per entry: a random pool world of that family slot and level."""
        pick = torch.randint(0, self.size, family_slot.shape, generator=gen, device=family_slot.device)
        return self.worlds.index(self.pool_index(family_slot, level) * self.size + pick)

    def refresh(self, count: int) -> None:
        """Redraw ``count`` worlds of the next (family, level) pool."""
        if count <= 0:
            return
        p = self._next % (len(self.families) * self.levels)
        self._next += 1
        f, lv = self.families[p // self.levels], p % self.levels
        fresh, refused = planned_worlds(f, self._level(lv), count, self.cfg, self.geom, self.gen)
        self.refused += refused
        start = int(torch.randint(0, self.size - count + 1, (1,), generator=self.gen, device=self.gen.device))
        idx = torch.arange(count, device=fresh.start.device) + p * self.size + start
        self.worlds.assign(idx, fresh)


__all__ = [
    "CERTIFY",
    "FAMILIES",
    "Curriculum",
    "InfeasibleWorlds",
    "WorldPool",
    "certified_clearance",
    "plan_worlds",
    "planned_worlds",
]
