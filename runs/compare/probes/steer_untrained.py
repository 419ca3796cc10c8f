"""Probe: the policy's command steered, before the smoother, to the direction near it that the guard
lets out fastest (progress along the policy's direction), on the clutter row of nav-compare."""
import json, math, shutil, sys
import numpy as np
from navcontract.guard import guard_scale
from navdeploy import gate as G
from navtrain.compare import run_compare, parse_rows, write_outputs

SPAN = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
STEP = 5.0
ANG = np.radians(np.array(sorted(np.arange(-SPAN, SPAN + 1e-9, STEP), key=abs)))
orig = G.CommandGate._send

def steer(self, target):
    if type(self.driver).__name__ == "DwaPlanner" or self.guard is None:
        return target
    report = self._report()
    s = math.hypot(target[0], target[1])
    if report is None or s < 1e-3:
        return target
    th = math.atan2(target[1], target[0]) + ANG
    n = len(ANG)
    samples = np.stack([s * np.cos(th), s * np.sin(th), np.full(n, target[2])], axis=1)
    ranges = np.asarray(report.ranges, dtype=np.float64)
    seen = ~np.asarray(report.filled, dtype=bool)
    scale = np.asarray(guard_scale(np.broadcast_to(ranges, (n, len(ranges))), samples, self.guard, self.max_range,
                                   np.broadcast_to(seen, (n, len(seen)))), dtype=np.float64)
    score = scale * np.cos(ANG)
    k = int(np.argmax(score))  # first maximum: the smallest turn among equals
    if score[k] <= score[0] + 1e-9:
        return target
    out = samples[k].copy(); out[:2] *= scale[k]
    STATS["steered"] += 1
    return out

STATS = {"steered": 0}
def _send(self, target, now):
    STATS["ticks"] = STATS.get("ticks", 0) + 1
    return orig(self, steer(self, target), now)
G.CommandGate._send = _send

bundle = "runs/recipes/holonomic_direct/bundle_2150"
src = "runs/compare/holonomic_direct_2150_clutter100_rows.json"
log = f"/tmp/steer/rows_{int(SPAN)}.json"
d = json.load(open(src))
extra = {"probe": f"steer {SPAN}"}
d["key"].update(extra)
d["rows"] = {k: v for k, v in d["rows"].items() if k == "clutter#dwa"}
json.dump(d, open(log, "w"))
payload = run_compare(bundle, parse_rows("clutter"), 100, 1000003, True, 100, None, [], log, extra)
write_outputs(payload, f"/tmp/steer/clutter100_steer{int(SPAN)}")
print(STATS, flush=True)
