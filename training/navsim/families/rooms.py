"""The worlds' batch and geometry, and the rooms family: obstacle layouts, start poses and goals.

A room is a set of active obstacle slots with planar poses, a start pose and a goal. Generation
is vectorised over worlds (Python loops run over obstacle slots and a fixed number of rejection
rounds, never over worlds) and draws from an explicit ``torch.Generator``, so a seed fixes every
room. The same code serves training, evaluation (another seed stream) and the ROS 2 sim node.

Distances here are exact 2D signed distances to obstacle and wall surfaces (obstacles are
vertical cylinders and yawed boxes, so the plane is all that matters).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from navsim.config import EnvCfg
from navsim.families import extent_half, family_half_extent, lerp
from navsim.robot import SlotSizes

CANDIDATES = 16  # obstacle candidates per slot
POSE_CANDIDATES = 16  # start / goal candidates per rejection round
ROUNDS = 2


@dataclass
class RoomBatch:
    """Worlds for n worlds. Slots: cylinders first, then boxes (as in the model).

    Besides the obstacles, start and goal, a world records its own half extents (inside its
    walls), its family (:data:`navsim.families.FAMILIES` index) and difficulty level, and a feasible
    path from start to goal (``path[:path_count]``, waypoints) with its length, and the shortest
    feasible path's length (the path itself may keep wider of obstacles). Worlds drawn
    without the planner (:func:`generate_rooms`) carry the straight segment start -> goal.
    """

    slot_pos: torch.Tensor  # (n, S, 2)
    slot_yaw: torch.Tensor  # (n, S)
    slot_active: torch.Tensor  # (n, S) bool
    start: torch.Tensor  # (n, 3) x, y, yaw
    goal: torch.Tensor  # (n, 2)
    half: torch.Tensor | None = None  # (n, 2) half extents inside the world's walls (NaN: not recorded)
    family: torch.Tensor | None = None  # (n,) long
    level: torch.Tensor | None = None  # (n,) long
    path: torch.Tensor | None = None  # (n, K, 2) waypoints, start first, goal last
    path_count: torch.Tensor | None = None  # (n,) long: valid waypoints
    path_length: torch.Tensor | None = None  # (n,) [m] the recorded path's length
    shortest_length: torch.Tensor | None = None  # (n,) [m] the shortest feasible path's (SPL reference)

    def __post_init__(self) -> None:
        n, dev = self.start.shape[0], self.start.device
        if self.half is None:
            self.half = torch.full((n, 2), float("nan"), device=dev)
        if self.family is None:
            self.family = torch.zeros(n, dtype=torch.long, device=dev)
        if self.level is None:
            self.level = torch.zeros(n, dtype=torch.long, device=dev)
        if self.path is None:
            self.set_straight_paths()
        if self.shortest_length is None:
            self.shortest_length = self.path_length.clone()

    def set_straight_paths(self) -> None:
        n, dev = self.start.shape[0], self.start.device
        self.path = torch.stack([self.start[:, :2], self.goal], dim=1)
        self.path_count = torch.full((n,), 2, dtype=torch.long, device=dev)
        self.path_length = torch.linalg.norm(self.goal - self.start[:, :2], dim=-1)
        self.shortest_length = self.path_length.clone()

    def _map(self, fn) -> RoomBatch:
        return RoomBatch(**{f.name: fn(getattr(self, f.name)) for f in fields(self)})

    def index(self, idx: torch.Tensor) -> RoomBatch:
        return self._map(lambda t: t[idx])

    def to(self, device: torch.device | str) -> RoomBatch:
        return self._map(lambda t: t.to(device))

    def where(self, mask: torch.Tensor, other: RoomBatch) -> RoomBatch:
        """Worlds from ``other`` where ``mask`` (n,) is true, else from ``self``."""

        def pick(name: str) -> torch.Tensor:
            a, b = getattr(self, name), getattr(other, name)
            m = mask.view(-1, *([1] * (a.dim() - 1)))
            return torch.where(m, b, a)

        return RoomBatch(**{f.name: pick(f.name) for f in fields(self)})

    def assign(self, idx: torch.Tensor, other: RoomBatch) -> None:
        """Overwrite worlds ``idx`` with ``other``'s (in place)."""
        for f in fields(self):
            getattr(self, f.name)[idx] = getattr(other, f.name)

    @staticmethod
    def cat(batches: list[RoomBatch]) -> RoomBatch:
        return RoomBatch(**{f.name: torch.cat([getattr(b, f.name) for b in batches]) for f in fields(RoomBatch)})


class RoomGeometry:
    """Static per-slot geometry on a device, and signed distances to the room's surfaces."""

    def __init__(self, cfg: EnvCfg, sizes: SlotSizes, device: torch.device | str) -> None:
        self.cfg = cfg
        self.sizes = sizes
        self.half = extent_half(cfg)
        nc = len(sizes.cylinder_radius)
        self.num_slots = sizes.num_slots
        self.is_box = torch.zeros(self.num_slots, dtype=torch.bool, device=device)
        self.is_box[nc:] = True
        half_ext = torch.zeros(self.num_slots, 2, dtype=torch.float32, device=device)
        half_ext[:nc, 0] = torch.as_tensor(sizes.cylinder_radius, dtype=torch.float32)
        half_ext[nc:] = torch.as_tensor(sizes.box_half, dtype=torch.float32)
        self.half_ext = half_ext  # cylinder: (r, 0); box: (hx, hy)
        self.bound_r = torch.as_tensor(sizes.bounding_radius(), dtype=torch.float32, device=device)
        self.bound_r_host = [float(r) for r in sizes.bounding_radius()]  # no device reads while generating
        # Unit vectors towards the +x, -x, +y, -y walls (made once: no host copies per step).
        self.wall_dir = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], device=device)

    def nearest(self, rooms: RoomBatch, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Signed distance from points (n, P, 2) to the nearest surface, and the unit vector
        (world frame) from each point towards that nearest surface point. Returns (n, P), (n, P, 2).
        """
        rel = points[:, :, None, :] - rooms.slot_pos[:, None, :, :]  # (n, P, S, 2)
        c = torch.cos(rooms.slot_yaw)[:, None, :]
        s = torch.sin(rooms.slot_yaw)[:, None, :]
        lx = c * rel[..., 0] + s * rel[..., 1]
        ly = -s * rel[..., 0] + c * rel[..., 1]
        hx = self.half_ext[:, 0]
        hy = self.half_ext[:, 1]
        # boxes: closest point on the box (clamped local coordinates), exact outside distance
        qx = lx.abs() - hx
        qy = ly.abs() - hy
        outside = torch.sqrt(qx.clamp(min=0) ** 2 + qy.clamp(min=0) ** 2)
        box_d = outside + torch.clamp(torch.maximum(qx, qy), max=0.0)
        cx = lx.clamp(-hx, hx) - lx
        cy = ly.clamp(-hy, hy) - ly
        # cylinders
        r = torch.sqrt(lx * lx + ly * ly)
        cyl_d = r - hx
        inv = 1.0 / r.clamp(min=1e-9)
        is_box = self.is_box
        dist = torch.where(is_box, box_d, cyl_d)
        # local direction to the nearest surface point (for a point outside)
        dlx = torch.where(is_box, cx, -lx * inv)
        dly = torch.where(is_box, cy, -ly * inv)
        dist = torch.where(rooms.slot_active[:, None, :], dist, torch.full_like(dist, float("inf")))
        # walls: inner surfaces at +-half
        px, py = points[..., 0], points[..., 1]
        wall_d = torch.stack([self.half - px, self.half + px, self.half - py, self.half + py], dim=-1)
        slot_min, slot_arg = dist.min(dim=-1)
        wall_min, wall_arg = wall_d.min(dim=-1)
        # slot direction: rotate the local vector back to world and normalise
        g = slot_arg[..., None]
        dlx_s = dlx.gather(-1, g)[..., 0]
        dly_s = dly.gather(-1, g)[..., 0]
        cs = c.expand_as(lx).gather(-1, g)[..., 0]
        sn = s.expand_as(lx).gather(-1, g)[..., 0]
        wx = cs * dlx_s - sn * dly_s
        wy = sn * dlx_s + cs * dly_s
        norm = torch.sqrt(wx * wx + wy * wy).clamp(min=1e-9)
        slot_dir = torch.stack([wx / norm, wy / norm], dim=-1)
        use_wall = wall_min < slot_min
        best = torch.where(use_wall, wall_min, slot_min)
        direction = torch.where(use_wall[..., None], self.wall_dir[wall_arg], slot_dir)
        return best, direction

    def clearance(self, rooms: RoomBatch, points: torch.Tensor) -> torch.Tensor:
        """Signed distance only (cheaper than :meth:`nearest`): (n, P, 2) -> (n, P)."""
        rel = points[:, :, None, :] - rooms.slot_pos[:, None, :, :]
        c = torch.cos(rooms.slot_yaw)[:, None, :]
        s = torch.sin(rooms.slot_yaw)[:, None, :]
        lx = (c * rel[..., 0] + s * rel[..., 1]).abs()
        ly = (-s * rel[..., 0] + c * rel[..., 1]).abs()
        hx, hy = self.half_ext[:, 0], self.half_ext[:, 1]
        qx, qy = lx - hx, ly - hy
        box_d = torch.sqrt(qx.clamp(min=0) ** 2 + qy.clamp(min=0) ** 2) + torch.clamp(torch.maximum(qx, qy), max=0.0)
        cyl_d = torch.sqrt(lx * lx + ly * ly) - hx
        dist = torch.where(self.is_box, box_d, cyl_d)
        dist = dist.masked_fill(~rooms.slot_active[:, None, :], float("inf")).amin(dim=-1)
        wall = self.half - points.abs().amax(dim=-1)
        return torch.minimum(dist, wall)


def uniform(gen: torch.Generator, shape: tuple[int, ...], lo: float, hi: float, device: torch.device) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(shape, generator=gen, device=device)


def _first_valid(cand: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick per row the first valid candidate (n, C, k) -> (n, k), and whether any was valid."""
    any_valid = valid.any(dim=1)
    idx = torch.argmax(valid.to(torch.int8), dim=1)  # first True (0 when none)
    picked = cand.gather(1, idx[:, None, None].expand(-1, 1, cand.shape[-1]))[:, 0]
    return picked, any_valid


def generate_rooms(n: int, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator) -> RoomBatch:
    """Draw ``n`` fresh rooms of ``env.room`` over every obstacle slot, without the planner (the
    worlds of a config that draws from no planned pool, :func:`navsim.families.planned`)."""
    device = geom.bound_r.device
    S = geom.num_slots
    half = cfg.room.size / 2.0
    batch = RoomBatch(
        torch.zeros(n, S, 2, device=device),
        torch.zeros(n, S, device=device),
        torch.zeros(n, S, dtype=torch.bool, device=device),
        torch.zeros(n, 3, device=device),
        torch.zeros(n, 2, device=device),
        torch.full((n, 2), half, device=device),
    )
    slots = torch.arange(S, device=device)
    place_rooms(batch, cfg, geom, gen, half, cfg.room.num_obstacles, cfg.room.goal_distance, slots)
    batch.set_straight_paths()
    return batch


def place_rooms(
    batch: RoomBatch,
    cfg: EnvCfg,
    geom: RoomGeometry,
    gen: torch.Generator,
    half: float,
    num_obstacles: tuple[int, int],
    goal_distance: tuple[float, float],
    slots: torch.Tensor,
) -> None:
    """Place rooms' obstacles in ``slots`` of a square of half side ``half``, then start and goal
    (clear of every active slot of ``batch``, bounds included). Writes ``batch`` in place."""
    device = geom.bound_r.device
    room = cfg.room
    n = batch.start.shape[0]
    S = len(slots)
    is_box = geom.is_box[slots]
    bound_r = geom.bound_r[slots]
    bound_host = [geom.bound_r_host[int(j)] for j in slots.tolist()]
    lo_n, hi_n = num_obstacles
    count = torch.randint(lo_n, hi_n + 1, (n,), generator=gen, device=device)
    rank = torch.argsort(torch.rand(n, S, generator=gen, device=device), dim=1).argsort(dim=1)
    wanted = rank < count[:, None]
    pos = torch.zeros(n, S, 2, device=device)
    yaw = uniform(gen, (n, S), -torch.pi, torch.pi, device) * is_box
    active = torch.zeros(n, S, dtype=torch.bool, device=device)
    for j in range(S):
        rj = bound_host[j]
        lim = half - room.wall_margin - rj
        cand = uniform(gen, (n, CANDIDATES, 2), -lim, lim, device)
        gap = (cand[:, :, None, :] - pos[:, None, :, :]).norm(dim=-1)  # (n, C, S)
        need = bound_r[None, None, :] + rj + room.obstacle_gap
        ok = ((gap > need) | ~active[:, None, :]).all(dim=-1)
        picked, any_ok = _first_valid(cand, ok)
        place = wanted[:, j] & any_ok
        pos[:, j] = torch.where(place[:, None], picked, pos[:, j])
        active[:, j] = place
    batch.slot_pos[:, slots] = pos
    batch.slot_yaw[:, slots] = yaw
    batch.slot_active[:, slots] = active
    rooms = batch

    radius = cfg.robot.radius
    need_free = radius + room.clearance
    lim = half - room.wall_margin - radius
    start = torch.zeros(n, 2, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    for _ in range(ROUNDS):
        cand = uniform(gen, (n, POSE_CANDIDATES, 2), -lim, lim, device)
        ok = geom.clearance(rooms, cand) > need_free
        picked, any_ok = _first_valid(cand, ok)
        take = any_ok & ~done
        start = torch.where(take[:, None], picked, start)
        done = done | any_ok
    goal = torch.zeros(n, 2, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    dlo, dhi = goal_distance
    for _ in range(ROUNDS + 1):
        d = uniform(gen, (n, POSE_CANDIDATES), dlo, dhi, device)
        phi = uniform(gen, (n, POSE_CANDIDATES), -torch.pi, torch.pi, device)
        cand = start[:, None, :] + torch.stack([d * torch.cos(phi), d * torch.sin(phi)], dim=-1)
        inside = (cand.abs() <= lim).all(dim=-1)
        ok = inside & (geom.clearance(rooms, cand) > need_free)
        picked, any_ok = _first_valid(cand, ok)
        take = any_ok & ~done
        goal = torch.where(take[:, None], picked, goal)
        done = done | any_ok
    # A world without any valid goal (vanishingly rare) gets the nearest in-room point ahead.
    fallback = torch.stack([start[:, 0] + dlo, start[:, 1]], dim=-1).clamp(-lim, lim)
    goal = torch.where(done[:, None], goal, fallback)
    start_yaw = uniform(gen, (n, 1), -torch.pi, torch.pi, device)
    rooms.start = torch.cat([start, start_yaw], dim=1)
    rooms.goal = goal


def place_level_rooms(
    batch: RoomBatch,
    cfg: EnvCfg,
    geom: RoomGeometry,
    gen: torch.Generator,
    family: str,
    frac: float,
    num_obstacles: tuple[int, int],
    goal_distance: tuple[float, float],
) -> None:
    """Rooms' obstacles, start and goal in ``batch`` at level fraction ``frac`` of the configured
    ranges: from a quarter of the obstacle count and the first third of the goal range up to them."""
    count, goal = num_obstacles, goal_distance
    lo_count = (round(lerp(count[0] / 4, count[0], frac)), round(lerp(count[1] / 4, count[1], frac)))
    lo_goal = (goal[0], lerp(goal[0] + (goal[1] - goal[0]) / 3, goal[1], frac))
    sizes = geom.sizes
    slots = torch.as_tensor(
        list(sizes.role("room_cylinder")) + list(sizes.role("room_box")), dtype=torch.long, device=geom.bound_r.device
    )
    half = family_half_extent(cfg, family)[0]
    place_rooms(batch, cfg, geom, gen, half, lo_count, lo_goal, slots)


def generate(batch: RoomBatch, cfg: EnvCfg, geom: RoomGeometry, gen: torch.Generator, frac: float) -> None:
    """Fill ``batch`` (in place) with rooms of ``env.room`` at level fraction ``frac``."""
    place_level_rooms(batch, cfg, geom, gen, "rooms", frac, cfg.room.num_obstacles, cfg.room.goal_distance)
