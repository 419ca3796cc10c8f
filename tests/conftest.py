"""Shared fixtures of the simulator tests: small NavEnvs on the CPU and hand-made rooms.

Building a NavEnv with a few dozen worlds takes a fraction of a second once Warp's kernel cache
is warm (the very first build in a fresh cache compiles kernels for ~30 s). Tests therefore build
the env they need through :func:`make_env` and, where the state does not matter, reuse one per
module. Rooms for a test are made by hand with :func:`empty_rooms` / :func:`place_obstacle` and
installed with ``env.reset(rooms)``, so every world's layout, start and goal is known exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from navsim.config import NavConfig, load_config
from navsim.env import NavEnv
from navsim.rooms import RoomBatch

SMALL_WORLDS = 16


def nav_config(*overrides: str) -> NavConfig:
    """The repository config (conf/nav.yaml) with dotted overrides applied."""
    return load_config(overrides=list(overrides))


def build_env(num_envs: int = SMALL_WORLDS, *overrides: str, seed: int | None = None) -> NavEnv:
    """A CPU NavEnv with ``num_envs`` worlds and the given dotted config overrides."""
    return NavEnv(nav_config(*overrides), num_envs=num_envs, device="cpu", seed=seed)


@pytest.fixture(scope="session")
def make_env() -> Callable[..., NavEnv]:
    """Factory ``make_env(num_envs=16, *overrides, seed=None)``; the first call warms the kernels."""
    warm = build_env(2, "env.init_at_random_ep_len=false")
    warm.step(torch.zeros(2, 3))  # loads (or compiles) every Warp kernel of the step once
    return build_env


def empty_rooms(env: NavEnv, start: tuple[float, float, float] = (0.0, 0.0, 0.0), goal=(3.0, 0.0)) -> RoomBatch:
    """Rooms without obstacles for every world of ``env``: the same start pose and goal everywhere."""
    n, s = env.num_envs, env.geometry.num_slots
    dev = env.device
    return RoomBatch(
        slot_pos=torch.zeros(n, s, 2, device=dev),
        slot_yaw=torch.zeros(n, s, device=dev),
        slot_active=torch.zeros(n, s, dtype=torch.bool, device=dev),
        start=torch.tensor(start, dtype=torch.float32, device=dev).expand(n, 3).clone(),
        goal=torch.tensor(goal, dtype=torch.float32, device=dev).expand(n, 2).clone(),
    )


def place_obstacle(rooms: RoomBatch, world: int, slot: int, xy: tuple[float, float], yaw: float = 0.0) -> None:
    """Activate obstacle ``slot`` of ``world`` at ``xy`` (slots: cylinders first, then boxes)."""
    rooms.slot_active[world, slot] = True
    rooms.slot_pos[world, slot] = torch.tensor(xy, dtype=torch.float32)
    rooms.slot_yaw[world, slot] = yaw


@pytest.fixture(scope="module")
def obstacle_free_env(make_env) -> NavEnv:
    """16 worlds, no obstacles, noise-free lidar, auto-reset on, no random episode lengths.

    Shared by the tests of a module: each test installs its own rooms with ``env.reset``.
    """
    env = make_env(SMALL_WORLDS, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0")
    env.reset(empty_rooms(env))
    return env
