"""Evaluate a checkpoint, or a robot-side controller from a bundle, on unseen rooms.

    python training/evaluate.py --checkpoint PATH [--episodes N] [--seed S] [--json out.json]
                                [--plot out.png] [--device cpu|cuda] [section.key=value ...]
    python training/evaluate.py --bundle DIR --controller policy|dwa [--dwa-params YAML] [...]

``--checkpoint``: the deterministic (mean-action) policy, batched in torch. ``--bundle``: what the
robot runs, world by world on the CPU: ``policy`` is the bundle's ONNX policy through the
runtime, ``dwa`` the dynamic-window baseline built from the bundle's contract (both report their
compute time per call); the rooms follow the bundle's training config.

Auto-reset is off: every world runs one episode, and its end is read directly. Rooms come from a
seed stream never used in training (default: runner.eval_seed of the checkpoint's config). Prints
and writes success / collision / timeout rates, mean time to goal and SPL (reference path: the
straight start-goal line, see navtrain/evaluation.py). Overrides change the evaluation rooms, e.g.
``env.room.num_obstacles=[16,16]`` for denser rooms than training.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="training checkpoint (.pt): the torch actor")
    src.add_argument("--bundle", help="exported bundle folder: a robot-side controller (see --controller)")
    p.add_argument("--controller", choices=["policy", "dwa"], default="policy", help="with --bundle")
    p.add_argument("--dwa-params", default=None, help="DWA parameters YAML (default: navdeploy/dwa.yaml)")
    p.add_argument("--episodes", type=int, default=500)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--json", default=None, help="write the metrics here")
    p.add_argument("--plot", default=None, help="PNG of several rooms with the driven paths")
    p.add_argument("--device", default="cpu")
    p.add_argument("--num-envs", type=int, default=None, help="worlds per batch (default: min(episodes, 500))")
    p.add_argument("overrides", nargs="*")
    args = p.parse_args(argv)
    if args.checkpoint and not Path(args.checkpoint).is_file():
        print(f"no such checkpoint: {args.checkpoint}", file=sys.stderr)
        return 2
    if args.bundle and not (Path(args.bundle) / "policy.onnx").is_file():
        print(f"no bundle (policy.onnx + contract.json) in {args.bundle}", file=sys.stderr)
        return 2

    from navtrain.checkpoint import config_from_checkpoint, load_checkpoint
    from navtrain.evaluation import evaluate_checkpoint, evaluate_controller, plot_trace, with_overrides, write_json

    if args.checkpoint:
        result, trace = evaluate_checkpoint(
            args.checkpoint,
            episodes=args.episodes,
            seed=args.seed,
            num_envs=args.num_envs,
            device=args.device,
            overrides=args.overrides,
        )
        env_cfg = config_from_checkpoint(load_checkpoint(args.checkpoint)).env
    else:
        result, trace = evaluate_controller(
            args.bundle,
            args.controller,
            episodes=args.episodes,
            seed=args.seed,
            num_envs=args.num_envs,
            overrides=args.overrides,
            dwa_params=args.dwa_params,
        )
        env_cfg = with_overrides(bundle_config(args.bundle), args.overrides).env
    print(json.dumps(asdict(result), indent=2))
    if args.json:
        write_json(result, args.json)
        print(f"[evaluate] wrote {args.json}")
    if args.plot and trace is not None:
        title = f"{result.controller}: success {100 * result.success_rate:.1f}%  collision {100 * result.collision_rate:.1f}%  ({result.episodes} episodes)"
        plot_trace(trace, env_cfg, args.plot, title=title)
        print(f"[evaluate] wrote {args.plot}")
    return 0


def bundle_config(bundle: str | Path):
    """The training config a bundle records (contract ``source.nav_config``)."""
    from navdeploy.bundle import read_contract
    from navsim.config import config_from_data

    return config_from_data(read_contract(bundle).raw["source"]["nav_config"], where=f"{bundle} contract")


if __name__ == "__main__":
    sys.exit(main())
