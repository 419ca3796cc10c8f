"""Latency of the policy node between two processes: scan published -> /cmd_vel received.

Starts ``policy_node`` (the installed console script) as its own process and drives it from this
one over loopback DDS (private domain, UDPv4 on 127.0.0.1 only). Two modes:

``clock`` (default): the node runs on simulated time; for every message this process publishes a
  scan and odometry stamped t, then /clock = t; the node's control timer fires on that clock tick,
  runs the policy on that scan and publishes /cmd_vel. The measured wall time from the scan's
  publish call to the command's arrival is the whole pipeline (two DDS hops, resampling,
  observation, ONNX inference, clamping) without the phase of the control timer.
``wall``: the node runs on wall time with its own timer (``--control-period``) while scans stream
  in at ``--scan-rate``; the latency of a command is its arrival time minus the publish time of
  the newest scan the node had (the scan age the robot actually acts on, timer phase included).

Also reports the node's own inference time (status topic) and its resident memory (VmRSS and
peak VmHWM from /proc). Not a test: run it and copy the numbers into docs/ros2.md.

    nav-benchmark-latency --messages 2000
    nav-benchmark-latency --mode wall --control-period 0.02 --messages 1000
    python -m navbags.latency --bundle /path/to/bundle      # the same

Uses only installed packages: the policy node's console script and config (``nav_policy``), the
loopback / process helpers of :mod:`navbags.rosproc`. The bundle defaults to ``$NAV_POLICY_BUNDLE``,
else ``tests/fixtures/bundle`` under the current directory (the repository's trained fixture).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from navbags.rosproc import DomainLease, NodeProc, RosSide, console_script, node_processes

FIXTURE_BUNDLE = Path("tests") / "fixtures" / "bundle"


def default_bundle() -> Path:
    """``$NAV_POLICY_BUNDLE``, else the repository's fixture bundle (run from the repository root)."""
    env = os.environ.get("NAV_POLICY_BUNDLE")
    bundle = Path(env) if env else FIXTURE_BUNDLE
    if not (bundle / "policy.onnx").is_file():
        raise SystemExit(
            f"no policy bundle at '{bundle}': pass --bundle (a folder with policy.onnx + contract.json), set "
            "NAV_POLICY_BUNDLE, or run from the repository root (tests/fixtures/bundle)"
        )
    return bundle


def proc_memory(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, val = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = float(val.split()[0]) / 1024.0  # MiB
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--bundle",
        type=Path,
        default=None,
        help="bundle folder (default: $NAV_POLICY_BUNDLE, else tests/fixtures/bundle under the current directory)",
    )
    ap.add_argument("--messages", type=int, default=2000, help="measured messages (>= 1000 for the README numbers)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--mode", choices=("clock", "wall"), default="clock")
    ap.add_argument("--control-period", type=float, default=0.02, help="wall mode: node timer period [s]")
    ap.add_argument("--scan-rate", type=float, default=200.0, help="wall mode: scans per second")
    ap.add_argument("--beams", type=int, default=72, help="beams per published scan (resampled by the node)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)

    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import String

    from nav_policy.paths import config_file
    from nav_policy.ros_common import GOAL_QOS, SENSOR_QOS, ns_to_stamp

    work = Path(tempfile.mkdtemp(prefix="nav_latency_"))
    bundle = (args.bundle or default_bundle()).resolve()
    sim_time = args.mode == "clock"
    lease = DomainLease()
    cmd = [
        console_script("policy_node"),
        "--ros-args",
        "--params-file",
        str(config_file("policy.yaml")),
        "-p",
        f"bundle_path:={bundle}",
        "-p",
        f"use_sim_time:={'true' if sim_time else 'false'}",
        "-p",
        "stale_timeout:=1.0",
    ]
    if not sim_time:
        cmd += ["-p", f"control_period:={args.control_period}"]
    results: dict[str, object] = {}
    with node_processes() as procs:
        proc = NodeProc(cmd, lease.domain_id, work / "policy_node.log")
        procs.append(proc)
        tn = RosSide(lease.domain_id, "latency_bench")
        n = tn.node
        scan_pub = n.create_publisher(LaserScan, "/scan", SENSOR_QOS)
        odom_pub = n.create_publisher(Odometry, "/odom", 10)
        goal_pub = n.create_publisher(PoseStamped, "/goal_pose", GOAL_QOS)
        clock_pub = n.create_publisher(Clock, "/clock", 10)
        arrivals: list[float] = []
        status: list[dict] = []
        n.create_subscription(Twist, "/cmd_vel", lambda m: arrivals.append(time.perf_counter()), 100)
        n.create_subscription(String, "/nav_policy/status", lambda m: status.append(json.loads(m.data)), 100)
        tn.spin_until(
            lambda: (
                scan_pub.get_subscription_count() > 0
                and goal_pub.get_subscription_count() > 0
                and (clock_pub.get_subscription_count() > 0 or not sim_time)
            ),
            60,
            "policy node",
            procs,
        )
        rng = np.random.default_rng(0)
        scan = LaserScan()
        scan.header.frame_id = "base_link"
        scan.angle_min = -math.pi
        scan.angle_increment = 2 * math.pi / args.beams
        scan.angle_max = scan.angle_min + (args.beams - 1) * scan.angle_increment
        scan.range_min, scan.range_max = 0.05, 6.0
        odom = Odometry()
        odom.header.frame_id, odom.child_frame_id = "odom", "base_link"
        odom.pose.pose.orientation.w = 1.0
        goal = PoseStamped()
        goal.header.frame_id = "odom"
        goal.pose.position.x = 50.0  # never reached: the node keeps driving
        goal_pub.publish(goal)

        lat: list[float] = []
        lost = 0
        if sim_time:
            t_ns = 1_000_000_000
            period_ns = 100_000_000
            k = -1
            while len(lat) < args.messages:
                k += 1
                t_ns += period_ns
                scan.ranges = (2.0 + rng.random(args.beams)).astype(np.float32).tolist()
                ns_to_stamp(t_ns, scan.header.stamp)
                odom.header.stamp = scan.header.stamp
                clock = Clock()
                ns_to_stamp(t_ns, clock.clock)
                before = len(arrivals)
                t0 = time.perf_counter()
                scan_pub.publish(scan)
                odom_pub.publish(odom)
                clock_pub.publish(clock)
                deadline = time.perf_counter() + 1.0
                while len(arrivals) == before and time.perf_counter() < deadline:
                    tn.executor.spin_once(timeout_sec=0.1)
                assert proc.alive(), proc.output()[-3000:]
                if len(arrivals) == before:
                    if k >= args.warmup:
                        lost += 1
                    continue  # a clock tick the node did not see (discovery still settling): next one
                driving = bool(status) and status[-1]["state"] == "driving"
                if k >= args.warmup and driving:
                    lat.append((arrivals[before] - t0) * 1e3)
        else:
            sent: list[float] = []
            period = 1.0 / args.scan_rate
            deadline = time.perf_counter()
            start_idx = None
            while start_idx is None or len(arrivals) - start_idx < args.messages:
                deadline += period
                scan.ranges = (2.0 + rng.random(args.beams)).astype(np.float32).tolist()
                scan.header.stamp = odom.header.stamp = n.get_clock().now().to_msg()
                sent.append(time.perf_counter())
                scan_pub.publish(scan)
                odom_pub.publish(odom)
                while (left := deadline - time.perf_counter()) > 0:
                    tn.executor.spin_once(timeout_sec=left)
                if start_idx is None and len(arrivals) > args.warmup:
                    start_idx = len(arrivals)
                assert proc.alive(), proc.output()[-3000:]
            sent_arr = np.asarray(sent)
            for a in arrivals[start_idx : start_idx + args.messages]:
                # the newest scan published before the command arrived: the scan age the robot acts on
                i = int(np.searchsorted(sent_arr, a)) - 1
                if i >= 0:
                    lat.append((a - sent_arr[i]) * 1e3)
        mem = proc_memory(proc.pid)
        inf = [s["inference_ms"] for s in status if s.get("inference_ms") is not None]
        tn.close()
    lease.release()
    results = {
        "mode": args.mode,
        "messages": len(lat),
        "beams": args.beams,
        "bundle": str(bundle),
        "unanswered_ticks": lost if sim_time else None,
        "latency_ms": {"p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99), "max": max(lat)},
        "node_inference_ms": {"p50": pct(inf, 50), "p99": pct(inf, 99)} if inf else None,
        "node_memory_mib": mem,
    }
    if not sim_time:
        results["control_period_s"] = args.control_period
        results["scan_rate_hz"] = args.scan_rate
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
