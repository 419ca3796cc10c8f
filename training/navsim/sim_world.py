"""One navigation world in C MuJoCo, built exactly like a training world (no ROS in here).

The MJCF comes from ``navsim.robot.build_mjcf`` and the rooms from ``navsim.rooms.generate_rooms``
(the training code), so the sim node drives the very robot, room and obstacle pool the policy was
trained in. Commands are applied as the training env applies them: a body-frame [vx, vy, wz]
held for ``physics_substeps`` physics steps per control period, rotated by the current yaw into
the world-frame ``vx``/``vy`` actuators before each substep, ``wz`` direct. The lidar casts the
training beams (``navsim.lidar.beam_angles``) from the robot centre with ``mj_multiRay``; no return reads
``max_range``; Gaussian noise as in training, clipped to [0, max_range].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from navsim.config import NavConfig
from navsim.lidar import beam_angles
from navsim.robot import LIDAR_HEIGHT, OBSTACLE_HALF_HEIGHT, PARK_Z, build_mjcf, geom_ids, slot_sizes
from navsim.rooms import RoomGeometry, generate_rooms

OUTCOMES = ("reached", "collided", "timeout", "out_of_bounds")


@dataclass(frozen=True)
class Room:
    seed: int
    slot_pos: np.ndarray  # (S, 2)
    slot_yaw: np.ndarray  # (S,)
    slot_active: np.ndarray  # (S,) bool
    start: np.ndarray  # (3,) x, y, yaw
    goal: np.ndarray  # (2,)


class SimWorld:
    def __init__(self, cfg: NavConfig, noise_std: float | None = None) -> None:
        self.cfg = cfg
        e = cfg.env
        self.env_cfg = e
        self.control_period = float(e.control_period)
        self.substeps = int(e.physics_substeps)
        self.num_beams = int(e.lidar.num_beams)
        self.max_range = float(e.lidar.max_range)
        self.noise_std = float(e.lidar.noise_std if noise_std is None or noise_std < 0 else noise_std)
        self.goal_tolerance = float(e.goal_tolerance)
        self.max_steps = int(round(e.episode_length_s / e.control_period))
        self.half = e.room.size / 2.0
        self.spec = mujoco.MjSpec.from_string(build_mjcf(e))
        self.model = self.spec.compile()
        self.data = mujoco.MjData(self.model)
        ids = geom_ids(self.model)
        self.slot_ids = ids["slots"]
        self.slot_names = [self.model.geom(int(g)).name for g in self.slot_ids]
        self.shell_id = int(ids["shell"][0])
        self.robot_body = int(self.model.body("base").id)
        self.geometry = RoomGeometry(e, slot_sizes(e), "cpu")
        ang = beam_angles(self.num_beams)
        self._cos_b, self._sin_b = np.cos(ang), np.sin(ang)
        self._vec = np.zeros(3 * self.num_beams)
        self._dist = np.zeros(self.num_beams)
        self._geomid = np.zeros(self.num_beams, dtype=np.int32)
        self.rng = np.random.default_rng(0)
        self.room: Room | None = None
        self.steps = 0
        self.collided = False

    # ------------------------------------------------------------------ rooms
    def make_room(self, seed: int) -> Room:
        """The room that ``seed`` selects (training's generator, one world)."""
        gen = torch.Generator(device="cpu")
        gen.manual_seed(int(seed))
        r = generate_rooms(1, self.env_cfg, self.geometry, gen)
        return Room(
            int(seed),
            r.slot_pos[0].double().numpy(),
            r.slot_yaw[0].double().numpy(),
            r.slot_active[0].numpy().astype(bool),
            r.start[0].double().numpy(),
            r.goal[0].double().numpy(),
        )

    def reset(self, room: Room) -> None:
        """Build the world of ``room``: obstacles placed in the model, robot at the start pose.

        The obstacles are static geoms of the world body. C MuJoCo precomputes the world body's
        bounding volumes when it compiles, so writing ``model.geom_pos`` afterwards moves what the
        rays see but not what collides (and the compiler's "same frame" flag drops a written yaw).
        The model is therefore recompiled for each room (about 6 ms) from the same MJCF.
        """
        self.room = room
        for k, name in enumerate(self.slot_names):
            g = self.spec.geom(name)
            if room.slot_active[k]:
                g.pos = [float(room.slot_pos[k, 0]), float(room.slot_pos[k, 1]), OBSTACLE_HALF_HEIGHT]
            else:
                g.pos = [0.0, 0.0, PARK_Z]
            half_yaw = 0.5 * float(room.slot_yaw[k])
            g.quat = [math.cos(half_yaw), 0.0, 0.0, math.sin(half_yaw)]
        self.model = self.spec.compile()
        self.data = mujoco.MjData(self.model)
        m, d = self.model, self.data
        d.qpos[:3] = room.start
        mujoco.mj_forward(m, d)
        self.rng = np.random.default_rng(room.seed + 7919)
        self.steps = 0
        self.collided = False

    # ------------------------------------------------------------------ stepping
    def apply_command(self, cmd: np.ndarray) -> None:
        """Body-frame [vx, vy, wz] -> world-frame actuator controls (as the training env does)."""
        vx, vy, wz = (float(v) for v in cmd)
        yaw = float(self.data.qpos[2])
        c, s = math.cos(yaw), math.sin(yaw)
        self.data.ctrl[0] = c * vx - s * vy
        self.data.ctrl[1] = s * vx + c * vy
        self.data.ctrl[2] = wz

    def step(self, cmd: np.ndarray) -> None:
        """One control period holding ``cmd``: before every physics substep the body-frame command
        is rotated at the current yaw (a held Twist drives an arc, as in the training env);
        contacts are checked after every substep."""
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
        c, s = math.cos(yaw), math.sin(yaw)
        vx, vy, wz = (float(v) for v in self.data.qvel[:3])
        return np.array([c * vx + s * vy, -s * vx + c * vy, wz])

    def scan(self, noise: bool = True) -> np.ndarray:
        """(num_beams,) ranges in metres on the training beams, in [0, max_range]."""
        x, y, yaw = (float(v) for v in self.data.qpos[:3])
        c, s = math.cos(yaw), math.sin(yaw)
        vec = self._vec.reshape(self.num_beams, 3)
        vec[:, 0] = c * self._cos_b - s * self._sin_b
        vec[:, 1] = s * self._cos_b + c * self._sin_b
        pnt = np.array([x, y, LIDAR_HEIGHT])
        mujoco.mj_multiRay(
            self.model,
            self.data,
            pnt,
            self._vec,
            None,
            1,
            self.robot_body,
            self._geomid,
            self._dist,
            None,
            self.num_beams,
            self.max_range,
        )
        d = self._dist.copy()
        d[(d < 0) | (d > self.max_range)] = self.max_range
        if noise and self.noise_std > 0:
            d = np.clip(d + self.noise_std * self.rng.standard_normal(d.shape), 0.0, self.max_range)
        return d

    def goal_distance(self, goal: np.ndarray | None = None) -> float:
        g = self.room.goal if goal is None else goal
        p = self.data.qpos
        return float(math.hypot(g[0] - p[0], g[1] - p[1]))

    def outcome(self, goal: np.ndarray | None = None) -> str | None:
        """The episode's end, judged like training (collision beats reaching the goal), or None."""
        if self.collided:
            return "collided"
        if bool(np.any(np.abs(self.data.qpos[:2]) > self.half)):
            return "out_of_bounds"
        if self.goal_distance(goal) < self.goal_tolerance:
            return "reached"
        if self.steps >= self.max_steps:
            return "timeout"
        return None
