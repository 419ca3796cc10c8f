#!/usr/bin/env python3
"""Replay the five third-party bag shapes of issue 28 through ``nav-bag-replay``, N times each; count passes.

    .venv/bin/python scripts/replay_shapes.py --runs 20 --json /tmp/replay_shapes.json
    .venv/bin/python scripts/replay_shapes.py --runs 3 --shape lidar_360_reversed --load 2

Each run is the console script as a user runs it (``nav-bag-replay BAG --bundle B --json R``, no
topic options: the bags use the node's topic names and carry their own goal) in a fresh process
with a fresh node. A run passes when it exits 0 and its JSON report says ``pass`` with every tick
compared (``SHAPE_TICKS``). ``--load K`` keeps K busy-looping processes running meanwhile (a loaded
machine). Prints one line per run and a table of passes per shape; exits 1 unless every run passed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.bag_shapes import SHAPE_TICKS, SHAPES, write_shape_bag  # noqa: E402

DEFAULT_BUNDLE = REPO / "ros2_ws" / "src" / "nav_policy" / "nav_policy" / "default_bundle"


def _spin() -> None:
    while True:
        pass


def run_once(bag: Path, bundle: Path, work: Path, tag: str) -> tuple[bool, str, float]:
    """One replay through the console script: (passed, one line saying why not, wall seconds)."""
    report = work / f"{tag}.json"
    t0 = time.monotonic()
    exe = Path(sys.executable).parent / "nav-bag-replay"
    proc = subprocess.run(
        [str(exe), str(bag), "--bundle", str(bundle), "--json", str(report), "--log-dir", str(work / tag)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.monotonic() - t0
    if "Traceback" in proc.stdout + proc.stderr:
        tail = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln and not ln.startswith("[")]
        return False, "TRACEBACK: " + (tail[-1] if tail else "?"), wall
    if not report.is_file():
        return False, f"exit {proc.returncode}, no report: {' / '.join(proc.stderr.strip().splitlines()[-2:])}", wall
    (r,) = json.loads(report.read_text())
    if proc.returncode != 0 or not r["pass"] or r["ticks"] != SHAPE_TICKS:
        why = r.get("aborted") or "; ".join(r.get("problems") or [])
        why = why or f"ticks {r['ticks']}, max |node - offline| {r['max_delta_offline']}"
        return False, f"exit {proc.returncode}: {why}", wall
    text = f"{r['ticks']} ticks, max |node - offline| {r['max_delta_offline']}, clock re-sent {r['clock_resent']}"
    return True, text, wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="replays per shape")
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="only these shapes (repeatable)")
    ap.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE)
    ap.add_argument("--load", type=int, default=0, help="busy-looping processes meanwhile")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    shapes = a.shape or list(SHAPES)
    work = Path(tempfile.mkdtemp(prefix="replay_shapes_"))
    bags = {name: write_shape_bag(work, name) for name in shapes}
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(a.load)]
    for h in hogs:
        h.start()
    results: dict[str, list[dict]] = {name: [] for name in shapes}
    try:
        for i in range(a.runs):  # round robin: every shape sees the same machine load over time
            for name in shapes:
                ok, text, wall = run_once(bags[name], a.bundle, work, f"{name}_{i}")
                results[name].append({"run": i, "pass": ok, "wall_s": round(wall, 1), "detail": text})
                print(f"{name:24s} run {i + 1:2d}/{a.runs}: {'PASS' if ok else 'FAIL'} in {wall:5.1f} s  {text}")
                sys.stdout.flush()
    finally:
        for h in hogs:
            h.terminate()
    print()
    for name in shapes:
        n_ok = sum(r["pass"] for r in results[name])
        print(f"{name:24s} {n_ok}/{len(results[name])}")
    if a.json:
        summary = {name: sum(r["pass"] for r in rs) for name, rs in results.items()}
        a.json.write_text(
            json.dumps({"runs": a.runs, "load": a.load, "passed": summary, "runs_detail": results}, indent=1)
        )
    return 0 if all(r["pass"] for rs in results.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
