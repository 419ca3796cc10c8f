"""One batch of a safety-suite row with the scan map's ``return_filter`` set, for paired comparisons.

    python scripts/scan_map_filter_batch.py --driver dwa|policy --filter N [--batch B] [--row posts270]
        [--seed 1000003] [--episode-s 30] [--bundle DIR] --json OUT.json

Runs batch ``B`` of the row (its 100 worlds, as ``nav-evaluate --suite safety --num-envs 100`` runs
them: the same worlds, noise and randomisation for every ``--filter``) behind the node's gate, with
the node's defaults except the scan map's ``return_filter`` (:class:`navdeploy.scan_map.ScanMapCfg`).
Writes the row's counts and each episode's outcome and time, so that two runs pair episode by episode.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from navdeploy.node_params import NodeParams
from navtrain import safety_suite
from navtrain.evaluation import bundle_evaluator, with_scan_map

DEFAULT_BUNDLE = "ros2_ws/src/nav_policy/nav_policy/default_bundle"
KEPT = (
    "success_rate",
    "collisions",
    "passable",
    "stuck_in_passable",
    "stalled_in_passable",
    "passable_nominal",
    "stuck_in_passable_nominal",
    "stuck_worlds",
    "episode_outcomes",
    "episode_time_s",
)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--driver", choices=["dwa", "policy"], required=True)
    p.add_argument("--filter", type=int, required=True, help="the scan map's return_filter (scans)")
    p.add_argument("--batch", type=int, default=0, help="which batch of 100 worlds of the row")
    p.add_argument("--row", default="posts270", choices=safety_suite.row_names())
    p.add_argument("--seed", type=int, default=1000003)
    p.add_argument("--episode-s", type=float, default=30.0)
    p.add_argument("--bundle", default=DEFAULT_BUNDLE)
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    if args.filter < 1 or args.batch < 0:
        p.error("--filter must be >= 1 and --batch >= 0")
    ev = bundle_evaluator(Path(args.bundle), args.driver, node=NodeParams(), map_beams=720)
    ev = with_scan_map(ev, return_filter=args.filter)
    first = safety_suite.start_batch
    safety_suite.start_batch = lambda env, act, gen, seed, batch: first(env, act, gen, seed, batch + args.batch)
    out = safety_suite.run_suite(
        ev, episodes=100, seed=args.seed, num_envs=100, rows=[args.row], episode_s=args.episode_s
    )
    row = out["rows"][0]
    kept = {k: row[k] for k in KEPT}
    kept.update(driver=args.driver, return_filter=args.filter, batch=args.batch, row=args.row, seed=args.seed)
    Path(args.json).write_text(json.dumps(kept, indent=1) + "\n")
    print(
        f"[filter] {args.driver} return_filter {args.filter}, {args.row} batch {args.batch}: success "
        f"{100 * row['success_rate']:.0f} %, stuck {row['stuck_in_passable']}/{row['passable']} passable"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
