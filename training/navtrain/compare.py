"""The learned policy and the dynamic-window baseline, side by side on the same unseen rooms.

    nav-compare --bundle DIR [--episodes 500] [--seed S] [--out docs/results/baseline] [KEY=VALUE ...]

Both controllers are robot-side code built from the same bundle (the policy through its ONNX
runtime, the DWA planner from its contract), called world by world with the node's inputs (see
:func:`navtrain.evaluation.evaluate_controller`). Every row is a set of unseen rooms from the
evaluation seed stream; both controllers see the same rooms, starts and goals in each row.
Writes ``OUT.json`` (every metric of every run), ``OUT.md`` (the table of docs/results.md) and
``OUT.png`` (success and collision per row), and prints the table. Dotted overrides after the
options apply to every row, after the row's own (e.g. ``env.episode_length_s=20``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

# Rows: a name and the dotted overrides that make its rooms (on top of the bundle's training config).
ROWS: dict[str, list[str]] = {
    "training rooms (4-12 obstacles)": [],
    "dense rooms (16 obstacles)": ["env.room.num_obstacles=[16,16]"],
}
CONTROLLERS = ("policy", "dwa")


def table(results: dict[str, dict[str, dict]]) -> str:
    lines = [
        "| rooms | controller | success | collision | timeout | mean time to goal | SPL | compute per step |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row, by_ctrl in results.items():
        for name, r in by_ctrl.items():
            lines.append(
                f"| {row} | {name} | {100 * r['success_rate']:.1f} % | {100 * r['collision_rate']:.1f} % | "
                f"{100 * r['timeout_rate']:.1f} % | {r['mean_time_to_goal_s']:.2f} s | {r['spl']:.3f} | "
                f"{r['compute_ms_per_step']:.2f} ms |"
            )
    return "\n".join(lines) + "\n"


def verdicts(results: dict[str, dict[str, dict]]) -> list[str]:
    """Per row: does the policy beat the baseline on success and on mean time to goal?"""
    out = []
    for row, by_ctrl in results.items():
        p, d = by_ctrl["policy"], by_ctrl["dwa"]
        succ = p["success_rate"] > d["success_rate"]
        fast = p["mean_time_to_goal_s"] < d["mean_time_to_goal_s"]
        out.append(
            f"{row}: policy {'beats' if succ else 'does NOT beat'} dwa on success "
            f"({100 * p['success_rate']:.1f} % vs {100 * d['success_rate']:.1f} %) and "
            f"{'beats' if fast else 'does NOT beat'} it on time to goal "
            f"({p['mean_time_to_goal_s']:.2f} s vs {d['mean_time_to_goal_s']:.2f} s)"
        )
    return out


def plot(results: dict[str, dict[str, dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = list(results)
    x = np.arange(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, key, title in ((axes[0], "success_rate", "success"), (axes[1], "collision_rate", "collision")):
        for k, name in enumerate(CONTROLLERS):
            vals = [100 * results[r][name][key] for r in rows]
            bars = ax.bar(x + (k - 0.5) * 0.38, vals, 0.38, label=name)
            ax.bar_label(bars, fmt="%.1f", fontsize=8)
        ax.set_xticks(x, [r.replace(" (", "\n(") for r in rows], fontsize=8)
        ax.set_ylabel("%")
        ax.set_title(title)
    axes[0].legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", required=True, help="exported bundle folder (policy.onnx + contract.json)")
    p.add_argument("--episodes", type=int, default=500, help="rooms per row")
    p.add_argument("--seed", type=int, default=None, help="room seed (default: runner.eval_seed of the bundle)")
    p.add_argument("--dwa-params", default=None, help="DWA parameters YAML (default: navdeploy/dwa.yaml)")
    p.add_argument("--out", default="baseline", help="output stem: OUT.json, OUT.md, OUT.png")
    p.add_argument("overrides", nargs="*", help="dotted config overrides for every row, after the row's own")
    args = p.parse_args(argv)
    if not (Path(args.bundle) / "policy.onnx").is_file():
        print(f"no bundle (policy.onnx + contract.json) in {args.bundle}", file=sys.stderr)
        return 2

    from navtrain.evaluation import evaluate_controller

    results: dict[str, dict[str, dict]] = {}
    for row, overrides in ROWS.items():
        results[row] = {}
        for name in CONTROLLERS:
            res, _ = evaluate_controller(
                args.bundle,
                name,
                episodes=args.episodes,
                seed=args.seed,
                overrides=[*overrides, *args.overrides],
                plot_rooms=0,
                dwa_params=args.dwa_params,
            )
            results[row][name] = asdict(res)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = table(results)
    notes = verdicts(results)
    payload = {
        "bundle": str(args.bundle),
        "episodes_per_row": args.episodes,
        "rows": ROWS,
        "overrides": args.overrides,
        "results": results,
    }
    payload["verdicts"] = notes
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
    out.with_suffix(".md").write_text(text + "\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    plot(results, out.with_suffix(".png"))
    print(text)
    print("\n".join(notes))
    print(f"wrote {out.with_suffix('.json')}, {out.with_suffix('.md')}, {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
