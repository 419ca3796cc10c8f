"""Train the lidar navigation policy with rsl_rl PPO in batched MuJoCo Warp worlds.

    python training/train.py [--config conf/nav.yaml] [--num-envs N] [--max-iterations N]
                             [--device cpu|cuda] [--run-name NAME] [--resume PATH] [--seed S]
                             [section.key=value ...]

Without a GPU the run is sized for a small CPU (the config's ``presets.cpu``). At the end
the final policy is evaluated on unseen rooms and exported to an ONNX bundle; the paths of the
checkpoint, TensorBoard logs, evaluation and bundle are printed.

Multi-GPU: ``torchrun --nproc_per_node=G training/train.py --device cuda`` (rsl_rl's
distributed mode; each rank steps its own worlds on its own GPU).

Bad input (config, overrides, sizes, a ``--resume`` checkpoint that is missing, corrupt or
observes something else than the config) is one line on stderr and exit code 2, before the worlds
are built. SIGINT / SIGTERM save the last consistent state and exit 130 (a PPO update in progress
finishes first; a second signal waits for the save). A failed final export exits 1 and keeps the
checkpoint and evaluation. See docs/failures.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import torch
import yaml

from navsim.config import CPU_PRESET
from navsim.config_load import DEFAULT_CONFIG, REPO_ROOT, load_config, to_dict
from navtrain.cli import EXIT_INTERRUPTED, EXIT_USAGE, CliError, OneLineParser, at_least, report

TOOL = "nav-train"


def parse_args(argv: list[str] | None = None):
    p = OneLineParser(prog=TOOL, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML config (default: conf/nav.yaml)")
    p.add_argument(
        "--num-envs", type=at_least(1), help="parallel worlds (default: env.num_envs, or presets.cpu.num_envs on CPU)"
    )
    p.add_argument(
        "--max-iterations",
        type=at_least(0),
        help="PPO iterations (default: runner.max_iterations / presets.cpu.*); 0 only with --no-export and without --resume",
    )
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--run-name", default=None)
    p.add_argument("--resume", default=None, help="checkpoint to continue from (iteration count and LR continue)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation")
    p.add_argument("--no-export", action="store_true", help="skip the final ONNX export")
    p.add_argument("--eval-episodes", type=at_least(1), default=None)
    p.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. algorithm.learning_rate=1e-4")
    return p.parse_intermixed_args(argv)


def pick_device(requested: str) -> str:
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise CliError("--device cuda requested but torch sees no CUDA device")
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


RANK = int(os.environ.get("RANK", "0"))
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))


def main(argv: list[str] | None = None) -> int:
    try:
        return run(parse_args(argv))
    except CliError as err:
        report(TOOL, err)
        return EXIT_USAGE


def prepare(args) -> tuple:
    """Everything that can be wrong with the input, checked before any world is built:
    config and overrides, sizes, device, the --resume checkpoint, the run folder.
    Returns (cfg, device, num_envs, iterations, log_dir, name)."""
    from navtrain.checkpoint import CheckpointError, check_resume

    try:
        cfg = load_config(args.config, args.overrides)
    except ValueError as err:  # ConfigError, and the observation / reward registries' errors
        raise CliError(f"config error: {err}") from None
    device = pick_device(args.device)
    on_cpu = device == "cpu"
    preset = cfg.presets[CPU_PRESET] if on_cpu else None
    num_envs = args.num_envs if args.num_envs is not None else (preset.num_envs if preset else cfg.env.num_envs)
    iterations = (
        args.max_iterations
        if args.max_iterations is not None
        else (preset.max_iterations if preset else cfg.runner.max_iterations)
    )
    if iterations == 0 and args.resume:
        raise CliError("--max-iterations 0 with --resume continues nothing; give --max-iterations >= 1")
    if iterations == 0 and not args.no_export:
        raise CliError(
            "--max-iterations 0 trains nothing, and an untrained policy cannot be exported; "
            "add --no-export to save the untrained checkpoint, or train >= 1 iteration"
        )
    if preset:
        cfg.algorithm.num_mini_batches = preset.num_mini_batches
    cfg.env.num_envs = num_envs
    cfg.env.device = device
    if args.seed is not None:
        cfg.env.seed = args.seed
    if args.run_name is not None:
        cfg.runner.run_name = args.run_name
    if args.resume:
        try:
            check_resume(args.resume, cfg)
        except CheckpointError as err:
            raise CliError(f"--resume: {err}") from None

    if RANK > 0:  # another process of a torchrun: its own worlds, no run folder (rank 0 logs and saves)
        cfg.env.seed += 1000 * RANK
        return cfg, device, num_envs, iterations, None, f"rank{RANK}"
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    name = f"{stamp}_{cfg.runner.run_name}" if cfg.runner.run_name else stamp
    log_dir = Path(cfg.runner.log_root)
    if not log_dir.is_absolute():
        log_dir = Path.cwd() / log_dir
    log_dir = log_dir / cfg.runner.experiment_name / name
    try:
        log_dir.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise CliError(f"run folder {log_dir} exists already; give another --run-name") from None
    except OSError as err:
        raise CliError(f"cannot create the run folder {log_dir}: {err.strerror or err}") from None
    try:
        (log_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    except OSError as err:
        raise CliError(f"cannot write in the run folder {log_dir}: {err.strerror or err}") from None
    return cfg, device, num_envs, iterations, log_dir, name


def run(args) -> int:
    cfg, device, num_envs, iterations, log_dir, name = prepare(args)
    torch.manual_seed(cfg.env.seed)
    if device == "cpu":
        # The most threads a PPO update may use (navtrain.runner.ThreadPhases times 1 and this many
        # and keeps the faster; collection runs on one): the cores, shared among torchrun's ranks.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // WORLD_SIZE))

    from navsim.env import NavEnv
    from navtrain.ppo_config import runner_cfg
    from navtrain.runner import LATEST, NavRunner, StopSignals

    print(
        f"[train] device {device} | {num_envs} worlds | {iterations} iterations x {cfg.runner.num_steps_per_env} steps"
        f" = {num_envs * cfg.runner.num_steps_per_env * iterations / 1e6:.1f}M env steps | logs {log_dir}",
        flush=True,
    )
    t0 = time.time()
    stop = StopSignals(TOOL)
    stop.install()
    runner = None
    trained = False
    checkpoint = None if log_dir is None else log_dir / LATEST
    try:
        print("[train] building the MuJoCo Warp worlds (first run compiles kernels, ~30-60 s on CPU)", flush=True)
        env = NavEnv(cfg, num_envs=num_envs, device=device)
        if cfg.env.init_at_random_ep_len:
            env.randomize_episode_lengths()
        train_cfg = runner_cfg(cfg, env.obs_manager.obs_groups())
        runner = NavRunner(env, train_cfg, cfg, log_dir=None if log_dir is None else str(log_dir), device=device)
        runner.stop = stop
        if args.resume:
            try:
                runner.load(args.resume)
            except (RuntimeError, KeyError, ValueError) as err:  # e.g. a critic of another shape
                raise CliError(f"--resume: {args.resume} does not fit this run: {err}") from None
            print(
                f"[train] resumed from {args.resume} at iteration {runner.current_learning_iteration}, "
                f"learning rate {runner.alg.learning_rate:.2e}",
                flush=True,
            )
            if runner.restored_curriculum:
                levels = runner.env.curriculum.state()
                print(
                    "[train] curriculum levels restored (worlds per level): "
                    + ", ".join(f"{f} {levels[f]}" for f in runner.restored_curriculum),
                    flush=True,
                )
        print(f"[train] ready in {time.time() - t0:.0f} s; obs groups {train_cfg['obs_groups']}", flush=True)
        runner.learn(iterations, init_at_random_ep_len=False)
        trained = True
        if WORLD_SIZE > 1:
            print(f"[train] rank {RANK}/{WORLD_SIZE} weights sha256 {runner.weights_digest()}", flush=True)
            end_process_group()
        if log_dir is None:  # not rank 0: rank 0 evaluates, exports and reports
            return 0
        check_normalizer(runner)
        print(f"[train] training took {(time.time() - t0) / 60:.1f} min", flush=True)
        return finish(args, cfg, device, log_dir, name, checkpoint)
    except KeyboardInterrupt:
        stop.acknowledge()  # any further signal waits for the save below
        if runner is None:
            report(TOOL, f"interrupted before training started; nothing saved (run folder {log_dir})")
        elif log_dir is None:
            report(TOOL, f"rank {RANK} interrupted (rank 0 saves the run)")
        elif trained:
            report(TOOL, f"interrupted during the final evaluation or export; the trained checkpoint is {checkpoint}")
        else:
            path = runner.save_interrupted(log_dir)
            what = "untrained state" if runner.completed_iteration is None else "last completed iteration"
            report(TOOL, f"interrupted: {what} ({runner.current_learning_iteration}) saved to {path}")
        return EXIT_INTERRUPTED
    finally:
        stop.restore()


def end_process_group() -> None:
    """Every rank leaves together (a barrier), then tears the group down: a rank that exits while
    the others still talk to it (or with the group alive) is aborted by the collective backend."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def finish(args, cfg, device: str, log_dir: Path, name: str, checkpoint: Path) -> int:
    """The final evaluation and export of a finished run; a failed export exits 1."""
    outputs = {"checkpoint": str(checkpoint), "tensorboard": str(log_dir)}
    if not args.no_eval:
        from navtrain.evaluation import evaluate_checkpoint, plot_trace, write_json

        episodes = args.eval_episodes or cfg.runner.eval_episodes
        result, trace = evaluate_checkpoint(checkpoint, episodes=episodes, device=device)
        write_json(result, log_dir / "eval.json")
        if trace is not None:
            plot_trace(trace, cfg.env, log_dir / "eval.png", title=f"{name}")
        print(
            f"[train] evaluation ({result.episodes} unseen rooms): success {100 * result.success_rate:.1f}% "
            f"collision {100 * result.collision_rate:.1f}% timeout {100 * result.timeout_rate:.1f}% SPL {result.spl:.3f}",
            flush=True,
        )
        outputs["evaluation"] = str(log_dir / "eval.json")
        outputs["evaluation plot"] = str(log_dir / "eval.png")
    if not args.no_export:
        from navtrain.export import ExportError, export_bundle

        try:
            bundle = export_bundle(checkpoint, log_dir / "bundle")
        except ExportError as err:
            report(TOOL, f"export failed, no bundle written (checkpoint {checkpoint} kept): {err}")
            return 1
        outputs["bundle"] = str(bundle)
    print("[train] outputs:")
    for key, value in outputs.items():
        print(f"  {key:16s} {os.path.relpath(value, Path.cwd()) if value.startswith(str(REPO_ROOT)) else value}")
    print(f"  tensorboard --logdir {os.path.relpath(log_dir.parent, Path.cwd())}")
    return 0


def check_normalizer(runner: object) -> None:
    """The actor's normaliser must have learned statistics (mean not all 0, var not all 1)."""
    state = runner.alg.get_policy().state_dict()  # type: ignore[attr-defined]
    mean = state.get("obs_normalizer._mean")
    var = state.get("obs_normalizer._var")
    if mean is None:
        return
    if torch.all(mean == 0) or torch.all(var == 1):
        print(
            "[train] WARNING: the actor's observation normaliser has not moved from its initial values", file=sys.stderr
        )
    else:
        print(
            f"[train] normaliser check ok (|mean| max {mean.abs().max():.3f}, var range {var.min():.2e}..{var.max():.2e})"
        )


if __name__ == "__main__":
    sys.exit(main())
