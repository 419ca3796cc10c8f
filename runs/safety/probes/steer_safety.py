"""Probe: the safety suite (nav-evaluate --suite safety ...) with every node gate's guard steering
(navcontract.steer) by STEER degrees, judging a swing with SWEEP_LAG s and braking by rule step 5b,
whatever the bundle's contract says: the policy as trained, steered behind the gate.

    python runs/safety/probes/steer_safety.py STEER SWEEP_LAG AXIS_BRAKE -- NAV_EVALUATE_ARGS...
"""

import sys
from dataclasses import replace

from navdeploy import gate as gate_module

steer, lag, brake = float(sys.argv[1]), float(sys.argv[2]), bool(int(sys.argv[3]))
args = sys.argv[sys.argv.index("--") + 1 :]
init = gate_module.CommandGate.__init__


def steered_init(self, *a, **k):
    init(self, *a, **k)
    if self.guard is not None:
        self.guard = replace(self.guard, steer=steer, sweep_lag=lag, axis_brake=brake)


gate_module.CommandGate.__init__ = steered_init
print(f"[probe] every gate's guard steers {steer:g} deg, sweep lag {lag:g} s, axis brake {brake}", flush=True)
from navtrain.evaluate_cli import main  # noqa: E402

sys.exit(main(args))
