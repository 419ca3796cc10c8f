"""Probe: success, collisions and time to goal against the DWA on the worlds both reach, for the policy
halves kept by guard_ticks.py (or a compare JSON's policy half), beside the DWA half of a compare JSON
on the same batch.

    python runs/compare/probes/steer_outcomes.py COMPARE.json [TICKS.json[.gz] ...]
"""

import gzip
import json
import sys

import numpy as np


def load(path):
    return json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))


compare = load(sys.argv[1])
row = compare["rows"]["clutter"]["episodes"]
codes = {0: "collision", 2: "success", 3: "timeout"}
dwa_ok = np.array([codes.get(o) == "success" for o in row["dwa"]["outcome"]])
dwa_t = np.array(row["dwa"]["time_s"])
halves = {"policy (compare run)": ([codes.get(o, str(o)) for o in row["policy"]["outcome"]], row["policy"]["time_s"])}
for path in sys.argv[2:]:
    d = load(path)
    brake = ", axis brake" if d.get("axis_brake") else ""
    halves[f"steer {d['steer']:g}, sweep lag {d.get('sweep_lag', 0.0):g}{brake}"] = (d["outcome"], d["time_s"])
for name, (outcome, time_s) in halves.items():
    ok = np.array([o == "success" for o in outcome])
    both = ok & dwa_ok
    ratio = float(np.mean(np.array(time_s)[both]) / np.mean(dwa_t[both]))
    hits = [i for i, o in enumerate(outcome) if o == "collision"]
    print(f"{name}: success {ok.mean():.0%}, collisions {hits}, timeouts {sum(o == 'timeout' for o in outcome)}, time {ratio:.2f}x the DWA's on the {both.sum()} both reach")
print(f"DWA: success {dwa_ok.mean():.0%}")
