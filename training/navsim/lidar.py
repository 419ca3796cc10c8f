"""The planar lidar: ``num_beams`` sector readings per world, cast once per control step.

Beam ``i`` points at ``angle_min + i * increment`` in the body frame (0 = forward, counter-
clockwise positive), ``angle_min = -pi`` and ``increment = 2 pi / num_beams``: a 360 degree scan
as a ROS LaserScan describes it. The robot side owns that layout (``navcontract.scan.BeamLayout``);
the simulator takes its beams from there. Each beam reads the robot's scan rule
(``navcontract.scan.resample_scan``): the *minimum* over its sector, rendered with
``env.lidar.rays_per_beam`` sub-rays per sector (``navsim.sectors``: 1 = the sector centre only,
the lidar's readings before the sector-minimum rule; K >= 2 = K rays from edge to edge). Sectors outside
``env.lidar.fov_deg`` are filled by the runtime's fill rule (``navsim.sectors.FovFill``). Rays
leave the robot centre at LIDAR_HEIGHT and ignore the robot's own geoms. No return within
``max_range`` reads ``max_range``.

The rays are cast by a Warp kernel specialised to this world: every collidable geom is a vertical
cylinder or a box rotated about z (walls, obstacles), and the rays are horizontal, so each
ray-geom test is exact 2D geometry (ray-circle, ray-oriented-rectangle) plus a height check.
The kernel reads the geoms' world poses from MuJoCo Warp's ``geom_xpos`` / ``geom_xmat`` (so it
sees each world's own layout) and their sizes from the model, testing only the geoms a first kernel
lists as meeting the scan plane in that world (the obstacle slots a world leaves unused are parked
below it); a second kernel takes each sector's minimum
over its sub-rays. It agrees with C MuJoCo's ``mj_multiRay`` (``navsim.sim_world``, see
tests/test_lidar.py) and with an independent 2D ray caster through the robot's resampling
(tests/test_lidar_parity.py); on this 2-core CPU the one-ray kernel cast 67k scans/s at 1024
worlds where the general ``mujoco_warp.rays`` cast 3.5k/s (side by side in one process, on a
loaded machine: a ratio, not absolute speeds). ``nav-benchmark-sim --rays-per-beam ...`` measures
the cost and the accuracy of each sub-ray count.
"""

from __future__ import annotations

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from navcontract.scan import BeamLayout
from navsim.robot import LIDAR_HEIGHT
from navsim.sectors import FovFill, SectorRays

GEOM_CYLINDER = int(mujoco.mjtGeom.mjGEOM_CYLINDER)
GEOM_BOX = int(mujoco.mjtGeom.mjGEOM_BOX)


@wp.func
def _crosses_scan_plane(kind: int, size: wp.vec3, center: wp.vec3, height: float) -> bool:
    """Whether a vertical cylinder (kind 0: size = radius, half-height) or a box (kind 1: half
    extents) centred at ``center`` meets the horizontal scan plane at ``height``."""
    half_h = size[1]
    if kind == 1:
        half_h = size[2]
    return wp.abs(height - center[2]) <= half_h


@wp.kernel
def _in_plane_geoms(
    geom_ids: wp.array[wp.int32],
    geom_kind: wp.array[wp.int32],
    geom_size: wp.array2d[wp.vec3],
    geom_xpos: wp.array2d[wp.vec3],
    height: float,
    list_out: wp.array2d[wp.int32],
    count_out: wp.array[wp.int32],
):
    """One thread per world: the indices ``k`` (into ``geom_ids``, ascending) of the geoms that meet
    the scan plane, and how many (an obstacle slot a world leaves unused is parked below it)."""
    world = wp.tid()
    n = wp.int32(0)
    for k in range(geom_ids.shape[0]):
        g = geom_ids[k]
        if _crosses_scan_plane(geom_kind[k], geom_size[0, g], geom_xpos[world, g], height):
            list_out[world, n] = k
            n += 1
    count_out[world] = n


@wp.kernel
def _planar_scan(
    pose: wp.array2d[wp.float32],
    beam_cos: wp.array[wp.float32],
    beam_sin: wp.array[wp.float32],
    geom_ids: wp.array[wp.int32],
    geom_kind: wp.array[wp.int32],
    in_plane: wp.array2d[wp.int32],
    in_plane_count: wp.array[wp.int32],
    geom_size: wp.array2d[wp.vec3],
    geom_xpos: wp.array2d[wp.vec3],
    geom_xmat: wp.array2d[wp.mat33],
    max_range: float,
    dist_out: wp.array2d[wp.float32],
):
    """One thread per (world, ray): the range along ray ``beam`` (body-frame direction
    ``beam_cos``, ``beam_sin``), ``max_range`` when nothing is hit before it; over the world's geoms
    that meet the scan plane (``_in_plane_geoms``), in ``geom_ids`` order."""
    world, beam = wp.tid()
    px = pose[world, 0]
    py = pose[world, 1]
    c = wp.cos(pose[world, 2])
    s = wp.sin(pose[world, 2])
    dx = c * beam_cos[beam] - s * beam_sin[beam]
    dy = s * beam_cos[beam] + c * beam_sin[beam]
    best = max_range
    for j in range(in_plane_count[world]):
        k = in_plane[world, j]
        g = geom_ids[k]
        center = geom_xpos[world, g]
        size = geom_size[0, g]
        ox = px - center[0]
        oy = py - center[1]
        if geom_kind[k] == 0:
            # vertical cylinder: ray-circle
            r = size[0]
            b = ox * dx + oy * dy
            cc = ox * ox + oy * oy - r * r
            disc = b * b - cc
            if disc >= 0.0:
                sq = wp.sqrt(disc)
                t = -b - sq
                if t < 0.0:
                    t = -b + sq
                if t >= 0.0 and t < best:
                    best = t
        else:
            # box rotated about z: slabs in the box frame (columns 0 and 1 of xmat)
            m = geom_xmat[world, g]
            lx = m[0, 0] * ox + m[1, 0] * oy
            ly = m[0, 1] * ox + m[1, 1] * oy
            ldx = m[0, 0] * dx + m[1, 0] * dy
            ldy = m[0, 1] * dx + m[1, 1] * dy
            tmin = -1.0e30
            tmax = 1.0e30
            hit = True
            for axis in range(2):
                o = lx
                d = ldx
                h = size[0]
                if axis == 1:
                    o = ly
                    d = ldy
                    h = size[1]
                if wp.abs(d) < 1.0e-12:
                    if wp.abs(o) > h:
                        hit = False
                else:
                    t1 = (-h - o) / d
                    t2 = (h - o) / d
                    tmin = wp.max(tmin, wp.min(t1, t2))
                    tmax = wp.min(tmax, wp.max(t1, t2))
            if hit and tmax >= tmin and tmax >= 0.0:
                t = tmin
                if t < 0.0:
                    t = tmax
                if t < best:
                    best = t
    dist_out[world, beam] = best


@wp.kernel
def _sector_min(
    ray_dist: wp.array2d[wp.float32],
    windows: wp.array2d[wp.int32],
    window_valid: wp.array2d[wp.int32],
    unseen_value: float,
    dist_out: wp.array2d[wp.float32],
):
    """One thread per (world, sector): the minimum over the sector's sub-rays inside the field of
    view; ``unseen_value`` for a sector with none (the fill replaces it)."""
    world, beam = wp.tid()
    best = unseen_value
    found = wp.int32(0)
    for k in range(windows.shape[1]):
        if window_valid[beam, k] != 0:
            v = ray_dist[world, windows[beam, k]]
            if found == 0 or v < best:
                best = v
            found = wp.int32(1)
    dist_out[world, beam] = best


@wp.kernel
def _closest_points(
    pose: wp.array2d[wp.float32],
    geom_ids: wp.array[wp.int32],
    geom_kind: wp.array[wp.int32],
    geom_size: wp.array2d[wp.vec3],
    geom_xpos: wp.array2d[wp.vec3],
    geom_xmat: wp.array2d[wp.mat33],
    height: float,
    max_range: float,
    first_edge: float,
    sector_width: float,
    seen_lo: wp.array[wp.float32],
    seen_width: wp.array[wp.float32],
    dist_out: wp.array2d[wp.float32],
):
    """One thread per (world, geom), the exact rule's second half: the geom's closest point to the
    lidar lowers the reading of the sector whose seen arc holds its direction (the edge rays of
    every sector are already in ``dist_out``). A geom holding the lidar is left to the edge rays."""
    world, k = wp.tid()
    g = geom_ids[k]
    center = geom_xpos[world, g]
    size = geom_size[0, g]
    if not _crosses_scan_plane(geom_kind[k], size, center, height):
        return
    px = pose[world, 0]
    py = pose[world, 1]
    vx = wp.float32(0.0)
    vy = wp.float32(0.0)
    dist = wp.float32(0.0)
    if geom_kind[k] == 0:
        cx = center[0] - px
        cy = center[1] - py
        norm = wp.sqrt(cx * cx + cy * cy)
        if norm <= size[0]:
            return
        vx = cx
        vy = cy
        dist = norm - size[0]
    else:
        m = geom_xmat[world, g]
        ox = px - center[0]
        oy = py - center[1]
        lx = m[0, 0] * ox + m[1, 0] * oy
        ly = m[0, 1] * ox + m[1, 1] * oy
        qx = wp.clamp(lx, -size[0], size[0])
        qy = wp.clamp(ly, -size[1], size[1])
        if qx == lx and qy == ly:
            return
        # lidar -> closest point, back in the world frame
        ux = qx - lx
        uy = qy - ly
        vx = m[0, 0] * ux + m[0, 1] * uy
        vy = m[1, 0] * ux + m[1, 1] * uy
        dist = wp.sqrt(ux * ux + uy * uy)
    if dist >= max_range:
        return
    two_pi = 2.0 * wp.pi
    psi = wp.atan2(vy, vx) - pose[world, 2]
    rel = psi - first_edge
    rel = rel - two_pi * wp.floor(rel / two_pi)
    nb = seen_lo.shape[0]
    j = wp.min(int(rel / sector_width), nb - 1)
    width = seen_width[j]
    if width < 0.0:
        return
    delta = psi - seen_lo[j]
    delta = delta - two_pi * wp.floor(delta / two_pi)
    if delta <= width + 1.0e-6 or delta >= two_pi - 1.0e-6:
        wp.atomic_min(dist_out, world, j, dist)


def _scan_geoms(mj_model: mujoco.MjModel, robot_body: int) -> tuple[np.ndarray, np.ndarray]:
    ids, kinds = [], []
    for g in range(mj_model.ngeom):
        if mj_model.geom_bodyid[g] == robot_body:
            continue
        gtype = int(mj_model.geom_type[g])
        if gtype == GEOM_CYLINDER:
            kinds.append(0)
        elif gtype == GEOM_BOX:
            kinds.append(1)
        else:
            raise ValueError(f"the planar lidar supports cylinders and boxes, geom {g} has type {gtype}")
        ids.append(g)
    return np.array(ids, dtype=np.int32), np.array(kinds, dtype=np.int32)


class TorchFovFill:
    """:class:`navsim.sectors.FovFill` on batched torch scans (the same map, on the device)."""

    def __init__(self, fill: FovFill, device: torch.device) -> None:
        self.active = fill.active
        self.unseen = torch.as_tensor(fill.unseen, dtype=torch.long, device=device)
        self.sources = torch.as_tensor(fill.sources, dtype=torch.long, device=device)
        self.source_valid = torch.as_tensor(fill.source_valid, device=device)
        self.has_source = self.source_valid.any(dim=1)
        self.constant = torch.as_tensor(fill.constant, dtype=torch.float32, device=device)

    def __call__(self, scan: torch.Tensor) -> torch.Tensor:
        """(N, B) ranges -> a copy with the unseen sectors filled (seen sectors untouched)."""
        out = scan.clone()
        if not self.active:
            return out
        vals = torch.where(self.source_valid, scan[:, self.sources], torch.inf).amin(dim=-1)
        out[:, self.unseen] = torch.where(self.has_source, vals, self.constant)
        return out


class BatchedLidar:
    """Casts the sector readings of every world from each robot's pose (planar Warp kernels).

    ``rays`` (:class:`navsim.sectors.SectorRays`) sets the sub-rays and the field of view;
    :meth:`scan` returns the sector minima, with unseen sectors (field of view under 360 degrees)
    holding ``max_range`` until :attr:`fill` replaces them. ``rays`` defaults to one centre ray
    per beam over 360 degrees.
    """

    def __init__(
        self,
        mj_model: mujoco.MjModel,
        m: mjw.Model,
        d: mjw.Data,
        num_worlds: int,
        num_beams: int,
        max_range: float,
        robot_body: int,
        device: torch.device,
        rays: SectorRays | None = None,
        fill: FovFill | None = None,
    ) -> None:
        self.m, self.d = m, d
        self.max_range = float(max_range)
        self.num_worlds, self.num_beams = num_worlds, num_beams
        self.rays = rays if rays is not None else SectorRays(num_beams)
        if self.rays.num_beams != num_beams:
            raise ValueError(f"sector rays for {self.rays.num_beams} beams, lidar of {num_beams}")
        self.rays_per_beam = self.rays.rays_per_beam
        ang = torch.as_tensor(np.array(self.rays.ray_angles), dtype=torch.float32, device=device)
        self.ray_cos = wp.from_torch(torch.cos(ang).contiguous())
        self.ray_sin = wp.from_torch(torch.sin(ang).contiguous())
        wp_device = self.ray_cos.device
        # One ray per sector over 360 degrees: the rays are the beams, no second pass.
        self._direct = self.rays.rays_per_beam == 1 and self.rays.full_view
        if self._direct:
            self.beam_cos, self.beam_sin = self.ray_cos, self.ray_sin
        self.exact = self.rays.exact
        layout = BeamLayout(num_beams)
        self.first_edge = float(layout.angle_min - 0.5 * layout.angle_increment)
        self.sector_width = float(layout.angle_increment)
        self.seen_lo = wp.array(self.rays.seen_lo.astype(np.float32), dtype=wp.float32, device=wp_device)
        self.seen_width = wp.array(self.rays.seen_width.astype(np.float32), dtype=wp.float32, device=wp_device)
        self.windows = wp.array(self.rays.windows.astype(np.int32), dtype=wp.int32, device=wp_device)
        self.window_valid = wp.array(self.rays.window_valid.astype(np.int32), dtype=wp.int32, device=wp_device)
        ids, kinds = _scan_geoms(mj_model, robot_body)
        self.geom_ids = wp.array(ids, dtype=wp.int32, device=wp_device)
        self.geom_kind = wp.array(kinds, dtype=wp.int32, device=wp_device)
        self._in_plane = wp.zeros((num_worlds, max(len(ids), 1)), dtype=wp.int32, device=wp_device)
        self._in_plane_count = wp.zeros(num_worlds, dtype=wp.int32, device=wp_device)
        self.dist = torch.zeros(num_worlds, num_beams, device=device)
        self._dist = wp.from_torch(self.dist)
        self.ray_dist = self.dist if self._direct else torch.zeros(num_worlds, self.rays.num_rays, device=device)
        self._ray_dist = wp.from_torch(self.ray_dist)
        self.fill = TorchFovFill(fill if fill is not None else FovFill(self.rays.seen, self.max_range), device)

    def scan(self, pose: torch.Tensor) -> torch.Tensor:
        """(N, 3) poses -> (N, num_beams) sector minima in metres, clipped to max_range; sectors
        outside the field of view read ``max_range`` (apply :attr:`fill` for the robot's value)."""
        pose = pose.contiguous().float()
        wp.launch(
            _in_plane_geoms,
            dim=self.num_worlds,
            inputs=[self.geom_ids, self.geom_kind, self.m.geom_size, self.d.geom_xpos, float(LIDAR_HEIGHT)],
            outputs=[self._in_plane, self._in_plane_count],
            device=self._in_plane.device,
        )
        wp.launch(
            _planar_scan,
            dim=(self.num_worlds, self.rays.num_rays),
            inputs=[
                wp.from_torch(pose),
                self.ray_cos,
                self.ray_sin,
                self.geom_ids,
                self.geom_kind,
                self._in_plane,
                self._in_plane_count,
                self.m.geom_size,
                self.d.geom_xpos,
                self.d.geom_xmat,
                self.max_range,
            ],
            outputs=[self._ray_dist],
            device=self._ray_dist.device,
        )
        if not self._direct:
            wp.launch(
                _sector_min,
                dim=(self.num_worlds, self.num_beams),
                inputs=[self._ray_dist, self.windows, self.window_valid, self.max_range],
                outputs=[self._dist],
                device=self._dist.device,
            )
        if self.exact:
            wp.launch(
                _closest_points,
                dim=(self.num_worlds, self.geom_ids.shape[0]),
                inputs=[
                    wp.from_torch(pose),
                    self.geom_ids,
                    self.geom_kind,
                    self.m.geom_size,
                    self.d.geom_xpos,
                    self.d.geom_xmat,
                    float(LIDAR_HEIGHT),
                    self.max_range,
                    self.first_edge,
                    self.sector_width,
                    self.seen_lo,
                    self.seen_width,
                ],
                outputs=[self._dist],
                device=self._dist.device,
            )
        return self.dist.clone()
