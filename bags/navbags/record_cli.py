#!/usr/bin/env python3
"""Record N seeded simulator episodes, driven by the policy node, into a rosbag2 (MCAP) bag.

    nav-bag-record --bundle tests/fixtures/bundle --seed 3 --episodes 2 \\
        --episode-length 6 --out /tmp/run.bag [--faults standard]

Starts sim_node (lockstep) and policy_node (use_sim_time) on a private loopback ROS domain; the
recorder relays the simulator's topics to the node (injecting faults with ``--faults standard``) and
writes what the node received and answered, plus the episode outcomes. See docs/bags.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from navbags.record import FaultPlan, record_episodes, standard_faults
from navbags.reference import NodeParams, load_runtime
from navbags.rosproc import console_script

PROG = "nav-bag-record"


def refusal(a: argparse.Namespace) -> str | None:
    """Why this recording cannot be made, in one line, found before anything starts; None if it can."""
    out, bundle = Path(a.out), Path(a.bundle)
    if out.exists() or out.is_symlink():
        return f"--out {out} already exists: give a new folder (nothing was recorded)"
    if out.parent.exists() and not out.parent.is_dir():
        return f"--out {out}: {out.parent} is not a folder"
    if a.episodes < 1:
        return f"--episodes must be >= 1, got {a.episodes}"
    if not bundle.is_dir():
        return f"--bundle {bundle} is not a folder (expected policy.onnx + contract.json)"
    try:
        load_runtime(bundle)
    except Exception as exc:
        return f"--bundle {bundle} cannot be loaded: {type(exc).__name__}: {exc}"
    for script in ("policy_node", "sim_node"):
        try:
            console_script(script)
        except FileNotFoundError as exc:
            return str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", required=True, help="policy bundle folder (policy.onnx + contract.json)")
    ap.add_argument("--out", required=True, help="bag folder to create (must not exist)")
    ap.add_argument("--seed", type=int, default=0, help="room seed of the first episode (episode k: seed + k)")
    ap.add_argument("--episodes", type=int, default=1)
    ap.add_argument("--episode-length", type=float, default=0.0, help="episode time limit [s]; 0: the config's")
    ap.add_argument("--faults", choices=["none", "standard"], default="none", help="inject the standard fault plan")
    ap.add_argument("--fault-episode", type=int, default=0, help="episode that gets the faults")
    ap.add_argument("--noise-std", type=float, default=-1.0, help="lidar noise [m]; negative: the config's")
    ap.add_argument("--stale-timeout", type=float, default=NodeParams.stale_timeout)
    ap.add_argument("--log-dir", default=None, help="where the node logs go (default: a temp folder)")
    ap.add_argument("--timeout", type=float, default=60.0, help="wall seconds to wait for any one step")
    a = ap.parse_args(argv)
    why = refusal(a)
    if why is not None:
        print(f"{PROG}: " + " ".join(why.split()), file=sys.stderr)
        return 2
    plan = FaultPlan()
    if a.faults == "standard":
        plan = standard_faults()
        plan.episode = a.fault_episode
    res = record_episodes(
        a.out,
        a.bundle,
        seed=a.seed,
        episodes=a.episodes,
        episode_length_s=a.episode_length,
        faults=plan,
        params=NodeParams(stale_timeout=a.stale_timeout),
        noise_std=a.noise_std,
        log_dir=a.log_dir,
        timeout=a.timeout,
    )
    size = sum(f.stat().st_size for f in Path(res.path).iterdir())
    print(f"wrote {res.path} ({size / 1024:.1f} KiB): {res.ticks} control ticks")
    print("messages: " + ", ".join(f"{t} {n}" for t, n in sorted(res.counts.items())))
    for e in res.episodes:
        print("episode " + json.dumps(e))
    for f in res.faults:
        print("fault   " + json.dumps(f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
