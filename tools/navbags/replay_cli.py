#!/usr/bin/env python3
"""Replay a nav_policy bag into a live policy node; compare its commands with the bag and offline.

    nav-bag-replay tests/fixtures/bags/faults --bundle tests/fixtures/bags/bundle [--rate 1]

Publishes the bag's /goal_pose, /scan, /odom and /clock in recorded order into a fresh
``policy_node`` (use_sim_time), waits for its command after every control tick, and compares each
command with the recorded one and with the deploy runtime's offline reference. Prints max |delta|
and the per-topic accounting of every message; exits 1 if a bound is broken. See docs/bags.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from navbags.reference import NodeParams
from navbags.replay import replay_bag


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bags", nargs="+", help="bag folder(s)")
    ap.add_argument("--bundle", required=True, help="the policy bundle the bag was recorded with")
    ap.add_argument(
        "--rate", type=float, default=0.0, help="time scale on recorded timing (1: as recorded; 0: no pacing)"
    )
    ap.add_argument("--stale-timeout", type=float, default=NodeParams.stale_timeout)
    ap.add_argument("--tol-offline", type=float, default=1e-5)
    ap.add_argument("--tol-recorded", type=float, default=1e-4)
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--fates", action="store_true", help="print every message's fate")
    ap.add_argument("--json", default=None, help="write a JSON report here")
    a = ap.parse_args(argv)
    ok = True
    reports = []
    for bag in a.bags:
        rep = replay_bag(bag, a.bundle, NodeParams(stale_timeout=a.stale_timeout), rate=a.rate, log_dir=a.log_dir)
        print(rep.summary())
        if a.fates:
            for i, f in sorted(rep.fates.items()):
                print(f"    #{i}: {f}")
        good = rep.ok(a.tol_offline, a.tol_recorded)
        print(f"  -> {'PASS' if good else 'FAIL'}")
        ok &= good
        reports.append(
            {
                "bag": bag,
                "ticks": rep.ticks,
                "max_delta_offline": rep.max_delta_offline,
                "max_delta_recorded": rep.max_delta_recorded,
                "counts": rep.counts,
                "zero_ticks": rep.zero_ticks(),
                "problems": rep.problems,
                "ambiguous": rep.ambiguous,
                "pass": good,
            }
        )
    if a.json:
        Path(a.json).write_text(json.dumps(reports, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
