"""The cost of the node's control tick with the scan map: on a worker, synchronous, and off, side by side.

    nav-benchmark-tick                                   # 600 ticks per mode and pace, default bundle
    nav-benchmark-tick --ticks 1000 --json docs/results/benchmark_tick.json
    nav-benchmark-tick --pace 0.02 --modes worker,off
    nav-benchmark-tick --priority 0 --priority 50        # ordinary scheduling and SCHED_FIFO 50, side by side
    python -m navdeploy.bench_tick --bundle DIR          # the same

What one control tick of the node costs: the scan and odometry adapters and
:meth:`navdeploy.gate.CommandGate.tick` up to the command (as ``policy_node`` runs them on each message
and timer tick, the tick's scan held back: ``tick(now, dispatch=False)``), and apart from it what
the node does once the command is published: :meth:`~navdeploy.gate.CommandGate.dispatch`, which
hands the tick's scan to the map's worker (``dispatch_ms``; nothing in the other modes). On the gate
the node builds (:func:`navdeploy.settings.resolve_settings` of the node's defaults over
the bundle's contract, here with ``scan_map`` and ``scan_map_worker`` set per mode). Beside each
tick's wall time, its own CPU time (the thread's): where the wall time exceeds it by more than
:data:`DESCHEDULED_MS` the tick waited off the CPU (``ticks_descheduled``), so a tail that is the
machine's scheduler and not the tick's work shows as such.

The stream: a synthetic room (13 x 8 m) with a field of posts (most 0.075 m in radius, gaps at
least 0.45 m), ray-cast in numpy by a 720-beam 360-degree lidar with 12 m range and 1 cm noise; a
holonomic robot that starts 10 m from its goal, drives by the gate's commands (the synchronous scan
map on) and, at the goal or after 60 s, is sent back to where it came from. The stream (scans,
odometry, goals) is recorded once and the same messages go to every mode, open loop:

- ``worker``: scan map on, updated and planned on its worker process (the node's default); also
  reported: how old a plan is when the tick takes it, and the worker's time per batch of scans;
- ``sync``: scan map on, updated and planned inline (the evaluation's and the bag tools' mode);
- ``off``: no scan map (the goal is the policy's goal).

Each mode runs at each ``--pace``, the wall time between the starts of two ticks, after ten untimed
ticks at the control period (the node's first second, in which the worker's first plans come
back). ``0`` runs the ticks back to back (the processor stays warm; the worker then gets scans far
faster than a robot's lidar gives them, and plans for the newest it can take); the control period
(the default's second pace) is how the node's timer runs them, the processor idle in between
(colder caches: every mode costs more per tick than back to back).

Each mode and pace runs at each ``--priority`` (default 0): 0 under the OS's ordinary scheduler, 1-99
with the process's threads under ``SCHED_FIFO`` at that priority, as the node's
``realtime_priority`` parameter puts them (:mod:`navdeploy.priority`; the worker process starts
under the ordinary scheduler); a refused priority is reported and its runs are left out. On a loaded
machine the two side by side show how much of the tail is the scheduler's.

``--stream FILE`` keeps the recorded messages in FILE (read back when it exists), so that two
versions of the code are timed on the very same messages, side by side.

Prints a table and writes JSON (``--json``). Not a test: the numbers depend on the machine and its
load; docs/results.md keeps the measured ones with the date and the command.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from navdeploy.bench_cli import add_bundle_option, bundle_or_default
from navdeploy.priority import MAX_PRIORITY, lower_to_ordinary, raise_priority

DEFAULT_BUNDLE = Path("ros2_ws") / "src" / "nav_policy" / "nav_policy" / "default_bundle"
ROOM = (-1.5, 11.5, -4.0, 4.0)  # x0, x1, y0, y1 [m]
START, GOAL = (0.0, 0.0), (10.0, 0.0)
RANGE_MAX = 12.0  # [m] the lidar's
RANGE_MIN = 0.05
MODES = ("worker", "sync", "off")
WARMUP = 10  # untimed ticks at the control period before the timed ones
DESCHEDULED_MS = 1.0
"""[ms] A tick whose wall time exceeds its CPU time by more than this waited off the CPU (another
process ran, or the machine's scheduler took the core): counted as ``ticks_descheduled``."""


@dataclass(frozen=True)
class World:
    room: tuple[float, float, float, float]
    posts: np.ndarray  # (P, 3): x, y, radius


def make_world(rng: np.random.Generator, posts: int = 80) -> World:
    """Posts between start and goal, 70 % of them 0.075 m thin, every gap at least 0.45 m."""
    placed: list[tuple[float, float, float]] = []
    tries = 0
    while len(placed) < posts and tries < 100_000:
        tries += 1
        x, y = rng.uniform(1.0, 9.0), rng.uniform(ROOM[2] + 0.4, ROOM[3] - 0.4)
        r = 0.075 if rng.random() < 0.7 else rng.uniform(0.1, 0.3)
        if all(math.hypot(x - q[0], y - q[1]) > r + q[2] + 0.45 for q in placed):
            placed.append((x, y, r))
    return World(ROOM, np.array(placed))


def cast(world: World, pose: np.ndarray, beams: int, rng: np.random.Generator, noise: float) -> np.ndarray:
    """Ranges (beams,) from ``pose`` over 360 degrees (beam 0 at -pi, body frame); inf beyond range."""
    ang = -math.pi + 2 * math.pi * np.arange(beams) / beams + pose[2]
    d = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    x0, x1, y0, y1 = world.room
    with np.errstate(divide="ignore", invalid="ignore"):
        tx = np.where(d[:, 0] > 0, (x1 - pose[0]) / d[:, 0], np.where(d[:, 0] < 0, (x0 - pose[0]) / d[:, 0], np.inf))
        ty = np.where(d[:, 1] > 0, (y1 - pose[1]) / d[:, 1], np.where(d[:, 1] < 0, (y0 - pose[1]) / d[:, 1], np.inf))
    r = np.minimum(tx, ty)
    w = world.posts[:, :2] - pose[:2]
    along = d @ w.T  # (beams, P)
    disc = world.posts[:, 2] ** 2 - (np.sum(w * w, axis=1)[None, :] - along**2)
    t = np.where(disc >= 0, along - np.sqrt(np.maximum(disc, 0.0)), np.inf)
    r = np.minimum(r, np.where(t > 0, t, np.inf).min(axis=1)) + rng.normal(0.0, noise, beams)
    return np.where(r < RANGE_MAX, r, np.inf)


# ------------------------------------------------------------------------ messages (duck-typed)


def _header(t: float, frame: str) -> SimpleNamespace:
    sec = int(math.floor(t))
    return SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=int(round((t - sec) * 1e9))), frame_id=frame)


def scan_msg(ranges: np.ndarray, t: float) -> SimpleNamespace:
    n = len(ranges)
    return SimpleNamespace(
        header=_header(t, "base_link"),
        ranges=ranges.astype(np.float32).tolist(),
        angle_min=-math.pi,
        angle_increment=2 * math.pi / n,
        angle_max=-math.pi + (n - 1) * 2 * math.pi / n,
        range_min=RANGE_MIN,
        range_max=RANGE_MAX,
    )


def odom_msg(pose: np.ndarray, twist: np.ndarray, t: float) -> SimpleNamespace:
    v = SimpleNamespace
    q = v(x=0.0, y=0.0, z=math.sin(pose[2] / 2), w=math.cos(pose[2] / 2))
    return v(
        header=_header(t, "odom"),
        child_frame_id="base_link",
        pose=v(pose=v(position=v(x=float(pose[0]), y=float(pose[1]), z=0.0), orientation=q)),
        twist=v(
            twist=v(linear=v(x=float(twist[0]), y=float(twist[1]), z=0.0), angular=v(x=0.0, y=0.0, z=float(twist[2])))
        ),
    )


def goal_msg(goal: tuple[float, float]) -> SimpleNamespace:
    v = SimpleNamespace
    return v(header=_header(0.0, "odom"), pose=v(position=v(x=goal[0], y=goal[1], z=0.0)))


@dataclass
class Tick:
    t: float
    scan: SimpleNamespace
    odom: SimpleNamespace
    goal: SimpleNamespace | None  # a new goal before this tick


# ------------------------------------------------------------------------------------- the gate


def make_gate(bundle: Path, mode: str):
    """The node's gate on ``bundle`` with its default parameters, the scan map per ``mode``."""
    from navdeploy.gate import CommandGate
    from navdeploy.node_params import NodeParams
    from navdeploy.runtime import PolicyRuntime
    from navdeploy.settings import resolve_settings

    runtime = PolicyRuntime.load(str(bundle))
    params = NodeParams(scan_map=mode != "off", scan_map_worker=mode == "worker")
    settings, _ = resolve_settings(runtime.contract, params)
    gate = CommandGate.from_settings(runtime, settings)
    gate.start()
    return gate, settings.control_period


def _moved(world: World, pose: np.ndarray, cmd: np.ndarray, dt: float, radius: float) -> np.ndarray:
    """``pose`` after ``dt`` at the body-frame command; a move into a post or a wall is not made."""
    c, s = math.cos(pose[2]), math.sin(pose[2])
    nxt = pose + dt * np.array([c * cmd[0] - s * cmd[1], s * cmd[0] + c * cmd[1], cmd[2]])
    x0, x1, y0, y1 = world.room
    inside = x0 + radius < nxt[0] < x1 - radius and y0 + radius < nxt[1] < y1 - radius
    gaps = np.hypot(world.posts[:, 0] - nxt[0], world.posts[:, 1] - nxt[1]) - world.posts[:, 2]
    return nxt if inside and gaps.min() > radius else pose


def record_stream(bundle: Path, ticks: int, beams: int, seed: int) -> tuple[list[Tick], dict[str, Any]]:
    """The messages of ``ticks`` control ticks of a robot driven by the synchronous gate (module doc)."""
    rng = np.random.default_rng(seed)
    world = make_world(rng)
    gate, period = make_gate(bundle, "sync")
    radius = float(gate.scan_planner.radius)
    pose, twist = np.array([*START, 0.0]), np.zeros(3)
    goal, home, since = GOAL, START, 0.0
    stream: list[Tick] = []
    reached = 0
    new_goal: SimpleNamespace | None = goal_msg(goal)
    for k in range(ticks):
        t = 1.0 + k * period
        if k > 0 and (gate.reached or t - since > 60.0):
            reached += int(gate.reached)
            goal, home, since = home, goal, t
            new_goal = goal_msg(goal)
        tick = Tick(t, scan_msg(cast(world, pose, beams, rng, 0.01), t), odom_msg(pose, twist, t), new_goal)
        stream.append(tick)
        res = _feed(gate, tick)
        new_goal = None
        cmd = np.asarray(res.cmd, dtype=np.float64)
        nxt = _moved(world, pose, cmd, period, radius)
        twist = cmd if nxt is not pose else np.zeros(3)
        pose = nxt
    gate.close()
    return stream, {"posts": len(world.posts), "goals_reached": reached, "control_period_s": period}


STREAM_FORMAT = "nav_policy.bench_tick_stream"


def save_stream(path: Path, stream: list[Tick], world: dict[str, Any]) -> None:
    """The recorded messages and the world's summary, as a pickle (``--stream``)."""
    import pickle

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"format": STREAM_FORMAT, "stream": stream, "world": world}))


def load_stream(path: Path) -> tuple[list[Tick], dict[str, Any]]:
    """What :func:`save_stream` wrote (a file this benchmark wrote: pickles run code when read)."""
    import pickle

    data = pickle.loads(path.read_bytes())
    if not isinstance(data, dict) or data.get("format") != STREAM_FORMAT:
        raise SystemExit(f"nav-benchmark-tick: {path} is not a stream this benchmark wrote")
    return data["stream"], data["world"]


def _feed(gate, tick: Tick):
    if tick.goal is not None:
        gate.goal_message(tick.goal)
    gate.scan_message(tick.scan, tick.t)
    gate.odom_message(tick.odom, tick.t)
    return gate.tick(tick.t)


# ---------------------------------------------------------------------------------- measurement


def run_mode(bundle: Path, mode: str, stream: list[Tick], pace: float, period: float) -> dict[str, Any]:
    """Per tick: the adapters and the tick up to the command, timed (ms), and apart the hand-off of
    the tick's scan that the node does once the command is out. The first :data:`WARMUP` ticks run untimed at
    the control ``period`` (the node's first second: the worker's first plans come back), the rest
    ``pace`` apart in wall time (0: back to back)."""
    gate, _ = make_gate(bundle, mode)
    if mode == "worker":
        time.sleep(1.0)  # the worker process starts (imports) before the first tick, as at the node's startup
    times: list[float] = []
    cpu: list[float] = []  # the tick's own CPU time (this thread's), beside its wall time
    handoff: list[float] = []  # after the command: the tick's scan to the worker
    states: dict[str, int] = {}
    subgoals = 0
    next_at = time.perf_counter()
    for k, tick in enumerate(stream):
        next_at += period if k < WARMUP else pace
        while (left := next_at - time.perf_counter()) > 0:
            time.sleep(left)
        if tick.goal is not None:
            gate.goal_message(tick.goal)
        t0, c0 = time.perf_counter(), time.thread_time()
        gate.scan_message(tick.scan, tick.t)
        gate.odom_message(tick.odom, tick.t)
        res = gate.tick(tick.t, dispatch=False)
        t1, c1 = time.perf_counter(), time.thread_time()
        gate.dispatch()  # the node: once the command is published
        if k >= WARMUP:
            times.append((t1 - t0) * 1e3)
            cpu.append((c1 - c0) * 1e3)
            handoff.append((time.perf_counter() - t1) * 1e3)
            states[res.state.value] = states.get(res.state.value, 0) + 1
            subgoals += res.subgoal is not None
    waited = np.asarray(times) - np.asarray(cpu)
    out: dict[str, Any] = {
        "tick_ms": summary(times),
        "tick_cpu_ms": summary(cpu),
        "ticks_descheduled": int((waited > DESCHEDULED_MS).sum()),
        "dispatch_ms": summary(handoff),
        "states": states,
        "ticks_with_subgoal": subgoals,
    }
    planner = gate.scan_planner
    timings = list(getattr(planner, "timings", ()))
    if timings:
        out["plan_age_ms"] = summary([a * 1e3 for a, _ in timings])
        out["worker_busy_ms"] = summary([b * 1e3 for _, b in timings])
        out["plans_taken"] = len(timings)
    gate.close()
    return out


def summary(values: list[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=np.float64)
    return {
        "p50": float(np.percentile(v, 50)),
        "p99": float(np.percentile(v, 99)),
        "max": float(v.max()),
        "mean": float(v.mean()),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bundle_option(ap, f"the node's default bundle {DEFAULT_BUNDLE}")
    ap.add_argument("--ticks", type=int, default=600, help="control ticks per mode")
    ap.add_argument("--beams", type=int, default=720, help="beams of the lidar")
    ap.add_argument("--seed", type=int, default=0, help="the world and the lidar's noise")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    ap.add_argument(
        "--pace",
        type=float,
        action="append",
        default=None,
        help="wall seconds between tick starts, repeatable (default: 0 and the control period; 0: back to back)",
    )
    ap.add_argument(
        "--priority",
        type=int,
        action="append",
        default=None,
        help=f"SCHED_FIFO priority of the timed ticks, repeatable (default 0: the ordinary scheduler; 1-{MAX_PRIORITY})",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument(
        "--stream",
        type=Path,
        default=None,
        help="the recorded messages: read from this file when it exists, else recorded and written to it "
        "(two versions of the code timed on the very same messages)",
    )
    a = ap.parse_args(argv)
    bad = [m for m in a.modes.split(",") if m not in MODES]
    bad_priority = any(not 0 <= x <= MAX_PRIORITY for x in a.priority or ())
    if bad or a.ticks < 10 or a.beams < 8 or any(not 0.0 <= x <= 1.0 for x in a.pace or ()) or bad_priority:
        ap.error(
            f"--modes of {', '.join(MODES)} (got {', '.join(bad)}); --ticks >= 10; --beams >= 8; --pace in [0, 1]; "
            f"--priority in 0..{MAX_PRIORITY}"
        )
    return a


def table(results: dict[str, Any]) -> str:
    lines = [
        "| priority | pace [s] | mode | tick p50 [ms] | p99 | max | mean | tick CPU p50 / p99 / max [ms] "
        "| descheduled | after the command: dispatch p50 / p99 / max [ms] |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for run in results["runs"]:
        for mode, r in run["modes"].items():
            s = r["tick_ms"]
            d = r["dispatch_ms"]
            c = r["tick_cpu_ms"]
            lines.append(
                f"| {run['priority']} | {run['pace_s']:g} | {mode} | {s['p50']:.2f} | {s['p99']:.2f} | {s['max']:.2f} | {s['mean']:.2f} "
                f"| {c['p50']:.2f} / {c['p99']:.2f} / {c['max']:.2f} | {r['ticks_descheduled']} "
                f"| {d['p50']:.2f} / {d['p99']:.2f} / {d['max']:.2f} |"
            )
            if "plan_age_ms" in r:
                age, busy = r["plan_age_ms"], r["worker_busy_ms"]
                notes.append(
                    f"priority {run['priority']}, pace {run['pace_s']:g} s, worker: plan age when taken p50 {age['p50']:.1f} ms, p99 "
                    f"{age['p99']:.1f} ms; worker time per batch p50 {busy['p50']:.1f} ms, p99 {busy['p99']:.1f} ms "
                    f"({r['plans_taken']} plans taken, {r['ticks_with_subgoal']} ticks with a sub-goal)"
                )
    return "\n".join(lines + [""] + notes)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bundle = bundle_or_default(args.bundle, DEFAULT_BUNDLE)
    t0 = time.perf_counter()
    if args.stream is not None and args.stream.is_file():
        stream, world = load_stream(args.stream)
        print(f"[bench-tick] stream of {len(stream)} ticks read from {args.stream}: {world}", flush=True)
    else:
        stream, world = record_stream(bundle, args.ticks, args.beams, args.seed)
        print(
            f"[bench-tick] stream of {len(stream)} ticks recorded in {time.perf_counter() - t0:.1f} s: {world}",
            flush=True,
        )
        if args.stream is not None:
            save_stream(args.stream, stream, world)
            print(f"[bench-tick] wrote the stream to {args.stream}", flush=True)
    paces = args.pace if args.pace is not None else [0.0, world["control_period_s"]]
    runs = []
    refused = []
    for priority in args.priority or [0]:
        scheduling = raise_priority(priority)
        print(f"[bench-tick] {scheduling.line}", flush=True)
        if scheduling.refused is not None:
            refused.append(scheduling.line)
            lower_to_ordinary()
            continue
        for pace in paces:
            modes = {}
            for mode in args.modes.split(","):
                modes[mode] = run_mode(bundle, mode, stream, pace, world["control_period_s"])
                print(
                    f"[bench-tick] priority {priority}, pace {pace:g} s, {mode}: {modes[mode]['tick_ms']}", flush=True
                )
            runs.append({"priority": priority, "scheduling": scheduling.line, "pace_s": pace, "modes": modes})
        lower_to_ordinary()
    results = {
        "date": datetime.date.today().isoformat(),
        "command": "nav-benchmark-tick " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {"cpus": os.cpu_count(), "load_avg": list(os.getloadavg()), "python": platform.python_version()},
        "bundle": str(bundle),
        "ticks": len(stream),
        "beams": len(stream[0].scan.ranges),
        "stream": None if args.stream is None else str(args.stream),
        "world": world,
        "runs": runs,
        "refused": refused,
    }
    print(table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"[bench-tick] wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
