"""The one-room world in C MuJoCo, built exactly like a training world (no ROS in here).

The single C MuJoCo copy of the training world: the ROS 2 sim node drives :class:`SimWorld`, the
simulator benchmark's C reference (``navsim.benchmark``) builds its per-world models with
:func:`compile_world_model` / :func:`place_room` and casts its rays with :class:`RayCaster`, and
the lidar and physics tests compare NavEnv against these.

- The MJCF comes from ``navsim.robot.build_mjcf`` and the rooms from
  ``navsim.families.rooms.generate_rooms`` (the training code), so it is the very robot, room and obstacle
  pool the policy was trained in.
- Obstacles are static geoms of the world body, placed after compilation by writing
  ``geom_pos`` / ``geom_quat`` (:func:`place_room`). Two compiler optimisations would silently
  break that, so :func:`compile_world_model` turns them off: the "same frame as the body" flag
  (``geom_sameframe``) makes ``mj_kinematics`` ignore a written yaw, and the world body's static
  midphase tree, built with the slots parked, would keep moved obstacles from ever colliding.
- Commands are applied as the training env applies them: a body-frame [vx, vy, wz] held for
  ``physics_substeps`` physics steps per control period, rotated by the current yaw into the
  world-frame ``vx``/``vy`` actuators before each substep (``navsim.robot.body_to_world``). The
  base is ``env.robot``'s: a differential drive cannot move sideways, so its command's ``vy`` is
  applied as 0 (:meth:`SimWorld.base_command`).
- The lidar follows the training lidar's rule (``navsim.sectors``): each training beam
  (``navcontract.scan.BeamLayout``) is the minimum over its sector's ``env.lidar.rays_per_beam``
  sub-rays, cast from the robot centre with ``mj_multiRay``; no return reads ``max_range``;
  Gaussian noise as in training, clipped to [0, max_range]; sectors outside ``env.lidar.fov_deg``
  filled by the runtime's rule after the noise.
- Episodes end as in training, with the same names (``navsim.outcomes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from navcontract.base import DIFF_DRIVE
from navcontract.scan import BeamLayout
from navsim.config import EnvCfg, NavConfig
from navsim.families import active_families, extent_half, planned
from navsim.families.rooms import RoomBatch, RoomGeometry, generate_rooms
from navsim.outcomes import Outcome, judge
from navsim.robot import LIDAR_HEIGHT, OBSTACLE_HALF_HEIGHT, PARK_Z, body_to_world, build_mjcf, geom_ids, slot_sizes
from navsim.sectors import FovFill, SectorRays
from navsim.world_pool import planned_worlds


@dataclass(frozen=True)
class Room:
    seed: int
    slot_pos: np.ndarray  # (S, 2)
    slot_yaw: np.ndarray  # (S,)
    slot_active: np.ndarray  # (S,) bool
    start: np.ndarray  # (3,) x, y, yaw
    goal: np.ndarray  # (2,)

    @classmethod
    def from_batch(cls, rooms: RoomBatch, index: int, seed: int = -1) -> Room:
        """World ``index`` of a batch of training rooms (torch, any device)."""
        return cls(
            int(seed),
            rooms.slot_pos[index].detach().cpu().double().numpy(),
            rooms.slot_yaw[index].detach().cpu().double().numpy(),
            rooms.slot_active[index].detach().cpu().numpy().astype(bool),
            rooms.start[index].detach().cpu().double().numpy(),
            rooms.goal[index].detach().cpu().double().numpy(),
        )


def compile_world_model(cfg: EnvCfg) -> mujoco.MjModel:
    """The training MJCF compiled for C MuJoCo, ready for obstacles placed after compilation."""
    model = mujoco.MjModel.from_xml_string(build_mjcf(cfg))
    slots = geom_ids(model)["slots"]
    # The compiler marks the slot geoms as sharing the world body's frame (identity quat in the
    # MJCF); mj_kinematics then copies the body's orientation and a written yaw is dropped.
    model.geom_sameframe[slots] = 0
    # The world body's static midphase tree is built at compile time with the slots parked; moved
    # obstacles would never collide. Without it every robot/world geom pair goes through the
    # per-step bounding checks (cheap: about 20 geoms).
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_MIDPHASE
    return model


def slot_frames(
    slot_pos: np.ndarray, slot_yaw: np.ndarray, slot_active: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """World poses of the obstacle slots (any leading batch shape ``...``, S slots): positions
    (..., S, 3) with inactive slots parked below the floor, quaternions (..., S, 4) and rotation
    matrices (..., S, 9) of the yaw about z."""
    pos = np.asarray(slot_pos, dtype=np.float64)
    yaw = np.asarray(slot_yaw, dtype=np.float64)
    z = np.where(np.asarray(slot_active, dtype=bool), OBSTACLE_HALF_HEIGHT, PARK_Z)
    xpos = np.concatenate([pos, z[..., None]], axis=-1)
    zero = np.zeros_like(yaw)
    quat = np.stack([np.cos(yaw / 2), zero, zero, np.sin(yaw / 2)], axis=-1)
    c, s = np.cos(yaw), np.sin(yaw)
    xmat = np.stack([c, -s, zero, s, c, zero, zero, zero, np.ones_like(yaw)], axis=-1)
    return xpos, quat, xmat


def place_room(model: mujoco.MjModel, slot_ids: np.ndarray, room: Room) -> None:
    """Write the room's obstacle poses into a model from :func:`compile_world_model`."""
    xpos, quat, _ = slot_frames(room.slot_pos, room.slot_yaw, room.slot_active)
    model.geom_pos[slot_ids] = xpos
    model.geom_quat[slot_ids] = quat


class RayCaster:
    """The training lidar in C MuJoCo: the sector rule of ``navsim.sectors`` cast with
    ``mj_multiRay`` from the robot centre at LIDAR_HEIGHT, horizontal, the robot's own body
    excluded. Each training beam (BeamLayout) is the minimum over its sector's sub-rays
    (``rays_per_beam``, edge to edge; 1 = the centre ray) inside the field of view; no return (or
    beyond ``max_range``) reads ``max_range``; sectors outside the field of view are filled by the
    runtime's rule (``navsim.sectors.FovFill``). It sees the geom poses in the data it is given
    (``geom_xpos`` / ``geom_xmat``). The same rule and the same sub-rays as NavEnv's Warp lidar."""

    def __init__(
        self,
        beams: BeamLayout,
        max_range: float,
        robot_body: int,
        rays_per_beam: int = 1,
        fov_deg: float = 360.0,
        fov_fill: str = "nearest",
        fov_fill_value: float | None = None,
    ) -> None:
        self.beams = beams
        self.max_range = float(max_range)
        self.robot_body = int(robot_body)
        self.rays = SectorRays(beams.num_beams, rays_per_beam, fov_deg)
        self.fill = FovFill(self.rays.seen, self.max_range, fov_fill, fov_fill_value)
        angles = self.rays.ray_angles
        self._cos, self._sin = np.cos(angles), np.sin(angles)
        n = self.rays.num_rays
        self._vec = np.zeros((n, 3))
        self._geomid = np.zeros(n, dtype=np.int32)

    @classmethod
    def from_config(cls, cfg: EnvCfg, robot_body: int) -> RayCaster:
        """The lidar of ``env.lidar``: beams, range, sub-rays, field of view and fill."""
        lidar = cfg.lidar
        return cls(
            BeamLayout(int(lidar.num_beams)),
            lidar.max_range,
            robot_body,
            rays_per_beam=lidar.rays_per_beam,
            fov_deg=lidar.fov_deg,
            fov_fill=lidar.fov_fill,
            fov_fill_value=lidar.fov_fill_value,
        )

    def cast_rays(self, model: mujoco.MjModel, data: mujoco.MjData, pose: np.ndarray) -> np.ndarray:
        """(num_rays,) ranges of the distinct sub-rays from ``pose`` (x, y, yaw), in [0, max_range]."""
        x, y, yaw = (float(v) for v in pose[:3])
        c, s = np.cos(yaw), np.sin(yaw)
        self._vec[:, 0] = c * self._cos - s * self._sin
        self._vec[:, 1] = s * self._cos + c * self._sin
        n = self.rays.num_rays
        dist = np.zeros(n)
        pnt = np.array([x, y, LIDAR_HEIGHT])
        mujoco.mj_multiRay(
            model,
            data,
            pnt,
            self._vec.reshape(-1),
            None,
            1,
            self.robot_body,
            self._geomid,
            dist,
            None,
            n,
            self.max_range,
        )
        return np.where((dist < 0) | (dist > self.max_range), self.max_range, dist)

    def cast_sectors(self, model: mujoco.MjModel, data: mujoco.MjData, pose: np.ndarray) -> np.ndarray:
        """(num_beams,) sector minima in metres; sectors outside the field of view are NaN."""
        sectors = self.rays.sector_min(self.cast_rays(model, data, pose))
        if self.rays.exact:
            dist, angle = self.closest_points(model, data, pose)
            sectors = np.where(self.rays.seen, self.rays.add_closest_points(sectors, dist, angle), np.nan)
        return sectors

    def closest_points(
        self, model: mujoco.MjModel, data: mujoco.MjData, pose: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The exact rule's closest points: for every geom at the lidar's height that does not hold
        the lidar, its distance from the lidar and the body-frame direction of its closest point
        (vertical cylinders and boxes rotated about z, as ``navsim.lidar`` supports)."""
        geoms = np.flatnonzero(model.geom_bodyid != self.robot_body)
        size, center = model.geom_size[geoms], data.geom_xpos[geoms]
        cyl = model.geom_type[geoms] == mujoco.mjtGeom.mjGEOM_CYLINDER
        at_height = np.abs(LIDAR_HEIGHT - center[:, 2]) <= np.where(cyl, size[:, 1], size[:, 2])
        rel = np.asarray(pose[:2], dtype=np.float64) - center[:, :2]  # lidar in the geom frame, unrotated
        rot = data.geom_xmat[geoms].reshape(-1, 3, 3)[:, :2, :2]
        local = np.einsum("gji,gj->gi", rot, rel)  # rotated into the box frame
        closest = np.clip(local, -size[:, :2], size[:, :2])
        box_v = np.einsum("gij,gj->gi", rot, closest - local)
        norm = np.hypot(rel[:, 0], rel[:, 1])
        v = np.where(cyl[:, None], -rel, box_v)
        dist = np.where(cyl, norm - size[:, 0], np.hypot(box_v[:, 0], box_v[:, 1]))
        outside = np.where(cyl, norm > size[:, 0], (closest != local).any(axis=1))
        keep = at_height & outside & (dist < self.max_range)
        angle = np.arctan2(v[keep, 1], v[keep, 0]) - float(pose[2])
        return dist[keep], angle

    def cast(self, model: mujoco.MjModel, data: mujoco.MjData, pose: np.ndarray) -> np.ndarray:
        """(num_beams,) ranges in metres from ``pose`` (x, y, yaw), in [0, max_range], unseen
        sectors filled."""
        return self.fill.apply(self.cast_sectors(model, data, pose)[None])[0]


class SimWorld:
    """One training world in C MuJoCo: rooms by seed, body-frame commands, scans, outcomes."""

    def __init__(self, cfg: NavConfig, noise_std: float | None = None) -> None:
        self.cfg = cfg
        e = cfg.env
        self.env_cfg = e
        self.control_period = float(e.control_period)
        self.substeps = int(e.physics_substeps)
        self.beams = BeamLayout(int(e.lidar.num_beams))
        self.num_beams = self.beams.num_beams
        self.max_range = float(e.lidar.max_range)
        self.noise_std = float(e.lidar.noise_std if noise_std is None or noise_std < 0 else noise_std)
        self.goal_tolerance = float(e.goal_tolerance)
        self.max_steps = int(round(e.episode_length_s / e.control_period))
        self.half = extent_half(e)  # the fixed walls; a smaller world is closed by its bound slots
        self.model = compile_world_model(e)
        self.data = mujoco.MjData(self.model)
        ids = geom_ids(self.model)
        self.slot_ids = ids["slots"]
        self.shell_id = int(ids["shell"][0])
        self.robot_body = int(self.model.body("base").id)
        self.lidar = RayCaster.from_config(e, self.robot_body)
        self.geometry = RoomGeometry(e, slot_sizes(e), "cpu")
        self.rng = np.random.default_rng(0)
        self.room: Room | None = None
        self.steps = 0
        self.collided = False
        self.drive = e.robot.drive

    # ------------------------------------------------------------------ rooms
    def make_room(self, seed: int) -> Room:
        """The world that ``seed`` selects (training's generator, one world): a room of ``env.room``, or with
        world families configured (``env.worlds``) a planned world of a family drawn by its share,
        at the top level."""
        gen = torch.Generator(device="cpu")
        gen.manual_seed(int(seed))
        w = self.env_cfg.worlds
        if not planned(w):
            return Room.from_batch(generate_rooms(1, self.env_cfg, self.geometry, gen), 0, seed=int(seed))
        fams = active_families(w)
        shares = torch.tensor([w.families[f] for f in fams], dtype=torch.float64)
        fam = fams[int(torch.multinomial(shares / shares.sum(), 1, generator=gen))]
        batch, _ = planned_worlds(fam, w.curriculum.levels - 1, 1, self.env_cfg, self.geometry, gen)
        return Room.from_batch(batch, 0, seed=int(seed))

    def reset(self, room: Room, pose: np.ndarray | None = None) -> None:
        """Build the world of ``room``: obstacles placed, robot at rest at the start pose (or at
        ``pose``), step count, contact flag and noise stream restarted."""
        self.room = room
        place_room(self.model, self.slot_ids, room)
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:3] = room.start if pose is None else np.asarray(pose, dtype=np.float64)
        mujoco.mj_forward(self.model, self.data)
        self.rng = np.random.default_rng(room.seed + 7919)
        self.steps = 0
        self.collided = False

    # ------------------------------------------------------------------ stepping
    def apply_command(self, cmd: np.ndarray) -> None:
        """Body-frame [vx, vy, wz] -> world-frame actuator controls at the current yaw."""
        self.data.ctrl[:3] = body_to_world(cmd, float(self.data.qpos[2]))

    def base_command(self, cmd: np.ndarray) -> tuple[np.ndarray, bool]:
        """The body-frame command the base follows, and whether a sideways part was dropped: a diff
        drive's ``vy`` is 0 whatever was asked; a holonomic base follows ``cmd`` as it is."""
        cmd = np.asarray(cmd, dtype=np.float64)
        if self.drive != DIFF_DRIVE or cmd[1] == 0.0:
            return cmd, False
        return np.array([cmd[0], 0.0, cmd[2]]), True

    def step(self, cmd: np.ndarray) -> None:
        """One control period holding ``cmd`` (as :meth:`base_command` gives it): before every physics
        substep the body-frame command is rotated at the current yaw (a held Twist drives an arc, as
        in the training env); contacts are checked after every substep."""
        cmd, _ = self.base_command(cmd)
        for _ in range(self.substeps):
            self.apply_command(cmd)
            mujoco.mj_step(self.model, self.data)
            self.collided |= self._shell_contact()
        self.steps += 1

    def _shell_contact(self) -> bool:
        d = self.data
        n = int(d.ncon)
        if n == 0:
            return False
        geom = d.contact.geom[:n]
        shell = (geom[:, 0] == self.shell_id) | (geom[:, 1] == self.shell_id)
        return bool(np.any(shell & (d.contact.dist[:n] <= 0.0)))

    # ------------------------------------------------------------------ readings
    def pose(self) -> np.ndarray:
        return self.data.qpos[:3].copy()

    def body_twist(self) -> np.ndarray:
        yaw = float(self.data.qpos[2])
        c, s = np.cos(yaw), np.sin(yaw)
        vx, vy, wz = (float(v) for v in self.data.qvel[:3])
        return np.array([c * vx + s * vy, -s * vx + c * vy, wz])

    def scan(self, noise: bool = True) -> np.ndarray:
        """(num_beams,) ranges in metres on the training beams, in [0, max_range]."""
        d = self.lidar.cast_sectors(self.model, self.data, self.data.qpos)
        if noise and self.noise_std > 0:  # noise on the readings, then the fill (as NavEnv)
            d = np.clip(d + self.noise_std * self.rng.standard_normal(d.shape), 0.0, self.max_range)
        return self.lidar.fill.apply(d[None])[0]

    def goal_distance(self, goal: np.ndarray | None = None) -> float:
        g = self.room.goal if goal is None else goal
        p = self.data.qpos
        return float(np.hypot(g[0] - p[0], g[1] - p[1]))

    def outcome(self, goal: np.ndarray | None = None) -> Outcome | None:
        """The episode's end, judged like training (collision beats leaving the room beats
        reaching the goal), or None while it goes on."""
        return judge(
            collision=self.collided,
            out_of_bounds=bool(np.any(np.abs(self.data.qpos[:2]) > self.half)),
            at_goal=self.goal_distance(goal) < self.goal_tolerance,
            time_up=self.steps >= self.max_steps,
        )
