"""Latency of the policy node between two processes: scan published -> /cmd_vel received.

Starts ``policy_node`` (the installed console script) as its own process and drives it from this
one over loopback DDS (private domain, UDPv4 on 127.0.0.1 only). Two modes:

``clock`` (default): the node runs on simulated time; for every message (one every ``--pace``
  seconds of wall time, 0.1 s by default: as fast as the robot's 10 Hz, or back to back) this
  process publishes a scan and odometry stamped t, then /clock = t; the node's control timer fires
  on that clock tick, runs the policy on that scan and publishes /cmd_vel. The measured wall time from the scan's
  publish call to the command's arrival is the whole pipeline (two DDS hops, resampling,
  observation, ONNX inference, clamping) without the phase of the control timer. ``latency_ms``
  ends when this process's callback of the command runs (its wake-up and executor included);
  ``latency_received_ms`` when the command reached this process's DDS reader, and
  ``latency_to_node_publish_ms`` when the node's publish call sent it (the middleware's stamps on the
  system clock, against the system clock read before the scan's publish call).
``wall``: the node runs on wall time with its own timer (``--control-period``) while scans stream
  in at ``--scan-rate``; the latency of a command is its arrival time minus the publish time of
  the newest scan the node had (the scan age the robot actually acts on, timer phase included).

In both modes the odometry follows the node's commands (:class:`Odometer`) and the scans are those
of a straight corridor seen from that pose (:func:`corridor_ranges`), so the robot makes progress
toward a goal :data:`GOAL_DISTANCE` ahead along the corridor and its progress checker never stops it.
Each run starts the node with the scan map on (its default), off, or both one after the other
(``--scan-map``, default both), on the executor the node spins on (``--executor``: its default
``events``, ``single_threaded``, or both side by side). Also reports the node's own inference time
and tick time (timer callback to the command's publish call; status topic, after the warm-up) and
its resident memory (VmRSS and peak VmHWM from /proc). ``--floor`` first drives the floor node
(:mod:`navbags.floor_node`: the policy node's topics, timer and executor, no work) the same way: the
latency any node has on this machine and middleware, below which the policy node cannot go. Not a
test: run it and copy the numbers into docs/ros2.md.

    nav-benchmark-latency --messages 2000
    nav-benchmark-latency --floor --messages 1000          # the floor beside the policy node
    nav-benchmark-latency --mode wall --control-period 0.02 --messages 1000
    python -m navbags.latency --bundle /path/to/bundle      # the same

Uses only installed packages: the policy node's console script and config (``nav_policy``), the
loopback / process helpers of :mod:`navbags.rosproc`. The bundle defaults to ``$NAV_POLICY_BUNDLE``,
else ``tests/fixtures/bundle`` under the current directory (the repository's trained fixture).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from navbags.rosproc import DomainLease, NodeProc, RosSide, console_script, node_processes
from navdeploy.bench_cli import add_bundle_option, bundle_or_default

FIXTURE_BUNDLE = Path("tests") / "fixtures" / "bundle"
MAX_TICKS_PER_MESSAGE = 3
"""Clock mode gives up (one line, exit code 1) after this many ticks per requested message: a node
that stays out of ``driving`` would otherwise be waited for forever."""
CLOCK_PERIOD_S = 0.1
"""[s] Clock mode: simulated time per tick, the policy node's control period in its installed config."""
GOAL_DISTANCE = 1000.0
"""[m] The goal, straight ahead of the start: further than any benchmark drives."""
CORRIDOR_HALF_WIDTH = 2.0
"""[m] The scans are those of a straight corridor along the way to the goal, walls this far either side
of its axis (with the scan map on, the map holds two walls and the path runs between them)."""
RANGE_NOISE = 0.01
"""[m] Uniform noise on every return."""


def corridor_ranges(pose: Odometer, beams: int, rng: np.random.Generator) -> list[float]:
    """``beams`` ranges (all round from -pi, body frame) of the corridor's walls seen from ``pose``: the
    distance along each beam to the wall it meets, with :data:`RANGE_NOISE`; ``+inf`` (no return) where
    the wall is beyond the scan's 6 m range."""
    phi = pose.yaw - math.pi + np.arange(beams) * (2.0 * math.pi / beams)
    sin = np.sin(phi)
    with np.errstate(divide="ignore"):
        wall = np.where(sin > 0, (CORRIDOR_HALF_WIDTH - pose.y) / sin, (-CORRIDOR_HALF_WIDTH - pose.y) / sin)
    wall = np.where(np.abs(sin) < 1e-9, np.inf, wall) + rng.uniform(-RANGE_NOISE, RANGE_NOISE, beams)
    return np.where(wall > 6.0, np.inf, wall).astype(np.float32).tolist()


def bundle_arg(given: Path | None) -> Path:
    """``--bundle``, else ``$NAV_POLICY_BUNDLE``, else the repository's fixture bundle (run from the
    repository root), resolved."""
    return bundle_or_default(given, FIXTURE_BUNDLE).resolve()


def print_results(results: dict[str, Any], path: Path | None) -> None:
    """The benchmark's results as JSON on stdout and, with ``--json``, in ``path`` too."""
    text = json.dumps(results, indent=2)
    print(text)
    if path:
        path.write_text(text + "\n")


def proc_memory(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, val = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = float(val.split()[0]) / 1024.0  # MiB
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bundle_option(ap, str(FIXTURE_BUNDLE))
    ap.add_argument("--messages", type=int, default=2000, help="measured messages (>= 1000 for docs/results.md)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--mode", choices=("clock", "wall"), default="clock")
    ap.add_argument(
        "--pace",
        type=float,
        default=0.1,
        help="clock mode: wall time between the starts of two ticks [s]; 0.1 (default): simulated time runs as "
        "fast as wall time, scans at the robot's 10 Hz; 0: back to back (the scan map's worker then gets scans "
        "about 30 times faster than a robot's lidar gives them)",
    )
    ap.add_argument("--control-period", type=float, default=0.02, help="wall mode: node timer period [s]")
    ap.add_argument("--scan-rate", type=float, default=200.0, help="wall mode: scans per second")
    ap.add_argument("--beams", type=int, default=72, help="beams per published scan (resampled by the node)")
    ap.add_argument(
        "--scan-map",
        choices=("on", "off", "both"),
        default="both",
        help="the node's scan_map parameter; both: one run with it on (the default), then one with it off",
    )
    ap.add_argument(
        "--executor",
        choices=("events", "single_threaded", "both"),
        default="events",
        help="the node's executor parameter (default: events, the node's default); both: each scan-map run "
        "once per executor, side by side",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="first run the floor node (navbags.floor_node: the policy node's topics, timer and executor, no "
        "work) the same way: what this machine and middleware cost any node",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    return ap.parse_args(argv)


def node_command(
    bundle: Path, sim_time: bool, control_period: float, scan_map: bool = True, executor: str = "events"
) -> list[str]:
    """The policy node's command line: its installed config, ``bundle``, simulated or wall time (wall:
    its own timer at ``control_period``), a stale timeout of 1 s, the scan map on (the default) or off,
    the ``executor`` it spins on."""
    from nav_policy.paths import config_file

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
        "-p",
        f"executor:={executor}",
    ]
    if not sim_time:
        cmd += ["-p", f"control_period:={control_period}"]
    if not scan_map:
        cmd += ["-p", "scan_map:=false"]
    return cmd


def floor_command(sim_time: bool, control_period: float, executor: str = "events") -> list[str]:
    """The floor node's command line (:mod:`navbags.floor_node`): the policy node's topics, timer and
    ``executor``, on simulated time with the policy node's 0.1 s period or on wall time with
    ``control_period``."""
    return [
        sys.executable,
        "-m",
        "navbags.floor_node",
        "--ros-args",
        "-p",
        f"use_sim_time:={'true' if sim_time else 'false'}",
        "-p",
        f"control_period:={CLOCK_PERIOD_S if sim_time else control_period}",
        "-p",
        f"executor:={executor}",
    ]


@dataclass
class _Link:
    """This process's side of the benchmark: publishers of the node's inputs, and what came back (the
    arrival time of every /cmd_vel, every status)."""

    ros: RosSide
    scan_pub: Any
    odom_pub: Any
    goal_pub: Any
    clock_pub: Any
    arrivals: list[float] = field(default_factory=list)
    stamps: list[tuple[int, int]] = field(default_factory=list)  # per /cmd_vel: (sent, received) [ns, system clock]
    status: list[dict] = field(default_factory=list)
    command: tuple[float, float, float] = (0.0, 0.0, 0.0)  # the newest /cmd_vel: vx, vy [m/s], wz [rad/s]

    def on_command(self, msg: Any, info: Any) -> None:
        """A /cmd_vel: when this callback ran, and the middleware's stamps of its publish call in the node
        (``source_timestamp``) and of its arrival in this process's reader (``received_timestamp``)."""
        self.arrivals.append(time.perf_counter())
        self.stamps.append((int(info["source_timestamp"]), int(info["received_timestamp"])))
        self.command = (msg.linear.x, msg.linear.y, msg.angular.z)


@dataclass
class Odometer:
    """The robot's pose as the node's commands move it (a base that does what it is told): the
    node keeps making progress toward its goal, so its progress checker never stops it and every
    tick measured is a driving one."""

    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0

    def advance(self, command: tuple[float, float, float], dt: float, odom: Any) -> None:
        """Move by ``command`` (body frame) for ``dt`` seconds and write the pose and twist into ``odom``."""
        vx, vy, wz = command
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        self.x += (c * vx - s * vy) * dt
        self.y += (s * vx + c * vy) * dt
        self.yaw = math.atan2(math.sin(self.yaw + wz * dt), math.cos(self.yaw + wz * dt))
        pose = odom.pose.pose
        pose.position.x, pose.position.y = self.x, self.y
        pose.orientation.z, pose.orientation.w = math.sin(self.yaw / 2), math.cos(self.yaw / 2)
        odom.twist.twist.linear.x, odom.twist.twist.linear.y, odom.twist.twist.angular.z = vx, vy, wz


def _open_link(domain_id: int, sim_time: bool, procs: list[NodeProc]) -> _Link:
    """Publishers and subscriptions on ``domain_id``, returned once the node subscribes to the scan, the
    goal and (on simulated time) the clock."""
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import String

    from nav_policy.ros_common import GOAL_QOS, SENSOR_QOS

    tn = RosSide(domain_id, "latency_bench")
    n = tn.node
    link = _Link(
        tn,
        n.create_publisher(LaserScan, "/scan", SENSOR_QOS),
        n.create_publisher(Odometry, "/odom", 10),
        n.create_publisher(PoseStamped, "/goal_pose", GOAL_QOS),
        n.create_publisher(Clock, "/clock", 10),
    )
    n.create_subscription(Twist, "/cmd_vel", link.on_command, 100)
    n.create_subscription(String, "/nav_policy/status", lambda m: link.status.append(json.loads(m.data)), 100)
    tn.spin_until(
        lambda: (
            link.scan_pub.get_subscription_count() > 0
            and link.goal_pub.get_subscription_count() > 0
            and (link.clock_pub.get_subscription_count() > 0 or not sim_time)
        ),
        60,
        "policy node",
        procs,
    )
    return link


def _messages(beams: int):
    """The scan (``beams`` beams all round, ranges set per message), the odometry at the origin, and a
    goal the robot does not reach within a benchmark (the node keeps driving)."""
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import LaserScan

    scan = LaserScan()
    scan.header.frame_id = "base_link"
    scan.angle_min = -math.pi
    scan.angle_increment = 2 * math.pi / beams
    scan.angle_max = scan.angle_min + (beams - 1) * scan.angle_increment
    scan.range_min, scan.range_max = 0.05, 6.0
    odom = Odometry()
    odom.header.frame_id, odom.child_frame_id = "odom", "base_link"
    odom.pose.pose.orientation.w = 1.0
    goal = PoseStamped()
    goal.header.frame_id = "odom"
    goal.pose.position.x = GOAL_DISTANCE
    return scan, odom, goal


@dataclass
class ClockLatency:
    """Per measured tick [ms], from the scan's publish call: to this process's callback of the command
    (``callback``), to the command's arrival in this process's reader (``received``: without the
    wake-up and executor of the measuring process) and to the node's publish call of it (``published``:
    the inbound hop and the node's work); the last two by the middleware's stamps (system clock)."""

    callback: list[float] = field(default_factory=list)
    received: list[float] = field(default_factory=list)
    published: list[float] = field(default_factory=list)


def measure_clock(link: _Link, proc: NodeProc, scan, odom, rng, args: argparse.Namespace) -> tuple[ClockLatency, int]:
    """``clock`` mode: per tick, scan and odometry stamped t then /clock = t; the latencies of
    :class:`ClockLatency` for ticks after the warm-up whose status is ``driving``. Returns them and the
    ticks after the warm-up the node did not answer within 1 s (those are skipped)."""
    from rosgraph_msgs.msg import Clock

    from nav_policy.ros_common import ns_to_stamp

    lat = ClockLatency()
    lost = 0
    t_ns = 1_000_000_000
    period_ns = round(CLOCK_PERIOD_S * 1e9)
    pace = float(getattr(args, "pace", 0.0))
    odometer = Odometer()
    k = -1
    next_at = time.perf_counter()
    while len(lat.callback) < args.messages:
        k += 1
        next_at += pace
        while (left := next_at - time.perf_counter()) > 0:
            link.ros.executor.spin_once(timeout_sec=left)  # statuses and late commands while waiting
        if k >= args.warmup + MAX_TICKS_PER_MESSAGE * args.messages:
            states = Counter(s["state"] for s in link.status)
            raise SystemExit(
                f"nav-benchmark-latency: {len(lat.callback)} of {args.messages} ticks driving after {k} ticks "
                f"(the node's states: {dict(states)}); see {proc.log_path}"
            )
        t_ns += period_ns
        odometer.advance(link.command, period_ns * 1e-9, odom)
        scan.ranges = corridor_ranges(odometer, args.beams, rng)
        ns_to_stamp(t_ns, scan.header.stamp)
        odom.header.stamp = scan.header.stamp
        clock = Clock()
        ns_to_stamp(t_ns, clock.clock)
        before = len(link.arrivals)
        t0, t0_ns = time.perf_counter(), time.time_ns()
        link.scan_pub.publish(scan)
        link.odom_pub.publish(odom)
        link.clock_pub.publish(clock)
        deadline = time.perf_counter() + 1.0
        while len(link.arrivals) == before and time.perf_counter() < deadline:
            link.ros.executor.spin_once(timeout_sec=0.1)
        assert proc.alive(), proc.output()[-3000:]
        if len(link.arrivals) == before:
            if k >= args.warmup:
                lost += 1
            continue  # a clock tick the node did not see (discovery still settling): next one
        driving = bool(link.status) and link.status[-1]["state"] == "driving"
        if k >= args.warmup and driving:
            sent_ns, received_ns = link.stamps[before]
            lat.callback.append((link.arrivals[before] - t0) * 1e3)
            lat.received.append((received_ns - t0_ns) * 1e-6)
            lat.published.append((sent_ns - t0_ns) * 1e-6)
    return lat, lost


def measure_wall(link: _Link, proc: NodeProc, scan, odom, rng, args: argparse.Namespace) -> list[float]:
    """``wall`` mode: scans stream at ``--scan-rate`` while the node's own timer runs; the latency (ms) of
    each of ``--messages`` commands after the warm-up is its arrival time minus the publish time of the
    newest scan published before it (the scan age the robot acts on)."""
    sent: list[float] = []
    period = 1.0 / args.scan_rate
    deadline = time.perf_counter()
    start_idx = None
    odometer = Odometer()
    while start_idx is None or len(link.arrivals) - start_idx < args.messages:
        deadline += period
        odometer.advance(link.command, period, odom)
        scan.ranges = corridor_ranges(odometer, args.beams, rng)
        scan.header.stamp = odom.header.stamp = link.ros.node.get_clock().now().to_msg()
        sent.append(time.perf_counter())
        link.scan_pub.publish(scan)
        link.odom_pub.publish(odom)
        while (left := deadline - time.perf_counter()) > 0:
            link.ros.executor.spin_once(timeout_sec=left)
        if start_idx is None and len(link.arrivals) > args.warmup:
            start_idx = len(link.arrivals)
        assert proc.alive(), proc.output()[-3000:]
    sent_arr = np.asarray(sent)
    lat = []
    for a in link.arrivals[start_idx : start_idx + args.messages]:
        i = int(np.searchsorted(sent_arr, a)) - 1
        if i >= 0:
            lat.append((a - sent_arr[i]) * 1e3)
    return lat


def summarize(
    args: argparse.Namespace,
    bundle: Path,
    lat: list[float],
    lost: int,
    inf: list[float],
    tick: list[float],
    mem: dict[str, float],
    stamped: ClockLatency | None = None,
) -> dict[str, object]:
    """The printed / written results: latency percentiles, the node's own inference and tick times
    (its status topic) and its memory; in clock mode also the latencies by the middleware's stamps
    (:class:`ClockLatency`)."""
    sim_time = args.mode == "clock"

    def spread(values: list[float]) -> dict[str, float]:
        return {"p50": pct(values, 50), "p90": pct(values, 90), "p99": pct(values, 99), "max": max(values)}

    results = {
        "mode": args.mode,
        "messages": len(lat),
        "beams": args.beams,
        "bundle": str(bundle),
        "unanswered_ticks": lost if sim_time else None,
        "pace_s": args.pace if sim_time else None,
        "latency_ms": spread(lat),
        "latency_received_ms": spread(stamped.received) if stamped else None,
        "latency_to_node_publish_ms": spread(stamped.published) if stamped else None,
        "node_inference_ms": {"p50": pct(inf, 50), "p99": pct(inf, 99)} if inf else None,
        "node_tick_ms": {"p50": pct(tick, 50), "p99": pct(tick, 99), "max": max(tick)} if tick else None,
        "node_memory_mib": mem,
    }
    if not sim_time:
        results["control_period_s"] = args.control_period
        results["scan_rate_hz"] = args.scan_rate
    return results


def measure(
    args: argparse.Namespace, bundle: Path, scan_map: bool, executor: str, floor: bool = False
) -> dict[str, object]:
    """One node (``scan_map`` on or off, spinning on ``executor``; with ``floor`` the floor node in its
    place), driven as ``args.mode`` says; its results."""
    work = Path(tempfile.mkdtemp(prefix="nav_latency_"))
    sim_time = args.mode == "clock"
    lease = DomainLease()
    try:
        with node_processes() as procs:
            cmd = (
                floor_command(sim_time, args.control_period, executor)
                if floor
                else node_command(bundle, sim_time, args.control_period, scan_map, executor)
            )
            proc = NodeProc(cmd, lease.domain_id, work / ("floor_node.log" if floor else "policy_node.log"))
            procs.append(proc)
            link = _open_link(lease.domain_id, sim_time, procs)
            rng = np.random.default_rng(0)
            scan, odom, goal = _messages(args.beams)
            link.goal_pub.publish(goal)
            stamped: ClockLatency | None = None
            if sim_time:
                stamped, lost = measure_clock(link, proc, scan, odom, rng, args)
                lat = stamped.callback
            else:
                lat, lost = measure_wall(link, proc, scan, odom, rng, args), 0
            mem = proc_memory(proc.pid)
            inf = [s["inference_ms"] for s in link.status if s.get("inference_ms") is not None]
            tick = [s["tick_ms"] for s in link.status[args.warmup :] if s.get("tick_ms") is not None]
            link.ros.close()
    finally:
        lease.release()
    results = summarize(args, bundle, lat, lost, inf, tick, mem, stamped)
    if floor:
        return {"node": "floor", "scan_map": None, "executor": executor, **results, "bundle": None}
    return {"node": "policy_node", "scan_map": scan_map, "executor": executor, **results}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bundle = bundle_arg(args.bundle)
    settings = {"on": [True], "off": [False], "both": [True, False]}[args.scan_map]
    executors = ["events", "single_threaded"] if args.executor == "both" else [args.executor]
    runs = []
    if args.floor:
        for executor in executors:
            print(f"[latency] floor node, executor {executor}: {args.messages} messages, {args.mode} mode", flush=True)
            runs.append(measure(args, bundle, False, executor, floor=True))
    for scan_map in settings:
        for executor in executors:
            print(
                f"[latency] scan map {'on' if scan_map else 'off'}, executor {executor}: {args.messages} messages, "
                f"{args.mode} mode",
                flush=True,
            )
            runs.append(measure(args, bundle, scan_map, executor))
    results = {
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["nav-benchmark-latency", *(argv if argv is not None else sys.argv[1:])]),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "runs": runs,
    }
    print_results(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
