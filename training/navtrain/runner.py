"""NavRunner: rsl_rl's OnPolicyRunner with crash-safe checkpoints, a live progress line and resume.

- Checkpoints are written to a temporary file and renamed into place, so a crash mid-write never
  leaves a corrupt checkpoint; ``model_latest.pt`` always points at a complete one. They carry the
  resolved config (``infos["nav_config"]``) so export and evaluation need nothing else, and load
  with ``torch.load(..., weights_only=True)`` (:func:`navtrain.checkpoint.load_checkpoint`).
- Episode statistics come from the env through ``extras["log"]`` (rsl_rl's VecEnv contract) and
  go to TensorBoard through rsl_rl's own logger. :class:`ProgressLogger`, a subclass of that
  logger, prints one progress line per iteration instead of rsl_rl's multi-line report.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger

from navsim.config import NavConfig, to_dict
from navsim.outcomes import Outcome
from navtrain.checkpoint import load_checkpoint

LATEST = "model_latest.pt"


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _episode_mean(ep_extras: list[dict[str, Any]], key: str) -> tuple[float, int]:
    """Mean and count of one ``extras["log"]`` key over the iteration's episodes."""
    values = [torch.as_tensor(e[key]).reshape(-1).float().cpu() for e in ep_extras if key in e]
    if not values:
        return float("nan"), 0
    cat = torch.cat(values)
    return (float(cat.mean()) if cat.numel() else float("nan")), int(cat.numel())


class ProgressLogger(Logger):
    """rsl_rl's logger (TensorBoard scalars unchanged) with a one-line console report."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env_steps = 0
        self.t0 = time.time()

    def log(self, **kwargs: Any) -> None:
        success, episodes = _episode_mean(self.ep_extras, f"Episode_Termination/{Outcome.SUCCESS}")
        collision, _ = _episode_mean(self.ep_extras, f"Episode_Termination/{Outcome.COLLISION}")
        with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl's multi-line report
            super().log(**kwargs)
        if self.disable_logs:
            return
        it, total = kwargs["it"], kwargs["total_it"]
        collect, learn = kwargs["collect_time"], kwargs["learn_time"]
        steps = self.cfg["num_steps_per_env"] * self.num_envs * self.gpu_world_size
        self.env_steps += steps
        if it == kwargs["start_it"]:
            self.t0 = time.time() - collect - learn
        elapsed = time.time() - self.t0
        done_its = it - kwargs["start_it"] + 1
        eta = elapsed / done_its * (total - it - 1)
        sps = steps / max(collect + learn, 1e-9)
        succ = f"{100 * success:5.1f}%" if episodes else "  n/a"
        coll = f"{100 * collision:5.1f}%" if episodes else "  n/a"
        print(
            f"it {it + 1:>5}/{total} | steps {self.env_steps / 1e6:7.2f}M | {sps:7.0f} steps/s "
            f"(collect {collect:4.1f}s, learn {learn:4.1f}s) | success {succ} collision {coll} "
            f"({episodes} ep) | lr {kwargs['learning_rate']:.1e} | elapsed {elapsed / 60:5.1f} min | "
            f"ETA {eta / 60:5.1f} min",
            flush=True,
        )


class NavRunner(OnPolicyRunner):
    def __init__(self, env: Any, train_cfg: dict, nav_cfg: NavConfig, log_dir: str | None, device: str = "cpu") -> None:
        self.nav_cfg = nav_cfg
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        self.logger = ProgressLogger(
            log_dir=log_dir,
            cfg=self.cfg,
            env_cfg=self.env.cfg,
            num_envs=self.env.num_envs,
            is_distributed=self.is_distributed,
            gpu_world_size=self.gpu_world_size,
            gpu_global_rank=self.gpu_global_rank,
            device=self.device,
        )

    # Checkpoints -------------------------------------------------------------------------------
    def save(self, path: str, infos: dict | None = None) -> None:
        saved = self.alg.save()
        saved["iter"] = self.current_learning_iteration
        saved["infos"] = {"nav_config": to_dict(self.nav_cfg), "obs_groups": self.cfg["obs_groups"], **(infos or {})}
        atomic_torch_save(saved, path)
        latest = Path(path).with_name(LATEST)
        atomic_torch_save(saved, latest)

    def load(
        self, path: str, load_cfg: dict | None = None, strict: bool = True, map_location: str | None = None
    ) -> dict:
        loaded = load_checkpoint(path, map_location=map_location or self.device)
        if self.alg.load(loaded, load_cfg, strict):
            # The saved iteration has completed: continue with the next one.
            self.current_learning_iteration = int(loaded["iter"]) + 1
        return loaded["infos"] or {}
