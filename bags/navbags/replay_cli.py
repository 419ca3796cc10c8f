#!/usr/bin/env python3
"""Replay bags into a live policy node; compare its commands with the bag and the offline reference.

    nav-bag-replay tests/fixtures/bags/faults_seed42 --bundle tests/fixtures/bundle [--rate 1]
    nav-bag-replay robot_bag --bundle B --scan-topic /lidar/scan --odom-topic /wheel/odom --goal 2.0,1.5

A nav-bag-record bag: publishes its /goal_pose, /scan, /odom and /clock in recorded order into a fresh
``policy_node`` (use_sim_time), waits for its command after every control tick, and compares each
command with the recorded one and with the deploy runtime's offline reference. A third-party bag (no
/clock, no commands of this node): maps its topics onto the node's, ticks on a grid of its header
stamps (receive times where stamps are zero) and compares with the offline reference only. Prints
max |delta| and the per-topic accounting of every message; exits 1 if a bound is broken, no tick
was compared, or the node never connected, died or stopped answering (one line on stderr naming what
was missing), 2 (one line on stderr) if a bag or the bundle cannot be used. See docs/bags.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from navbags.bagio import BagError
from navbags.reference import NodeParams, load_runtime
from navbags.replay import ReplayAborted, replay_timeline
from navbags.rosproc import console_script
from navbags.timeline import InputMap, Timeline, load_timeline, parse_goal

PROG = "nav-bag-replay"


def _goal(text: str) -> tuple[float, float]:
    try:
        return parse_goal(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return v


class _Refused(Exception):
    """Why the replay cannot start, found before any node runs (printed in one line, exit 2)."""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("bags", nargs="+", help="bag folder(s)")
    ap.add_argument(
        "--bundle", required=True, help="the policy bundle (a nav-bag-record bag: the one it was recorded with)"
    )
    ap.add_argument(
        "--rate", type=float, default=0.0, help="time scale on recorded timing (1: as recorded; 0: no pacing)"
    )
    ap.add_argument("--stale-timeout", type=float, default=NodeParams.stale_timeout)
    ap.add_argument(
        "--control-period", type=float, default=0.0, help="node parameter control_period [s]; 0: the bundle's"
    )
    g = ap.add_argument_group("third-party bags (no /clock)")
    g.add_argument("--scan-topic", default=None, help="the bag's sensor_msgs/LaserScan topic (default /scan)")
    g.add_argument("--odom-topic", default=None, help="the bag's nav_msgs/Odometry topic (default /odom)")
    g.add_argument(
        "--goal-topic", default=None, help="the bag's geometry_msgs/PoseStamped goal topic (default /goal_pose)"
    )
    g.add_argument(
        "--goal", type=_goal, default=None, metavar="X,Y", help="a goal in the odometry frame (replaces the bag's)"
    )
    g.add_argument("--odom-frame", default=None, help="node parameter odom_frame (default: the bag's odometry frame)")
    g.add_argument(
        "--lidar-x", type=float, default=0.0, help="node parameter lidar_x [m]: the lidar forward of the centre"
    )
    g.add_argument(
        "--lidar-y", type=float, default=0.0, help="node parameter lidar_y [m]: the lidar left of the centre"
    )
    g.add_argument(
        "--lidar-yaw", type=float, default=0.0, help="node parameter lidar_yaw [rad]: its angle 0's direction"
    )
    g.add_argument(
        "--lidar-upside-down", action="store_true", help="node parameter lidar_upside_down: its angles run clockwise"
    )
    ap.add_argument("--tol-offline", type=float, default=1e-5)
    ap.add_argument("--tol-recorded", type=float, default=1e-4)
    ap.add_argument(
        "--timeout",
        type=_positive,
        default=30.0,
        help="seconds to wait for each command of the node (its start: at least 60 s)",
    )
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--fates", action="store_true", help="print every message's fate")
    ap.add_argument("--json", default=None, help="write a JSON report here")
    return ap


def _load(a: argparse.Namespace) -> tuple[Path, object, list[Timeline]]:
    """The bundle, its runtime and every bag's timeline. Everything that can refuse is checked here,
    before any node starts: the bundle, every bag, the node's console script; raises :class:`_Refused`
    with the reason."""
    bundle = Path(a.bundle)
    if not bundle.is_dir():
        raise _Refused(f"--bundle {bundle} is not a folder (expected policy.onnx + contract.json)")
    try:
        runtime = load_runtime(bundle)
    except Exception as exc:
        raise _Refused(f"--bundle {bundle} cannot be loaded: {type(exc).__name__}: {exc}") from None
    try:
        params = NodeParams(
            stale_timeout=a.stale_timeout,
            control_period=a.control_period,
            lidar_x=a.lidar_x,
            lidar_y=a.lidar_y,
            lidar_yaw=a.lidar_yaw,
            lidar_upside_down=a.lidar_upside_down,
        )
        inputs = InputMap(a.scan_topic, a.odom_topic, a.goal_topic, a.goal, a.odom_frame)
        timelines = [load_timeline(bag, runtime.contract, params, inputs, bundle=bundle) for bag in a.bags]
    except (BagError, ValueError) as exc:
        raise _Refused(str(exc)) from None
    try:
        console_script("policy_node")
    except FileNotFoundError as exc:
        raise _Refused(str(exc)) from None
    return bundle, runtime, timelines


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    a = _parser().parse_args(argv)
    try:
        bundle, runtime, timelines = _load(a)
    except _Refused as exc:
        print(f"{PROG}: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2

    ok = True
    reports = []
    for tl in timelines:
        try:
            rep = replay_timeline(tl, runtime, bundle, rate=a.rate, timeout=a.timeout, log_dir=a.log_dir)
        except ReplayAborted as exc:
            print(f"{PROG}: " + " ".join(str(exc).split()), file=sys.stderr)
            print(f"bag {tl.bag}: replay aborted\n  -> FAIL (aborted)")
            ok = False
            reports.append({"bag": str(tl.bag), "kind": tl.kind, "pass": False, "aborted": str(exc)})
            continue
        print(rep.summary())
        if a.fates:
            for i, f in sorted(rep.fates.items()):
                print(f"    #{i}: {f}")
        good = rep.ok(a.tol_offline, a.tol_recorded)
        why = "" if good or rep.compared else " (no tick compared)"
        print(f"  -> {'PASS' if good else 'FAIL'}{why}")
        ok &= good
        reports.append({**rep.as_json(), "bag": str(tl.bag), "pass": good})
    if a.json:
        Path(a.json).write_text(json.dumps(reports, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
