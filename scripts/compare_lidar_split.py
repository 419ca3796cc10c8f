"""Split a nav-compare row by the worlds each world's lidar lets the guard pass.

    python scripts/compare_lidar_split.py docs/results/compare/STEM.json ROW

Draws the row's worlds again from the comparison's seed (its overrides, the bundle's training
randomisation, one batch as nav-compare runs them), takes each world's lidar error at the guard's
passing distance (``navtrain.safety_suite.lidar_error``: the calibration's short reading plus one
standard deviation of the noise) and counts each driver's success among the worlds whose path keeps
the guard's clearance plus that error (``passable_for_lidar``) and among the rest. Behind the node's
gate only (the guard's clearance is the node's). Planning every world at each error level takes
minutes on a CPU.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch

from navdeploy.node_params import NodeParams
from navsim.outcomes import OUTCOMES, Outcome
from navtrain import safety_suite
from navtrain.evaluation import bundle_evaluator, eval_env


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: compare_lidar_split.py COMPARE.json ROW", file=sys.stderr)
        return 2
    payload = json.loads(open(argv[0]).read())
    if not payload.get("node_gate"):
        print("compare_lidar_split: the comparison ran without the node's gate (--bare)", file=sys.stderr)
        return 2
    row = payload["rows"][argv[1]]
    n = int(payload["episodes_per_row"])
    evaluator = bundle_evaluator(payload["bundle"], "policy", row["overrides"], None, node=NodeParams())
    env, seed = eval_env(evaluator.cfg, n, payload["seed"], None, evaluator.device)
    if env.num_envs != n:
        print(f"compare_lidar_split: {n} worlds ran in batches; this splits one batch only", file=sys.stderr)
        return 2
    act = evaluator.make_act(env)
    gen = torch.Generator(device=env.device)
    gen.manual_seed(seed)
    rooms = env.new_rooms(env.num_envs, gen)
    env.reset(rooms=rooms)  # draws each world's randomisation as the comparison's run did
    clearance = safety_suite.passable_clearance(act, env)
    error = safety_suite.lidar_error(env, clearance)
    ok = safety_suite.passable_for_lidar(env, rooms, clearance, error)
    print(f"{argv[1]}: {int(ok.sum())} of {n} worlds keep the guard's {clearance:.3f} m plus their lidar's error")
    success, timeout = OUTCOMES.index(Outcome.SUCCESS), OUTCOMES.index(Outcome.TIMEOUT)
    for name, episodes in row["episodes"].items():
        oc = np.asarray(episodes["outcome"])
        rest = f"{np.mean(oc[~ok] == success):.1%}" if (~ok).any() else "-"
        print(
            f"  {name}: {np.mean(oc == success):.1%} of all; {np.mean(oc[ok] == success):.1%} of those "
            f"({int((oc[ok] == timeout).sum())} timeouts); {rest} of the other {int((~ok).sum())}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
