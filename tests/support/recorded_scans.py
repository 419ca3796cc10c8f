"""Guard inputs recorded in replays of long runs (the policy's 72 beams, metres, and the rule in
force), shared by the tests that pin what the guard and the gate's back-off do on them."""

from __future__ import annotations

from navcontract.guard import GuardRule

# Rule step 5 with sweep_lag: the tick before a steered command swept the base's velocity into a post
# (holonomic_direct 2150 steered, clutter field 18 at 2.7 s: the replay's guard inputs,
# docs/results/compare/probes/holonomic_direct_2150_clutter_policy_18_steer30.json).
FIELD_18_RANGES = [
    0.8815, 0.4833, 0.4833, 0.5201, 0.8189, 0.7969, 0.8092, 0.8035, 0.8438, 0.8302, 0.8924, 0.9136,
    0.9717, 1.0718, 1.0901, 1.2352, 1.3845, 1.6345, 1.4539, 2.2865, 2.959, 3.7224, 2.1659, 2.8914,
    3.3219, 1.3166, 1.3063, 3.5593, 3.0856, 1.5074, 1.5196, 0.4946, 0.4559, 0.4665, 0.4545, 1.5144,
    0.9528, 0.9792, 1.4895, 1.9124, 3.1597, 3.1404, 3.1404, 2.9237, 3.0458, 2.6758, 2.2576, 1.9337,
    1.7179, 2.3552, 2.0686, 2.0057, 1.5414, 1.6673, 1.9353, 3.5007, 3.44, 3.3742, 3.3527, 1.5195,
    1.5732, 3.3957, 2.6669, 2.1391, 1.7863, 1.5006, 1.2978, 1.2346, 1.0738, 1.0473, 0.9598, 0.9318,
]  # fmt: skip
FIELD_18_RULE = GuardRule(
    radius=0.2, margin=0.01, headway=0.5, decel=2.5, slide=True, reaction=0.32, after_smoother=True
)


# Rule step 5b (axis_brake): a base that limits vx and vy each by the same acceleration bends a
# diagonal brake toward its larger axis (holonomic_direct 2150 steered 30 degrees with a sweep lag of
# 0.06 s, clutter field 27 at 5.3 s: the guard inputs of runs/compare/probes/guard_ticks_*_lag06.json.gz).
FIELD_27_RANGES = [
    1.5169, 2.3291, 2.3508, 2.3344, 2.3788, 2.4705, 2.5201, 2.627, 2.7988, 1.46, 0.7766, 0.7821,
    0.7803, 2.0063, 2.4735, 0.6052, 0.5664, 0.5664, 0.6185, 2.6872, 4.1794, 4.6883, 1.6769, 1.1671,
    1.1852, 1.778, 1.6758, 1.5014, 1.5062, 0.4882, 0.4425, 0.4197, 0.408, 1.783, 1.7065, 1.6999,
    1.6723, 1.6625, 1.6639, 1.6639, 1.7007, 1.758, 1.6062, 1.3846, 1.313, 1.2318, 1.2008, 1.6026,
    1.5552, 0.724, 0.6957, 0.7821, 1.3582, 3.1007, 3.0072, 3.044, 3.0195, 3.1013, 3.1364, 3.1909,
    3.2944, 3.4093, 3.5703, 1.5991, 1.5991, 1.4013, 1.3381, 1.2555, 1.2087, 1.2643, 2.3587, 1.5097,
]  # fmt: skip


# The scan of the safety suite's posts270 episode 273 (holonomic_270_steer 2000, guard revision 3) at
# 7.5 s, wedged beside a post at -120 degrees, the blind sector filled from its edges; the robot at rest.
EPISODE_273_RANGES = [
    0.2435, 0.2435, 0.2435, 0.2435, 0.2435, 0.2435, 0.2435, 0.2435, 0.2435, 0.2435, 0.2233, 0.2159,
    0.215, 0.2156, 0.2222, 0.2406, 1.007, 1.6956, 1.7095, 1.2497, 1.2497, 4.2394, 2.7832, 6.0,
    1.5248, 1.4781, 1.515, 2.0306, 1.4744, 1.4868, 1.3792, 1.0704, 0.88, 0.752, 0.6609, 0.5935,
    0.5423, 0.5028, 0.472, 0.4479, 0.4293, 0.4153, 0.4051, 0.3983, 0.3947, 0.394, 0.3942, 0.3967,
    0.4022, 0.4112, 0.4238, 0.4407, 0.4626, 0.4908, 0.5269, 0.5735, 0.6344, 0.7158, 0.8284, 0.9921,
    1.2483, 1.7002, 1.8489, 1.8489, 1.8489, 1.8489, 1.8489, 1.8489, 1.8489, 1.8489, 1.8489, 1.8489,
]  # fmt: skip
EPISODE_273_GUARD = GuardRule(
    radius=0.2, margin=0.01, headway=0.5, decel=2.5, slide=True, after_smoother=True, reaction=0.32,
    steer=30.0, sweep_lag=0.06, axis_brake=True,
)  # fmt: skip
