"""Probe: how often rule step 5 with ``sweep_lag`` (navcontract.guard) zeroes a command that revision 2
let out, over the ticks of guard_ticks.py, in worlds that collided and in those that did not.

    python runs/compare/probes/sweep_lag_ticks.py TICKS.json[.gz]
"""

import gzip
import json
import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np

from navcontract.guard import GuardRule, apply_guard

path = sys.argv[1]
d = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))
rule = replace(GuardRule.from_dict(d["guard"]), steer=0.0)  # judged as the guard stage does: steering came before
R = d["max_range"]
hit = {w for w, o in enumerate(d["outcome"]) if o == "collision"}
live = [t for t in d["ticks"] if t["scale"] > 0.0]
ranges = np.array([t["ranges"] for t in live], dtype=np.float32)
seen = np.ones(ranges.shape, dtype=bool)
for i, t in enumerate(live):
    seen[i, t["unseen"]] = False
checked = np.array([t["checked"] for t in live])
twist = np.array([t["twist"] for t in live])
base = np.asarray(apply_guard(ranges, checked, rule, R, seen, motion=twist)[1])
same = float(np.mean(np.abs(base - np.array([t["scale"] for t in live])) <= 2e-3))
print(f"{len(live)} driving ticks let out, {len(d['outcome'])} worlds, collided: {sorted(hit)}")
print(f"revision 2 recomputed within 0.002 of the gate's scale on {100.0 * same:.1f} % of them (ranges kept to 0.1 mm)")
for lag in (0.03, 0.06, 0.09, 0.12):
    scale = np.asarray(apply_guard(ranges, checked, replace(rule, sweep_lag=lag), R, seen, motion=twist)[1])
    fired = defaultdict(list)
    for i in np.flatnonzero((scale == 0.0) & (base > 0.0)):
        fired[live[i]["world"]].append(live[i]["t"])
    safe = sum(len(v) for w, v in fired.items() if w not in hit)
    near = {w: [x for x in fired.get(w, []) if x >= d["time_s"][w] - 1.0] for w in hit}
    print(
        f"lag {lag:.2f} s: zeroes {safe} of {len(live)} ticks in worlds without collision ({100.0 * safe / len(live):.2f} %, "
        f"in {sum(1 for w in fired if w not in hit)} worlds); in the last second before each collision: {near}"
    )
