"""Time to bar: when a training run's saved checkpoints first reach an evaluation bar.

    nav-time-to-bar RUN_DIR [--success 0.97] [--collision 0.03] [--episodes 500] [--all] [--json out.json]
                    [section.key=value ...]

Evaluates the run's ``model_<iteration>.pt`` checkpoints in iteration order on unseen rooms
(``navtrain.evaluation.evaluate_checkpoint``: the mean action, the checkpoint's own config, seeds
never used in training) and prints, per checkpoint, the iteration, the environment steps, the
training time so far, success and collision; it stops at the first checkpoint that meets the bar
(``--all``: evaluates every one). The training time is the ``train_elapsed_s`` the runner stores
in each checkpoint (collection and updates only: no world building, no final evaluation); for a
checkpoint without it, the file's modification time minus the run's ``config.yaml`` (written
before the worlds are built, so a little longer). Overrides change the evaluation conditions, e.g.
``randomization.enabled=false`` to judge a randomised run under nominal conditions. Bad input is
one line and exit 2.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from navtrain.cli import CliError, OneLineParser, at_least, report

TOOL = "nav-time-to-bar"
CHECKPOINT = re.compile(r"model_(\d+)\.pt$")


def checkpoints(run: Path) -> list[tuple[int, Path]]:
    """The run's ``model_<iteration>.pt`` files, by iteration."""
    found = [(int(m.group(1)), p) for p in run.iterdir() if (m := CHECKPOINT.search(p.name))]
    return sorted(found)


def training_time(ckpt: dict, path: Path, run: Path) -> tuple[float, str]:
    infos = ckpt.get("infos") or {}
    elapsed = infos.get("train_elapsed_s") if isinstance(infos, dict) else None
    if elapsed is not None:
        return float(elapsed), "train_elapsed_s"
    return path.stat().st_mtime - (run / "config.yaml").stat().st_mtime, "file times"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=TOOL, description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a training run folder (holds config.yaml and model_<it>.pt)")
    parser.add_argument("--success", type=float, default=0.97, help="bar: success rate at least this")
    parser.add_argument("--collision", type=float, default=0.03, help="bar: collision rate at most this")
    parser.add_argument("--episodes", type=at_least(1), default=500, help="unseen rooms per checkpoint")
    parser.add_argument("--all", action="store_true", help="evaluate every checkpoint, not only up to the bar")
    parser.add_argument("--json", default=None, help="write the rows here")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("overrides", nargs="*", help="evaluation overrides, e.g. randomization.enabled=false")
    args = parser.parse_intermixed_args(argv)
    try:
        run = Path(args.run)
        if not (run / "config.yaml").is_file():
            raise CliError(f"{run} is not a training run folder (no config.yaml)")
        found = checkpoints(run)
        if not found:
            raise CliError(f"{run} holds no model_<iteration>.pt checkpoints")
        from navtrain.checkpoint import load_checkpoint
        from navtrain.evaluation import evaluate_checkpoint

        rows, reached = [], None
        print(f"{'iteration':>9} {'env steps':>10} {'train min':>9} {'success':>8} {'collision':>9}", flush=True)
        for it, path in found:
            ckpt = load_checkpoint(path)
            elapsed, source = training_time(ckpt, path, run)
            steps = (ckpt.get("infos") or {}).get("env_steps")
            res, _ = evaluate_checkpoint(
                path, episodes=args.episodes, device=args.device, overrides=args.overrides, plot_rooms=0
            )
            ok = res.success_rate >= args.success and res.collision_rate <= args.collision
            rows.append(
                {
                    "iteration": it,
                    "checkpoint": str(path),
                    "env_steps": steps,
                    "train_elapsed_s": elapsed,
                    "elapsed_from": source,
                    "success_rate": res.success_rate,
                    "collision_rate": res.collision_rate,
                    "timeout_rate": res.timeout_rate,
                    "episodes": res.episodes,
                    "meets_bar": ok,
                }
            )
            shown = f"{steps / 1e6:.2f}M" if steps else "-"
            print(
                f"{it:>9} {shown:>10} {elapsed / 60:>9.1f} {res.success_rate:>8.1%} {res.collision_rate:>9.1%}"
                + ("  <- bar" if ok and reached is None else ""),
                flush=True,
            )
            if ok and reached is None:
                reached = rows[-1]
                if not args.all:
                    break
        bar = f"success >= {args.success:.1%} and collision <= {args.collision:.1%} on {args.episodes} rooms"
        if reached is None:
            print(f"[{TOOL}] no checkpoint of {run} meets the bar ({bar})")
        else:
            print(
                f"[{TOOL}] bar ({bar}) first met at iteration {reached['iteration']} after "
                f"{reached['train_elapsed_s'] / 60:.1f} min of training ({reached['elapsed_from']})"
            )
        if args.json:
            payload = {"run": str(run), "bar": bar, "overrides": args.overrides, "reached": reached, "rows": rows}
            Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
        return 0
    except CliError as err:
        report(TOOL, err)
        return 2


if __name__ == "__main__":
    sys.exit(main())
