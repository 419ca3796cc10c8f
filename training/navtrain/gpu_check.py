"""One GPU check: simulator throughput at scale, a short training run to the default bar, one JSON.

    nav-gpu-check [--out DIR] [--device cuda] [--dry-run]
    bash scripts/gpu_check.sh [--dry-run]          # the same, after setting up

Steps (each prints progress; the JSON is written even when a step fails, with the error):

1. ``benchmark``: ``NavEnv.step`` env-steps/s (physics + lidar) at each of ``--sizes`` worlds
   (default 4096, 16384, 65536), through ``nav-benchmark-sim`` without the C reference.
2. ``training``: ``nav-train`` at ``--train-envs`` worlds (default 4096) for ``--max-iterations``,
   a checkpoint every ``--eval-every`` iterations; training env-steps/s from the run's wall time.
3. ``time_to_bar``: the checkpoints are evaluated in order on ``--eval-episodes`` unseen rooms
   until one meets the bar (success >= 97 %, collision <= 3 %, the CPU default's bar). Time to bar
   is the training wall time at which that checkpoint was written (evaluation time excluded).
4. ``peak_memory``: the device's peak used memory while the steps ran (``nvidia-smi`` polled from
   a separate process, so Warp's and torch's allocations count alike and no CUDA call interferes
   with graph capture), or the process's peak resident memory on the CPU.

``--dry-run`` shrinks every size (64/128 worlds, 3 iterations, 20 episodes of 3 s) so that the whole
pipeline runs on a CPU in a minute or two; the bar is then reported, not expected to be met.
Output: ``OUT/gpu_check.json`` with keys ``device``, ``benchmark`` (per world count:
``env_steps_per_s``, ``physics_steps_per_s``, ``lidar_steps_per_s``), ``training``
(``env_steps``, ``wall_s``, ``env_steps_per_s``, ``run_dir``), ``evaluations`` (per checkpoint:
iteration, training seconds, success, collision), ``time_to_bar_s`` (null when not reached),
``peak_memory_gib``, ``errors`` and ``total_s``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

BAR_SUCCESS = 0.97
BAR_COLLISION = 0.03


class PeakMemory:
    """Polls the device's used memory in a thread (CUDA) or reads the peak RSS (CPU)."""

    def __init__(self, device: str, period_s: float = 0.2) -> None:
        self.device, self.period_s = device, period_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _poll(self) -> None:
        index = self.device.split(":")[1] if ":" in self.device else "0"
        cmd = ["nvidia-smi", "-i", index, "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
        while not self._stop.is_set():
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                self.peak_bytes = max(self.peak_bytes, int(float(out.stdout.split()[0]) * 2**20))
            self._stop.wait(self.period_s)

    def __enter__(self) -> PeakMemory:
        if self.device.startswith("cuda") and shutil.which("nvidia-smi"):
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        elif self.device.startswith("cuda"):
            import torch

            self.peak_bytes = torch.cuda.max_memory_allocated(torch.device(self.device))
        else:
            self.peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    @property
    def gib(self) -> float:
        return self.peak_bytes / 2**30


def log(msg: str) -> None:
    print(f"[gpu-check] {msg}", flush=True)


def run_benchmark(sizes: list[int], device: str, steps: int, out: Path) -> dict[str, Any]:
    from navsim.benchmark import main as bench_main

    argv = ["--device", device, "--no-reference", "--steps", str(steps), "--json", str(out / "benchmark.json")]
    for n in sizes:
        argv += ["--num-envs", str(n)]
    code = bench_main(argv)
    if code != 0:
        raise RuntimeError(f"nav-benchmark-sim exited with {code}")
    return json.loads((out / "benchmark.json").read_text())["results"]


def run_training(args: argparse.Namespace, out: Path) -> tuple[dict[str, Any], list[tuple[int, Path, float]]]:
    from navtrain.train_cli import main as train_main

    log_root = out / "runs"
    argv = [
        "--device",
        args.device,
        "--num-envs",
        str(args.train_envs),
        "--max-iterations",
        str(args.max_iterations),
        "--run-name",
        "gpu_check",
        "--no-eval",
        "--no-export",
        f"runner.save_interval={args.eval_every}",
        f"runner.log_root={log_root}",
    ]
    t0 = time.time()
    code = train_main(argv)
    wall = time.time() - t0
    if code != 0:
        raise RuntimeError(f"nav-train exited with {code}")
    run_dir = max(log_root.glob("*/*gpu_check"), key=lambda p: p.stat().st_mtime)
    checkpoints = []
    for path in run_dir.glob("model_*.pt"):
        stem = path.stem.removeprefix("model_")
        if stem.isdigit():
            checkpoints.append((int(stem), path, path.stat().st_mtime - t0))
    checkpoints.sort()
    from navtrain.checkpoint import load_checkpoint

    ckpt = load_checkpoint(checkpoints[-1][1])
    steps_per_env = int(ckpt["infos"]["nav_config"]["runner"]["num_steps_per_env"])
    env_steps = args.train_envs * steps_per_env * args.max_iterations
    info = {"env_steps": env_steps, "wall_s": wall, "env_steps_per_s": env_steps / wall, "run_dir": str(run_dir)}
    return info, checkpoints


DRY_RUN = {
    "sizes": [32, 64],
    "bench_steps": 2,
    "train_envs": 32,
    "max_iterations": 2,
    "eval_every": 1,
    "eval_episodes": 8,
}
"""The dry run's sizes: every step of the check once, as small as it runs (CI runs it on the CPU)."""

DRY_RUN_EVAL = ["env.episode_length_s=3.0"]
"""The dry run evaluates 3 s episodes: it checks the pipeline, not the policy."""


def evaluate_until_bar(
    checkpoints: list[tuple[int, Path, float]], episodes: int, device: str, overrides: list[str] | None = None
) -> tuple[list[dict[str, Any]], float | None]:
    """Each checkpoint in order on ``episodes`` unseen rooms until one meets the bar (``overrides``:
    evaluation config overrides, e.g. the dry run's short episodes)."""
    from navtrain.evaluation import evaluate_checkpoint

    rows = []
    for it, path, train_s in checkpoints:
        result, _ = evaluate_checkpoint(path, episodes=episodes, device=device, overrides=overrides, plot_rooms=0)
        rows.append(
            {
                "iteration": it,
                "training_s": train_s,
                "success": result.success_rate,
                "collision": result.collision_rate,
            }
        )
        log(f"checkpoint {it}: success {100 * result.success_rate:.1f}% collision {100 * result.collision_rate:.1f}%")
        if result.success_rate >= BAR_SUCCESS and result.collision_rate <= BAR_COLLISION:
            return rows, train_s
    return rows, None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="gpu_check_out", help="folder for gpu_check.json and the run")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dry-run", action="store_true", help="tiny sizes on any device (CI runs it on the CPU)")
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384, 65536])
    p.add_argument("--bench-steps", type=int, default=50)
    p.add_argument("--train-envs", type=int, default=4096)
    p.add_argument("--max-iterations", type=int, default=150)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-episodes", type=int, default=500)
    args = p.parse_args(argv)
    if args.dry_run:
        for key, value in DRY_RUN.items():
            setattr(args, key, value)
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print("gpu-check: torch sees no CUDA device (use --device cpu with --dry-run)", file=sys.stderr)
            return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"device": args.device, "dry_run": args.dry_run, "errors": {}}
    t_start = time.time()
    with PeakMemory(args.device) as mem:
        for name, step in (
            ("benchmark", lambda: run_benchmark(args.sizes, args.device, args.bench_steps, out)),
            ("training", lambda: run_training(args, out)),
        ):
            log(f"{name} ...")
            try:
                value = step()
            except Exception as exc:  # keep going: the JSON says what failed
                traceback.print_exc()
                report["errors"][name] = f"{type(exc).__name__}: {exc}"
                continue
            if name == "training":
                report["training"], checkpoints = value
                try:
                    report["evaluations"], report["time_to_bar_s"] = evaluate_until_bar(
                        checkpoints, args.eval_episodes, args.device, DRY_RUN_EVAL if args.dry_run else None
                    )
                except Exception as exc:
                    traceback.print_exc()
                    report["errors"]["evaluation"] = f"{type(exc).__name__}: {exc}"
            else:
                report[name] = value
    report["peak_memory_gib"] = mem.gib
    report["total_s"] = time.time() - t_start
    if args.device.startswith("cuda"):
        import torch

        report["device_name"] = torch.cuda.get_device_name(torch.device(args.device))
    path = out / "gpu_check.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    log(f"wrote {path} in {report['total_s']:.0f} s; errors: {report['errors'] or 'none'}")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
