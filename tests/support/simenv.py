"""Simulator and training fixtures (torch, Warp): small NavEnvs on the CPU, hand-made rooms, a
trained checkpoint and its exported bundle.

Building a NavEnv with a few dozen worlds takes a fraction of a second once Warp's kernel cache
is warm (the very first build in a fresh cache compiles kernels for ~30 s). Tests build the env
they need through :func:`make_env` and, where the state does not matter, reuse one per module.
Rooms for a test are made by hand with :func:`empty_rooms` / :func:`place_obstacle` and installed
with ``env.reset(rooms)``, so every world's layout, start and goal is known exactly.

Policies: :func:`trained_checkpoint` trains a tiny policy once per session (1 PPO iteration, 32
CPU worlds) and :func:`exported_bundle` exports it with the ``nav-export`` command, exactly as a
user would; tests that use either are slow (mark them ``slow``). The fixtures are registered by
the conftest of each folder whose tests need them (``tests/sim``, ``tests/train``, ``tests/ros``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from navsim.config import NavConfig
from navsim.config_load import load_config
from navsim.env import NavEnv
from navsim.families.rooms import RoomBatch
from support.paths import REPO

SMALL_WORLDS = 16
TRAIN_ENVS = 32
NO_RANDOMIZATION = "randomization.enabled=false"
"""Override for tests that measure the simulator itself: an instant base, exact odometry and scans."""
NO_GUARD = "env.guard.enabled=false"
"""Override for tests that drive the robot into things on purpose: the base gets the raw command."""
EXACT_EPISODES = ("env.init_at_random_ep_len=false", "env.auto_reset=false", "env.lidar.noise_std=0.0")
"""Overrides for tests that follow known episodes: each starts at step 0, no world resets by itself,
scans without noise."""
TRAIN_OVERRIDES = ["runner.num_steps_per_env=16", "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=2"]
"""The tiny training run of :func:`trained_checkpoint` (on conf/nav.yaml)."""


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
    """16 worlds, no obstacles, noise-free lidar, no randomisation, no collision guard, auto-reset
    on, no random episode lengths.

    Shared by the tests of a module: each test installs its own rooms with ``env.reset``.
    """
    env = make_env(
        SMALL_WORLDS, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", NO_RANDOMIZATION, NO_GUARD
    )
    env.reset(empty_rooms(env))
    return env


# ----------------------------------------------------------------------------------------------
# Policies and bundles


@pytest.fixture(scope="session")
def train_config() -> NavConfig:
    """The config of :func:`trained_checkpoint`."""
    return nav_config(*TRAIN_OVERRIDES)


def train_one_iteration(cfg: NavConfig, num_envs: int, log_dir: Path, name: str) -> Path:
    """One PPO iteration of ``cfg`` on ``num_envs`` CPU worlds (torch seed 0, env seed 3), saved by
    NavRunner as ``log_dir/model_<name>.pt``."""
    from navtrain.ppo_config import runner_cfg
    from navtrain.runner import NavRunner

    torch.manual_seed(0)
    env = NavEnv(cfg, num_envs=num_envs, device="cpu", seed=3)
    runner = NavRunner(env, runner_cfg(cfg, env.obs_manager.obs_groups()), cfg, str(log_dir))
    runner.learn(1)
    path = log_dir / f"model_{name}.pt"
    runner.save(str(path))
    return path


@pytest.fixture(scope="session")
def trained_checkpoint(tmp_path_factory: pytest.TempPathFactory, train_config: NavConfig) -> Path:
    """A freshly trained checkpoint (1 PPO iteration on 32 CPU worlds), written by NavRunner; made once
    per test run, whichever test worker needs it first (:func:`made_once`)."""
    return made_once(
        tmp_path_factory,
        "tiny_run",
        lambda folder: train_one_iteration(train_config, TRAIN_ENVS, folder, "tiny"),
    )


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Path]) -> Path:
    """``make(folder)``'s path, made at most once per test run: with several pytest-xdist workers the
    first one that needs it makes it in the run's shared temporary folder while the others wait on a
    lock, then every worker reads the path it wrote (serially: the session's own folder)."""
    import fcntl
    import os

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-of-user/pytest-N/ is shared by the workers of one run
    folder = root / f"shared_{name}"
    folder.mkdir(exist_ok=True)
    done = folder / "path.txt"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            done.write_text(str(make(folder / "made")))
    return Path(done.read_text())


def nav_export_command() -> list[str]:
    """The ``nav-export`` console script of this environment (``python -m navtrain.export_cli`` when
    the scripts directory has none)."""
    script = Path(sys.executable).with_name("nav-export")
    if script.is_file():
        return [str(script)]
    found = shutil.which("nav-export")
    return [found] if found else [sys.executable, "-m", "navtrain.export_cli"]


@pytest.fixture(scope="session")
def exported_bundle(tmp_path_factory: pytest.TempPathFactory, trained_checkpoint: Path) -> Path:
    """The bundle of :func:`trained_checkpoint`, written by the ``nav-export`` command (once per run)."""

    def export(folder: Path) -> Path:
        out = folder / "bundle"
        proc = subprocess.run(
            [*nav_export_command(), "--checkpoint", str(trained_checkpoint), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
        assert proc.returncode == 0, f"export failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        assert "self-check: max |delta|" in proc.stdout
        return out

    return made_once(tmp_path_factory, "tiny_bundle", export)
