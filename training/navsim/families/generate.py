"""World families: rooms, clutter fields, corridors and arenas, drawn in batches at a difficulty level.

Every family fills the same :class:`navsim.rooms.RoomBatch` (obstacle slots of the one model,
start, goal, the world's own half extents) from an explicit ``torch.Generator``, vectorised over
worlds. A family takes the slots of its roles (``navsim.robot.SlotSizes.roles``); a world smaller
than the fixed walls is closed by the four ``bound`` slots. The grid planner
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

import torch
import torch.nn.functional as F

from navsim.config import ConfigError, EnvCfg
from navsim.grid_planner import CAP_MARGIN
from navsim.robot import SlotSizes
from navsim.rooms import RoomBatch, RoomGeometry, place_rooms, uniform

FAMILIES = ("rooms", "clutter", "corridors", "arenas")
FAMILY_INDEX = {name: i for i, name in enumerate(FAMILIES)}


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


def maze_edge_count(cols: int, rows: int) -> int:
    """Interior cell edges of a cols x rows maze: one wall slot each."""
    return (cols - 1) * rows + cols * (rows - 1)


def level_fraction(level: int, levels: int) -> float:
    return 1.0 if levels <= 1 else min(max(level, 0), levels - 1) / (levels - 1)


def validate_worlds_cfg(cfg: EnvCfg) -> None:
    w = cfg.worlds
    for name, share in w.families.items():
        if name not in FAMILIES:
            raise ConfigError(f"env.worlds.families: unknown family '{name}' (known: {', '.join(FAMILIES)})")
        if not share >= 0:
            raise ConfigError(f"env.worlds.families.{name} must be >= 0, got {share}")
    if not w.active_families():
        raise ConfigError("env.worlds.families: at least one family needs a share > 0")
    c = w.curriculum
    if c.levels < 1 or not 0 <= c.start_level < c.levels:
        raise ConfigError(
            f"env.worlds.curriculum: need levels >= 1 and 0 <= start_level < levels, got {c.levels}, {c.start_level}"
        )
    if not 0.0 <= w.path_following <= 1.0:
        raise ConfigError(f"env.worlds.path_following must be in [0, 1], got {w.path_following}")
    for key in ("lookahead", "search_window", "grid_resolution"):
        if not getattr(w, key) > 0:
            raise ConfigError(f"env.worlds.{key} must be > 0, got {getattr(w, key)}")
    for key in ("pool_size", "refresh_interval", "path_points"):
        if getattr(w, key) < (2 if key == "path_points" else 1):
            raise ConfigError(f"env.worlds.{key} is too small: {getattr(w, key)}")
    if not 0.0 <= w.path_clearance <= CAP_MARGIN:
        raise ConfigError(f"env.worlds.path_clearance must be in [0, {CAP_MARGIN}] m, got {w.path_clearance}")
    if w.refresh_size < 0 or w.refresh_size > w.pool_size:
        raise ConfigError(f"env.worlds.refresh_size must be in [0, pool_size], got {w.refresh_size}")
    active = w.active_families()
    k = w.corridors
    if "corridors" in active:
        if k.cols < 2 or k.rows < 1 or k.cell - k.wall_thickness <= 2 * cfg.robot.radius + 0.1:
            raise ConfigError(
                "env.worlds.corridors: need cols >= 2, rows >= 1 and corridors wider than the robot + 0.1 m"
            )
        if not k.doorway_width[0] > 2 * cfg.robot.radius or k.doorway_width[1] > k.cell - k.wall_thickness:
            raise ConfigError(
                "env.worlds.corridors.doorway_width must lie between the robot's diameter and the corridor width"
            )
    cl = w.clutter
    if "clutter" in active:
        if cl.length - 2 * cl.end_zone < cl.cell or cl.width < 2 * cl.cell:
            raise ConfigError("env.worlds.clutter: the arena is too small for its grid and end zones")
        if cl.end_zone < 2 * (cfg.robot.radius + cfg.room.clearance) + 0.2:
            raise ConfigError("env.worlds.clutter.end_zone is too short for a start pose with its clearance")
    a = w.arenas
    if "arenas" in active:
        if not 0 <= a.num_obstacles[0] <= a.num_obstacles[1] <= cfg.room.num_cylinder_slots + cfg.room.num_box_slots:
            raise ConfigError("env.worlds.arenas.num_obstacles must fit the rooms' obstacle slots")
        if 2 * (cfg.robot.radius + cfg.room.wall_margin) >= a.size:
            raise ConfigError("env.worlds.arenas.size is too small for the robot and its wall margin")


def _lerp(lo: float, hi: float, t: float) -> float:
    return lo + (hi - lo) * t


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
    frac = level_fraction(level, cfg.worlds.curriculum.levels)
    sizes = geom.sizes
    device = geom.bound_r.device
    half = family_half_extent(cfg, family)
    batch = _empty_batch(n, sizes, half, family, level, device)
    place_bounds(batch, sizes, cfg.room.wall_thickness)
    if family in ("rooms", "arenas"):
        if family == "rooms":
            count, goal = cfg.room.num_obstacles, cfg.room.goal_distance
        else:
            count, goal = cfg.worlds.arenas.num_obstacles, cfg.worlds.arenas.goal_distance
        lo_count = (round(_lerp(count[0] / 4, count[0], frac)), round(_lerp(count[1] / 4, count[1], frac)))
        lo_goal = (goal[0], _lerp(goal[0] + (goal[1] - goal[0]) / 3, goal[1], frac))
        slots = torch.as_tensor(
            list(sizes.role("room_cylinder")) + list(sizes.role("room_box")), dtype=torch.long, device=device
        )
        place_rooms(batch, cfg, geom, gen, half[0], lo_count, lo_goal, slots)
    elif family == "clutter":
        _clutter(batch, cfg, geom, gen, frac)
    elif family == "corridors":
        _corridors(batch, cfg, geom, gen, frac)
    else:
        raise ConfigError(f"unknown world family '{family}'")
    return batch


# ----------------------------------------------------------------------------------------------
# Clutter fields


def _clutter(batch: RoomBatch, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator, frac: float) -> None:
    c = cfg.worlds.clutter
    device = batch.slot_pos.device
    n = batch.slot_pos.shape[0]
    gx = int((c.length - 2 * c.end_zone) // c.cell)
    gy = int(c.width // c.cell)
    fill = _lerp(c.fill[0], c.fill[1], frac)
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


# ----------------------------------------------------------------------------------------------
# Corridors


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


def _corridors(batch: RoomBatch, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator, frac: float) -> None:
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
    loops = _lerp(k.loops[0], k.loops[1], frac)
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
