"""Probe: every driving tick's guard inputs in one batch of a compare row, the policy behind the node's
gate with its guard steering by STEER degrees (0: as trained), for judging a rule change offline.

    python runs/compare/probes/guard_ticks.py BUNDLE STEER OUT.json [ROW] [NUM_ENVS] [SEED] [SWEEP_LAG] [AXIS_BRAKE]

AXIS_BRAKE 1: rule step 5b (the per-axis path judged too, a stop brakes along the measured velocity).
"""

import json
import sys
from dataclasses import replace

import numpy as np
import torch

from navcontract.guard import GuardRule  # noqa: F401  (the trace's rule is read with it)
from navdeploy.node_params import NodeParams
from navsim.outcomes import OUTCOMES
from navtrain.compare import TOP_LEVEL, parse_rows
from navtrain.evaluation import bundle_evaluator, eval_env, run_episodes, with_overrides
from navtrain.kept_batches import start_batch

bundle, steer, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
row = parse_rows(sys.argv[4] if len(sys.argv) > 4 else "clutter")[0]
num_envs = int(sys.argv[5]) if len(sys.argv) > 5 else 100
seed = int(sys.argv[6]) if len(sys.argv) > 6 else 1000003
lag = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
axis_brake = bool(int(sys.argv[8])) if len(sys.argv) > 8 else False
overrides = [*row.overrides, *TOP_LEVEL]
evaluator = bundle_evaluator(bundle, "policy", overrides, None, node=NodeParams())
cfg = with_overrides(evaluator.cfg, overrides)
env, seed = eval_env(cfg, num_envs, seed, num_envs, evaluator.device)
act = evaluator.make_act(env)
act.settings = replace(act.settings, guard=replace(act.settings.guard, steer=steer, sweep_lag=lag, axis_brake=axis_brake))
rooms = start_batch(env, act, torch.Generator(device=env.device), seed, 0)
ticks = []


def watch(world, now, res):
    gate = act.gates[world]
    report = getattr(gate.driver, "last_scan_report", None)
    if res.guard_scale is None or gate._checked is None or report is None:
        return
    ticks.append(
        {
            "world": world,
            "t": round(now, 2),
            "scale": float(res.guard_scale),
            "checked": [float(v) for v in gate._checked],
            "twist": [float(v) for v in gate.odom.value[1]],
            "ranges": [round(float(v), 4) for v in np.asarray(report.ranges)],
            "unseen": [int(j) for j in np.flatnonzero(np.asarray(report.filled, dtype=bool))],
        }
    )


act.watch = watch
res, _ = run_episodes(env, act, rooms, label=f"guard ticks {row.name} steer {steer:g}")
json.dump(
    {
        "bundle": bundle,
        "steer": steer,
        "sweep_lag": lag,
        "axis_brake": axis_brake,
        "row": row.name,
        "seed": seed,
        "guard": act.gates[0].guard.to_dict(),
        "max_range": float(act.gates[0].max_range),
        "outcome": [str(OUTCOMES[int(o)]) for o in res["outcome"]],
        "time_s": [float(t) for t in res["time_s"]],
        "ticks": ticks,
    },
    open(out, "w"),
)
print(f"wrote {out}: {len(ticks)} ticks, outcomes {dict(zip(*np.unique([str(OUTCOMES[int(o)]) for o in res['outcome']], return_counts=True)))}")
