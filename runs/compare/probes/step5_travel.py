"""Probe: rule step 5 judged from where the robot will be when its velocity gets there (first-order lag)."""
import json, math, sys
import numpy as np
from navcontract.guard import GuardRule, braking_speed, free_distances, MOMENTUM_SAMPLES, MOMENTUM_TOLERANCE, beam_directions
from navcontract.xp import ops_for

def least_from(r, seen, rule, R, v, p):
    """Least free distance along v's direction from displaced position p (body frame)."""
    xp = ops_for(r)
    cos_t, sin_t = beam_directions(xp, len(r), r.astype(np.float32))
    rr = np.where(seen, r, np.minimum(r, rule.unseen_range))
    hit = (r < R) | ~seen
    px, py = rr * cos_t - p[0], rr * sin_t - p[1]
    s = math.hypot(v[0], v[1]); ux, uy = v[0] / s, v[1] / s
    along = px * ux + py * uy; lat = px * uy - py * ux
    spread = rr * math.sin(math.pi / len(r)); rho = rule.radius + rule.margin + spread
    if rule.slide: rho = np.minimum(rho, np.maximum(np.hypot(px, py) - 0.01, rule.radius + spread))
    band = rho * rho - lat * lat
    blocks = (along > 1e-4) & (band > 0) & hit
    free = along - np.sqrt(np.maximum(band, 0))
    return float(np.min(np.where(blocks, free, 1e6)))

def stop(r, seen, rule, R, m, c, tau):
    a = np.linspace(0, 1, MOMENTUM_SAMPLES)[:-1]  # the command's own end is steps 1-4's to judge
    over = []
    for ai in a:
        v = (1 - ai) * m[:2] + ai * c[:2]
        t = -tau * math.log(1 - ai)  # when a first-order lag of tau gets the base there
        p = m[:2] * t + (c[:2] - m[:2]) * (t - tau * ai)
        s = math.hypot(*v)
        if s < 1e-6: over.append(False); continue
        D = least_from(r, seen, rule, R, v, p)
        over.append(s > braking_speed(max(D, 0.0), rule.reaction, rule.decel) + MOMENTUM_TOLERANCE * (1 - ai) + 1e-4)
    return any(over[1:]) and not over[0], over

d = json.load(open(sys.argv[1])); rule = GuardRule.from_dict(d['guard']); R = d['max_range']
for tau in (0.0, 0.06, 0.12, 0.2):
    fired = []
    for t in d['ticks']:
        if 'checked' not in t or t['guard_scale'] in (None, 0.0): continue
        r = np.array(t['ranges'], dtype=np.float32); seen = np.ones(len(r), bool); seen[t['unseen']] = False
        c = np.array(t['checked']) * np.array([t['guard_scale'], t['guard_scale'], 1.0])
        s, _ = stop(r, seen, rule, R, np.array(t['twist']), c, tau)
        if s: fired.append(t['t'])
    print("tau", tau, "would stop at", fired)
