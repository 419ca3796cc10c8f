"""Probe: how often rule step 5 judged with the robot's travel (step5_travel.py) would zero a command that
revision 2 let out, over the ticks of guard_ticks.py, in worlds that collided and in those that did not.

    python runs/compare/probes/step5_travel_ticks.py TICKS.json[.gz]
"""

import gzip
import json
import sys
from collections import defaultdict

import numpy as np

sys.argv, args = sys.argv[:1], sys.argv[1:]
src = open(__file__.replace("step5_travel_ticks.py", "step5_travel.py")).read().split("d = json.load")[0]
exec(src)  # least_from, stop

d = json.load(gzip.open(args[0], "rt") if args[0].endswith(".gz") else open(args[0]))
rule = GuardRule.from_dict(d["guard"])
R = d["max_range"]
hit = {w for w, o in enumerate(d["outcome"]) if o == "collision"}
print(f"{len(d['ticks'])} ticks, {len(d['outcome'])} worlds, collided: {sorted(hit)}")
for tau in (0.03, 0.06, 0.09, 0.12):
    fired = defaultdict(list)
    live = 0
    for t in d["ticks"]:
        if t["scale"] <= 0.0:
            continue
        live += 1
        r = np.array(t["ranges"], dtype=np.float32)
        seen = np.ones(len(r), bool)
        seen[t["unseen"]] = False
        c = np.array(t["checked"]) * np.array([t["scale"], t["scale"], 1.0])
        if stop(r, seen, rule, R, np.array(t["twist"]), c, tau)[0]:
            fired[t["world"]].append(t["t"])
    safe = sum(len(v) for w, v in fired.items() if w not in hit)
    near = {w: [x for x in fired.get(w, []) if x >= d["time_s"][w] - 1.0] for w in hit}
    print(
        f"lag {tau:.2f} s: zeroes {safe} of {live} driving ticks in worlds without collision "
        f"({100.0 * safe / max(live, 1):.2f} %, in {sum(1 for w in fired if w not in hit)} worlds); "
        f"in the last second before each collision: {near}"
    )
