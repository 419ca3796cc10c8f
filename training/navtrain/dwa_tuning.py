"""Tune / evaluate the DWA baseline (navdeploy.dwa) in the one-room C MuJoCo world, on TRAINING rooms.

Each seed gives the training generator's room (``SimWorld.make_room(seed)``); the planner drives
the robot from the start pose to the goal, one control period per step, with the scan, odometry
pose and body twist the world produces, until the episode ends as training judges it (collision,
out of bounds, goal reached, timeout). Rooms must come from the training seed stream: seeds at or
above ``runner.eval_seed`` (the evaluation stream) are refused.

::

    python -m navtrain.dwa_tuning --seeds 0:200                      # defaults of navdeploy/dwa.yaml
    python -m navtrain.dwa_tuning --seeds 0:100 --set w_clearance=0.5 --set horizon_s=1.5
    python -m navtrain.dwa_tuning --seeds 0:100 --sweep w_clearance=0.1,0.3,0.5

Prints one JSON line per configuration: success / collision / timeout / out-of-bounds rates, mean
time to goal over successes, and the planner's mean / p99 compute time per step.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import yaml

from navcontract.bundle import Contract, make_contract, parse_contract
from navcontract.scan import ScanInput
from navdeploy.dwa import DwaParams, DwaPlanner
from navsim.config import NavConfig
from navsim.config_load import load_config, to_dict
from navsim.contract_objects import action_scaling, base_spec, policy_spec
from navsim.sim_world import SimWorld


@dataclass
class TuningResult:
    episodes: int
    success_rate: float
    collision_rate: float
    timeout_rate: float
    out_of_bounds_rate: float
    mean_time_to_goal_s: float
    step_ms_mean: float
    step_ms_p99: float
    failures: dict[str, list[int]]
    params: dict[str, Any]


def contract_for(cfg: NavConfig) -> Contract:
    """The contract a bundle trained with ``cfg`` would carry (no network needed)."""
    r = cfg.env.robot
    spec = policy_spec(cfg)
    args = (
        spec,
        action_scaling(cfg),
        cfg.env.control_period,
        cfg.env.goal_tolerance,
        1e-2,
        {"source": {"nav_config": to_dict(cfg)}},
    )
    if "robot_radius" in inspect.signature(make_contract).parameters:
        return parse_contract(make_contract(*args, robot_radius=r.radius, base=base_spec(cfg)))
    return parse_contract(make_contract(*args))


# SimWorld's outcome names (older versions said "reached" / "collided").
_OUTCOME_NAMES = {"reached": "success", "collided": "collision"}


def run_episode(world: SimWorld, planner: DwaPlanner, seed: int, step_times: list[float]) -> tuple[str, float]:
    room = world.make_room(seed)
    world.reset(room)
    planner.reset()
    nb = world.num_beams
    while True:
        out = world.outcome()
        if out is not None:
            name = str(getattr(out, "value", out))
            return _OUTCOME_NAMES.get(name, name), world.steps * world.control_period
        scan = ScanInput.training_beams(world.scan(), nb)
        t0 = time.perf_counter()
        cmd = planner.step(scan, world.pose(), world.body_twist(), room.goal)
        step_times.append(time.perf_counter() - t0)
        world.step(cmd)


def evaluate(cfg: NavConfig, params: DwaParams, seeds: list[int]) -> TuningResult:
    eval_seed = int(cfg.runner.eval_seed)
    bad = [s for s in seeds if s >= eval_seed]
    if bad:
        raise SystemExit(f"seeds {bad[:5]}... are in the evaluation stream (>= runner.eval_seed {eval_seed})")
    world = SimWorld(cfg)
    planner = DwaPlanner(contract_for(cfg), params)
    outcomes: dict[str, list[int]] = {}
    times_to_goal: list[float] = []
    step_times: list[float] = []
    for seed in seeds:
        out, t = run_episode(world, planner, seed, step_times)
        outcomes.setdefault(out, []).append(seed)
        if out == "success":
            times_to_goal.append(t)
    n = len(seeds)
    st = np.asarray(step_times) * 1e3

    def rate(k: str) -> float:
        return len(outcomes.get(k, [])) / n

    return TuningResult(
        episodes=n,
        success_rate=rate("success"),
        collision_rate=rate("collision"),
        timeout_rate=rate("timeout"),
        out_of_bounds_rate=rate("out_of_bounds"),
        mean_time_to_goal_s=float(np.mean(times_to_goal)) if times_to_goal else math.nan,
        step_ms_mean=float(st.mean()) if st.size else math.nan,
        step_ms_p99=float(np.percentile(st, 99)) if st.size else math.nan,
        failures={k: v for k, v in outcomes.items() if k != "success"},
        params=params.to_dict(),
    )


def _seeds(text: str) -> list[int]:
    if ":" in text:
        a, b = text.split(":", 1)
        return list(range(int(a), int(b)))
    return [int(s) for s in text.split(",") if s.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=None, help="nav config (default conf/nav.yaml)")
    ap.add_argument("--params", default=None, help="DWA parameters YAML (default navdeploy/dwa.yaml)")
    ap.add_argument("--seeds", default="0:200", help="training room seeds: 'a:b' or 'a,b,c' (default 0:200)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one parameter")
    ap.add_argument("--sweep", default=None, metavar="KEY=V1,V2,...", help="evaluate each value of one parameter")
    ap.add_argument("--verbose", action="store_true", help="also print the failing seeds")
    args = ap.parse_args(argv)

    cfg = load_config(args.config)
    base = DwaParams.from_yaml(args.params).to_dict()
    for item in args.set:
        key, _, value = item.partition("=")
        base[key.strip()] = yaml.safe_load(value)
    variants = [base]
    if args.sweep:
        key, _, values = args.sweep.partition("=")
        variants = [{**base, key.strip(): yaml.safe_load(v)} for v in values.split(",")]
    seeds = _seeds(args.seeds)
    for v in variants:
        params = DwaParams.from_dict(v, where="--set/--sweep")
        res = asdict(evaluate(cfg, params, seeds))
        if not args.verbose:
            res.pop("failures")
        changed = {k: val for k, val in res.pop("params").items() if val != DwaParams().to_dict()[k]}
        print(json.dumps({**res, "changed_from_class_defaults": changed}), flush=True)


if __name__ == "__main__":
    main()
