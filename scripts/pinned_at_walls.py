#!/usr/bin/env python3
"""Where a checkpoint's timeouts end: pinned by the guard at a surface, or elsewhere.

    .venv/bin/python scripts/pinned_at_walls.py policies/jackal_default/checkpoint.pt [section.key=value ...] \\
        --families rooms clutter corridors --worlds 48 [--json out.json]

(overrides before ``--families``, which takes the rest of the names)

Drives the checkpoint's mean action (torch, batched, the training env with its guard and smoother)
on ``--worlds`` top-level worlds of each family from the evaluation seed's stream, randomisation
off. A timeout is *pinned* when the guard's scale stayed under 0.05 over the episode's last
``--tail`` steps, and *at a surface* when the robot's mean surface clearance over them was under
the guard's passing clearance less its radius (where a motion along a surface starts to be
capped). Also reports the mean |change of the commanded yaw rate| per tick. One line per family.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import torch

from navcontract.action import action_to_command
from navsim.contract_objects import guard_rule
from navtrain.checkpoint import build_actor
from navtrain.evaluation import checkpoint_for_evaluation, eval_env, torch_actor


def run_family(checkpoint: str, family: str, worlds: int, tail: int, overrides: list[str]) -> dict:
    ckpt, cfg = checkpoint_for_evaluation(
        checkpoint,
        [
            f"env.worlds.families={{{family}: 1.0}}",
            "env.worlds.curriculum.enabled=false",
            "randomization.enabled=false",
            *overrides,
        ],
    )
    rule = guard_rule(cfg)
    if rule is None:
        raise SystemExit(f"{checkpoint}: trained without a guard; nothing pins it")
    env, seed = eval_env(cfg, worlds, None, worlds, "cpu")
    act = torch_actor(build_actor(ckpt, cfg, env.device))
    gen = torch.Generator()
    gen.manual_seed(seed)
    env.reset(rooms=env.new_rooms(worlds, gen))
    obs = env.get_observations()
    finished = torch.zeros(worlds, dtype=torch.bool)
    success = torch.zeros(worlds, dtype=torch.bool)
    timeout = torch.zeros(worlds, dtype=torch.bool)
    scales, clearances = [], []
    prev_w = torch.zeros(worlds)
    turn_change, live_ticks = 0.0, 0
    for _ in range(env.max_episode_length):
        action = act(obs, ~finished)
        obs, _, dones, _ = env.step(action)
        w = action_to_command(action.float(), env.scaling)[:, -1]
        turn_change += float(torch.where(finished, 0.0, (w - prev_w).abs()).sum())
        live_ticks += int((~finished).sum())
        prev_w = w
        scales.append(env.guard_scale.numpy().copy())
        dist, _ = env.geometry.nearest(env.rooms, env.last_info.pose[:, None, :2])
        clearances.append(dist[:, 0].numpy() - env.radius)
        success |= env.last_info.success & ~finished
        timeout |= env.last_info.timeout & ~finished
        finished |= dones.bool()
        if bool(finished.all()):
            break
    scale, clear = np.array(scales)[-tail:], np.array(clearances)[-tail:]
    band = rule.passing_clearance(int(env.dims.num_beams)) - rule.radius
    stuck = np.flatnonzero(timeout.numpy())
    return {
        "family": family,
        "worlds": worlds,
        "seed": seed,
        "success": float(success.float().mean()),
        "collision": float((finished & ~success & ~timeout).float().mean()),
        "timeouts": len(stuck),
        "pinned": int(sum(scale[:, i].mean() < 0.05 for i in stuck)),
        "at_surface": int(sum(clear[:, i].mean() < band for i in stuck)),
        "surface_band_m": band,
        "mean_abs_dw_per_tick": turn_change / max(1, live_ticks),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--families", nargs="+", default=["rooms", "clutter", "corridors"])
    parser.add_argument("--worlds", type=int, default=48)
    parser.add_argument("--tail", type=int, default=50, help="steps at the end of a timeout that count")
    parser.add_argument("--json", default=None)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    rows = []
    for family in args.families:
        row = run_family(args.checkpoint, family, args.worlds, args.tail, args.overrides)
        rows.append(row)
        print(
            f"{family}: {row['worlds']} worlds, success {row['success']:.1%}, collision {row['collision']:.1%}, "
            f"timeouts {row['timeouts']}, pinned (guard < 0.05 for the last {args.tail} steps) {row['pinned']}, "
            f"within {row['surface_band_m'] * 100:.1f} cm of a surface {row['at_surface']}; "
            f"mean |dw| per tick {row['mean_abs_dw_per_tick']:.2f} rad/s",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"checkpoint": args.checkpoint, "tail_steps": args.tail, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
