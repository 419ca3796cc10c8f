"""NavRunner: rsl_rl's OnPolicyRunner with crash-safe checkpoints, a live progress line and resume.

- Checkpoints are written to a temporary file and renamed into place, so a crash mid-write never
  leaves a corrupt checkpoint; ``model_latest.pt`` always points at a complete one. They carry the
  resolved config (``infos["nav_config"]``) so export and evaluation need nothing else, and load
  with ``torch.load(..., weights_only=True)`` (:func:`navtrain.checkpoint.load_checkpoint`).
- Episode statistics come from the env through ``extras["log"]`` (rsl_rl's VecEnv contract) and
  go to TensorBoard through rsl_rl's own logger. :class:`ProgressLogger`, a subclass of that
  logger, prints one progress line per iteration instead of rsl_rl's multi-line report.
- Interrupts (SIGINT / SIGTERM through :class:`StopSignals`) stop the run only where its state is
  consistent: during the rollout at once (the weights are still those of the last update), but a
  PPO update and every checkpoint write finish first; the interrupt then ends the run at that
  iteration boundary. :meth:`NavRunner.save_interrupted` writes the last consistent state,
  labelled with the last completed iteration; any further signal waits for that save.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger

from navsim.config import NavConfig
from navsim.config_load import to_dict
from navsim.outcomes import Outcome
from navtrain.checkpoint import load_checkpoint

LATEST = "model_latest.pt"


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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


class StopSignals:
    """SIGINT and SIGTERM as a request to stop at a consistent point.

    Outside a :meth:`deferred` block a signal raises KeyboardInterrupt at once. Inside one (a PPO
    update, a checkpoint write) it is remembered and raised when the outermost block ends. Python
    drops an exception raised inside a finaliser (``__del__``) or a callback, so a request stays
    open until its owner calls :meth:`acknowledge` (its ``except KeyboardInterrupt`` did run):
    until then :meth:`check` raises it again at every iteration boundary, and so does a further
    signal. After :meth:`acknowledge`, further signals only print that the run is finishing its save.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, tool: str = "nav-train") -> None:
        self.tool = tool
        self.requested: int | None = None
        self.acknowledged = False
        self._depth = 0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Handle SIGINT and SIGTERM (main thread only); :meth:`restore` puts the old handlers back."""
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def acknowledge(self) -> None:
        """The interrupt reached its handler: further signals wait for the save it makes."""
        self.acknowledged = True

    def check(self) -> None:
        """Raise an open request again (one whose KeyboardInterrupt was swallowed on its way up)."""
        if self.requested is not None and not self.acknowledged and not self._depth:
            raise KeyboardInterrupt

    def _handle(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if self.acknowledged or self._depth:
            if self.requested is None:
                self.requested = signum
                print(f"\n[train] {name}: stopping after the update or save in progress", file=sys.stderr, flush=True)
            else:
                print(f"\n[train] {name}: still saving, please wait", file=sys.stderr, flush=True)
            return
        self.requested = signum
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Signals wait until the block (and any enclosing one) ends."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        self.check()


class ThreadPhases:
    """torch's intra-op threads per phase of a CPU iteration.

    Collection (simulator step, observation and reward terms, the actor's forward pass) is a long
    chain of small tensor operations: extra threads only add hand-offs, and when another process
    holds a core those hand-offs stall (nav-benchmark-sim --busy). Collection always runs on one
    thread.

    The PPO update is dense matrix work: on an idle 2-core machine 2 threads did it in 0.59 s
    against 1.08 s on one, but with one other busy process 2 threads took 1.84 s and one thread
    still 1.06 s. So the update's thread count is measured, not assumed: after a warm-up update
    it times one update on each candidate (1 and all the process's threads), keeps the faster, and
    times the other again every ``reprobe`` updates, so a machine that becomes busy (or idle)
    mid-run is followed. On CUDA both phases leave torch's setting alone.
    """

    def __init__(self, collect: int, candidates: Sequence[int], active: bool, reprobe: int = 25) -> None:
        self.collect_threads = collect
        self.candidates = sorted({max(1, int(n)) for n in candidates})
        self.active, self.reprobe = active, reprobe
        self.seconds: dict[int, float] = {}
        self.updates = 0
        self.chosen: int | None = None

    @classmethod
    def for_device(cls, device: str | torch.device) -> ThreadPhases:
        return cls(1, (1, torch.get_num_threads()), torch.device(device).type == "cpu")

    @contextlib.contextmanager
    def _threads(self, n: int) -> Iterator[None]:
        if not self.active:
            yield
            return
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def collection(self) -> contextlib.AbstractContextManager[None]:
        return self._threads(self.collect_threads)

    def next_update_threads(self) -> int:
        """The thread count for the next update: the largest first (warm-up, not timed), then each
        untimed candidate, then the fastest, with the others re-timed every ``reprobe`` updates."""
        if self.updates == 0:
            return self.candidates[-1]
        untimed = [n for n in self.candidates if n not in self.seconds]
        if untimed:
            return untimed[0]
        best = min(self.seconds, key=self.seconds.__getitem__)
        if self.updates % self.reprobe == 0:
            others = [n for n in self.candidates if n != best]
            if others:
                return others[(self.updates // self.reprobe) % len(others)]
        return best

    @contextlib.contextmanager
    def update(self) -> Iterator[None]:
        n = self.next_update_threads() if self.active else torch.get_num_threads()
        t0 = time.perf_counter()
        with self._threads(n):
            yield
        if self.active and self.updates > 0:
            self.seconds[n] = time.perf_counter() - t0
            best = min(self.seconds, key=self.seconds.__getitem__)
            if len(self.seconds) == len(self.candidates) and best != self.chosen:
                self.chosen = best
                times = ", ".join(
                    f"{k} thread{'s' if k > 1 else ''} {v:.2f} s" for k, v in sorted(self.seconds.items())
                )
                print(
                    f"[train] PPO update on {best} torch thread{'s' if best > 1 else ''} (measured: {times})",
                    flush=True,
                )
        self.updates += 1


class NavRunner(OnPolicyRunner):
    def __init__(self, env: Any, train_cfg: dict, nav_cfg: NavConfig, log_dir: str | None, device: str = "cpu") -> None:
        self.nav_cfg = nav_cfg
        self.stop = StopSignals()
        self.completed_iteration: int | None = None
        """The last iteration whose PPO update finished (or the resumed checkpoint's); None before any."""
        self._next_iteration = 0
        self._learn_start: float | None = None
        self.restored_curriculum: list[str] = []
        """Families whose curriculum levels :meth:`load` took from the checkpoint."""
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        self.threads = ThreadPhases.for_device(self.device)
        self._wrap_update()
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

    # Several processes (torchrun) ------------------------------------------------------------------
    def _configure_multi_gpu(self) -> None:
        """rsl_rl's multi-process set-up, on the CPU too: with ``WORLD_SIZE > 1`` each rank steps its
        own worlds; rsl_rl all-reduces gradients and normaliser statistics and only rank 0 logs and
        saves. CUDA ranks use NCCL (rsl_rl's own set-up, ``cuda:LOCAL_RANK``); CPU ranks use gloo."""
        world = int(os.getenv("WORLD_SIZE", "1"))
        if world <= 1 or str(self.device).startswith("cuda"):
            super()._configure_multi_gpu()
            return
        self.gpu_world_size, self.is_distributed = world, True
        self.gpu_local_rank = int(os.getenv("LOCAL_RANK", "0"))
        self.gpu_global_rank = int(os.getenv("RANK", "0"))
        self.cfg["multi_gpu"] = {
            "global_rank": self.gpu_global_rank,
            "local_rank": self.gpu_local_rank,
            "world_size": world,
        }
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group(backend="gloo", rank=self.gpu_global_rank, world_size=world)

    def weights_digest(self) -> str:
        """SHA-256 of the actor's and critic's parameters and normaliser buffers: equal on every rank
        of a multi-process run (printed at the end of each rank's training)."""
        import hashlib

        h = hashlib.sha256()
        for module in (self.alg.get_policy(), getattr(self.alg, "critic", None)):
            if module is None:
                continue
            for name, tensor in sorted(module.state_dict().items()):
                h.update(name.encode())
                h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()

    # Interrupts --------------------------------------------------------------------------------
    def _wrap_update(self) -> None:
        """The PPO update runs with signals deferred, and counts as done only once it has finished:
        the iteration number moves on together with the weights (rsl_rl sets it after the update)."""
        update = self.alg.update

        def update_whole() -> dict[str, float]:
            self.stop.check()  # an interrupt swallowed during collection stops the run here
            with self.stop.deferred(), self.threads.update():
                losses = update()
                self.completed_iteration = self.current_learning_iteration = self._next_iteration
                self._next_iteration += 1
            return losses

        self.alg.update = update_whole

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        self._next_iteration = self.current_learning_iteration
        self._learn_start = time.perf_counter()
        with self.threads.collection():
            super().learn(num_learning_iterations, init_at_random_ep_len)

    def save_interrupted(self, log_dir: str | Path) -> Path:
        """Save the last consistent state as ``model_<it>_interrupted.pt`` (and ``model_latest.pt``).

        ``<it>`` is the last completed iteration (the resumed one before the first update; 0 before
        any update of a fresh run). Signals wait for the save."""
        if self.completed_iteration is not None:
            self.current_learning_iteration = self.completed_iteration
        path = Path(log_dir) / f"model_{self.current_learning_iteration}_interrupted.pt"
        self.save(str(path))
        return path

    # Checkpoints -------------------------------------------------------------------------------
    def save(self, path: str, infos: dict | None = None) -> None:
        with self.stop.deferred():  # a signal never cuts a checkpoint or model_latest.pt short
            saved = self.alg.save()
            saved["iter"] = self.current_learning_iteration
            saved["infos"] = {
                "nav_config": to_dict(self.nav_cfg),
                "obs_groups": self.cfg["obs_groups"],
                # seconds of learn() so far in this process (collection + updates; no build, no eval)
                "train_elapsed_s": None if self._learn_start is None else time.perf_counter() - self._learn_start,
                "env_steps": getattr(getattr(self, "logger", None), "tot_timesteps", None),
                **self._curriculum_info(),
                **(infos or {}),
            }
            atomic_torch_save(saved, path)
            latest = Path(path).with_name(LATEST)
            atomic_torch_save(saved, latest)

    def _curriculum_info(self) -> dict:
        """The curriculum's level counts per family, when the env has a curriculum."""
        curriculum = getattr(self.env, "curriculum", None)
        if curriculum is None or not curriculum.enabled:
            return {}
        return {"curriculum": curriculum.state()}

    def load(
        self, path: str, load_cfg: dict | None = None, strict: bool = True, map_location: str | None = None
    ) -> dict:
        """Weights, optimiser and iteration; the curriculum's levels when both the checkpoint and
        this run have a curriculum (each world draws its level from its family's saved counts)."""
        loaded = load_checkpoint(path, map_location=map_location or self.device)
        if self.alg.load(loaded, load_cfg, strict):
            # The saved iteration has completed: continue with the next one.
            self.current_learning_iteration = int(loaded["iter"]) + 1
            self.completed_iteration = int(loaded["iter"])
        infos = loaded["infos"] or {}
        curriculum = getattr(self.env, "curriculum", None)
        if curriculum is not None and isinstance(infos.get("curriculum"), dict):
            self.restored_curriculum = curriculum.restore(infos["curriculum"], self.env.gen)
        return infos
