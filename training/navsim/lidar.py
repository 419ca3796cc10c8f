"""The 72-beam planar lidar, cast once per control step with ``mujoco_warp.rays``.

Beam ``i`` points at ``angle_min + i * increment`` in the body frame (0 = forward, counter-
clockwise positive), ``angle_min = -pi`` and ``increment = 2 pi / num_beams``: a 360 degree scan
as a ROS LaserScan describes it. Rays leave the robot centre at LIDAR_HEIGHT and ignore the
robot's own body. A beam with no return within ``max_range`` reads ``max_range``.
"""

from __future__ import annotations

import math

import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp
from mujoco_warp._src.types import vec6f

from navsim.robot import LIDAR_HEIGHT


def beam_angles(num_beams: int) -> np.ndarray:
    """Body-frame beam angles of the training lidar (float64)."""
    return -math.pi + np.arange(num_beams) * (2.0 * math.pi / num_beams)


class BatchedLidar:
    """Casts ``num_beams`` horizontal rays per world from each robot's pose."""

    def __init__(
        self,
        m: mjw.Model,
        d: mjw.Data,
        num_worlds: int,
        num_beams: int,
        max_range: float,
        robot_body: int,
        device: torch.device,
    ) -> None:
        self.m, self.d = m, d
        self.max_range = float(max_range)
        ang = torch.as_tensor(beam_angles(num_beams), dtype=torch.float32, device=device)
        self.cos_b, self.sin_b = torch.cos(ang), torch.sin(ang)
        self.pnt = torch.zeros(num_worlds, num_beams, 3, device=device)
        self.pnt[..., 2] = LIDAR_HEIGHT
        self.vec = torch.zeros(num_worlds, num_beams, 3, device=device)
        self._pnt = wp.from_torch(self.pnt, dtype=wp.vec3)
        self._vec = wp.from_torch(self.vec, dtype=wp.vec3)
        self._dist = wp.zeros((num_worlds, num_beams), dtype=wp.float32, device=self._pnt.device)
        self._geom = wp.zeros((num_worlds, num_beams), dtype=wp.int32, device=self._pnt.device)
        self._normal = wp.zeros((num_worlds, num_beams), dtype=wp.vec3, device=self._pnt.device)
        self._exclude = wp.array(
            np.full(num_beams, robot_body, dtype=np.int32), dtype=wp.int32, device=self._pnt.device
        )
        self._groups = vec6f(-1, -1, -1, -1, -1, -1)
        self.dist = wp.to_torch(self._dist)

    def scan(self, pose: torch.Tensor) -> torch.Tensor:
        """(N, 3) poses -> (N, num_beams) ranges in metres, clipped to max_range."""
        c = torch.cos(pose[:, 2:3])
        s = torch.sin(pose[:, 2:3])
        self.pnt[..., 0] = pose[:, 0:1]
        self.pnt[..., 1] = pose[:, 1:2]
        self.vec[..., 0] = c * self.cos_b - s * self.sin_b
        self.vec[..., 1] = s * self.cos_b + c * self.sin_b
        mjw.rays(
            self.m,
            self.d,
            self._pnt,
            self._vec,
            self._groups,
            True,
            self._exclude,
            self._dist,
            self._geom,
            self._normal,
        )
        d = self.dist
        return torch.where((d < 0) | (d > self.max_range), torch.full_like(d, self.max_range), d)
