"""Evaluate a checkpoint on unseen rooms with the deterministic (mean-action) policy.

    python training/evaluate.py --checkpoint PATH [--episodes N] [--seed S] [--json out.json]
                                [--plot out.png] [--device cpu|cuda] [section.key=value ...]

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
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--episodes", type=int, default=500)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--json", default=None, help="write the metrics here")
    p.add_argument("--plot", default=None, help="PNG of several rooms with the driven paths")
    p.add_argument("--device", default="cpu")
    p.add_argument("--num-envs", type=int, default=None, help="worlds per batch (default: min(episodes, 500))")
    p.add_argument("overrides", nargs="*")
    args = p.parse_args(argv)
    if not Path(args.checkpoint).is_file():
        print(f"no such checkpoint: {args.checkpoint}", file=sys.stderr)
        return 2

    from navtrain.checkpoint import config_from_checkpoint, load_checkpoint
    from navtrain.evaluation import evaluate_checkpoint, plot_trace, write_json

    result, trace = evaluate_checkpoint(
        args.checkpoint,
        episodes=args.episodes,
        seed=args.seed,
        num_envs=args.num_envs,
        device=args.device,
        overrides=args.overrides,
    )
    print(json.dumps(asdict(result), indent=2))
    if args.json:
        write_json(result, args.json)
        print(f"[evaluate] wrote {args.json}")
    if args.plot and trace is not None:
        cfg = config_from_checkpoint(load_checkpoint(args.checkpoint))
        title = f"success {100 * result.success_rate:.1f}%  collision {100 * result.collision_rate:.1f}%  ({result.episodes} episodes)"
        plot_trace(trace, cfg.env, args.plot, title=title)
        print(f"[evaluate] wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
