#!/usr/bin/env python3
"""How each driver moves behind the node's gate: the share of control ticks it drives backward, and
its mean forward speed, on the same worlds of one nav-compare row.

    .venv/bin/python scripts/command_shares.py runs/recipes/jackal_noise/final/bundle \\
        [--row rooms] [--episodes 100] [--seed 1000003] [--json out.json]

Both drivers (the bundle's policy and the DWA from its contract) run behind the node's gate
(:class:`navtrain.evaluation.NodeActor`, the node's default parameters) on the row's worlds, as
``nav-compare`` runs them. Per driver: success, mean time to goal, the share of ticks whose sent
command drives backward (``vx`` under -0.05 m/s), the worlds in which more than a fifth of the ticks
do, and the mean ``|vx|`` sent.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from navdeploy.node_params import NodeParams
from navtrain.compare import TOP_LEVEL
from navtrain.evaluation import bundle_evaluator
from navtrain.families_suite import ROWS

BACKWARD = -0.05  # [m/s] a sent vx under this drives backward


def shares(bundle: str, row: str, episodes: int, seed: int) -> dict[str, Any]:
    chosen = next((r for r in ROWS if r.name == row), None)
    if chosen is None:
        raise SystemExit(f"command_shares: no row '{row}' (rows: {', '.join(r.name for r in ROWS)})")
    overrides = [*chosen.overrides, *TOP_LEVEL]
    out: dict[str, Any] = {"bundle": bundle, "row": row, "episodes": episodes, "seed": seed, "drivers": {}}
    for driver in ("policy", "dwa"):
        evaluator = bundle_evaluator(bundle, driver, overrides, node=NodeParams())
        sent: dict[int, list[np.ndarray]] = {}
        make_act = evaluator.make_act

        def make(env: Any, make_act: Any = make_act, sent: dict[int, list[np.ndarray]] = sent) -> Any:
            act = make_act(env)
            act.watch = lambda world, now, res: sent.setdefault(world, []).append(np.asarray(res.cmd, dtype=float))
            return act

        result, _ = replace(evaluator, make_act=make).run(episodes=episodes, seed=seed, num_envs=episodes, plot_rooms=0)
        back = np.array([(np.array(c)[:, 0] < BACKWARD).mean() for c in sent.values()])
        speed = np.array([np.abs(np.array(c)[:, 0]).mean() for c in sent.values()])
        out["drivers"][driver] = {
            "success": result.success_rate,
            "mean_time_to_goal_s": result.mean_time_to_goal_s,
            "share_of_ticks_backward": float(back.mean()),
            "worlds_backward_over_a_fifth": int((back > 0.2).sum()),
            "mean_abs_vx": float(speed.mean()),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle")
    ap.add_argument("--row", default="rooms")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1000003)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    out = shares(a.bundle, a.row, a.episodes, a.seed)
    for driver, d in out["drivers"].items():
        print(
            f"{driver}: success {100 * d['success']:.1f} %, time {d['mean_time_to_goal_s']:.2f} s, "
            f"backward on {100 * d['share_of_ticks_backward']:.1f} % of ticks "
            f"({d['worlds_backward_over_a_fifth']} worlds over a fifth), mean |vx| {d['mean_abs_vx']:.2f} m/s"
        )
    if a.json is not None:
        a.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
