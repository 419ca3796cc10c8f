"""NavRunner: rsl_rl's OnPolicyRunner with crash-safe checkpoints, a live progress line and resume.

- Checkpoints are written to a temporary file and renamed into place, so a crash mid-write never
  leaves a corrupt checkpoint; ``model_latest.pt`` always points at a complete one. They carry the
  resolved config (``infos["nav_config"]``) so export and evaluation need nothing else, and load
  with ``torch.load(..., weights_only=True)``.
- rsl_rl's multi-line iteration report is replaced in the terminal by one progress line per
  iteration (TensorBoard gets every scalar as usual).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner

from navsim.config import NavConfig, to_dict

LATEST = "model_latest.pt"


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely (tensors and plain data only)."""
    return torch.load(path, map_location=map_location, weights_only=True)


class NavRunner(OnPolicyRunner):
    def __init__(self, env: Any, train_cfg: dict, nav_cfg: NavConfig, log_dir: str | None, device: str = "cpu") -> None:
        self.nav_cfg = nav_cfg
        self._t0 = time.time()
        self._start_it = 0
        self._total_it = 0
        self._env_steps = 0
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        self._wrap_logger()

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

    # Progress ----------------------------------------------------------------------------------
    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        self._t0 = time.time()
        self._start_it = self.current_learning_iteration
        self._total_it = self._start_it + num_learning_iterations
        super().learn(num_learning_iterations, init_at_random_ep_len=init_at_random_ep_len)

    def _wrap_logger(self) -> None:
        original = self.logger.log

        def log(**kwargs: Any) -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                original(**kwargs)
            self._progress(kwargs["it"], kwargs["collect_time"], kwargs["learn_time"])

        self.logger.log = log  # type: ignore[method-assign]

    def _progress(self, it: int, collect_time: float, learn_time: float) -> None:
        stats = self.env.pop_episode_stats()
        n_ep = stats["episodes"]
        writer = self.logger.writer
        if writer is not None and n_ep:
            for key, value in stats.items():
                if key != "episodes":
                    writer.add_scalar(key, value, it)
        steps = self.cfg["num_steps_per_env"] * self.env.num_envs
        self._env_steps += steps
        done_its = it - self._start_it + 1
        elapsed = time.time() - self._t0
        eta = elapsed / done_its * (self._total_it - it - 1)
        sps = steps / max(collect_time + learn_time, 1e-9)
        succ = f"{100 * stats['Episode_Termination/success']:5.1f}%" if n_ep else "  n/a"
        coll = f"{100 * stats['Episode_Termination/collision']:5.1f}%" if n_ep else "  n/a"
        line = (
            f"it {it + 1:>5}/{self._total_it} | steps {self._env_steps / 1e6:7.2f}M | {sps:7.0f} steps/s "
            f"(collect {collect_time:4.1f}s, learn {learn_time:4.1f}s) | success {succ} collision {coll} "
            f"({int(n_ep)} ep) | lr {self.alg.learning_rate:.1e} | elapsed {elapsed / 60:5.1f} min | ETA {eta / 60:5.1f} min"
        )
        print(line, flush=True)
        sys.stdout.flush()
