"""The kinematic lower bound on time to goal, and nav-compare's use of it (no simulator)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from navcontract.bundle import read_contract
from navtrain.compare import BAR, row_summary, verdict
from navtrain.evaluation import SUCCESS, TIMEOUT
from navtrain.time_bound import KinematicLimits, bound_of_contract, least_time

LIMITS = KinematicLimits(v_max=2.0, accel=4.0, goal_tolerance=0.5, period=0.1)


def test_least_time_accelerates_then_cruises_and_rounds_up_to_whole_periods() -> None:
    # 0.5 m ramp to 2 m/s in 0.5 s; then 1.5 m at 2 m/s: 1.25 s over 2.5 m (less the tolerance)
    # 0.125 m from rest at 4 m/s^2: 0.25 s; 0.2 m: sqrt(0.1) = 0.316 s -> 0.4 s
    got = least_time(np.array([2.5, 0.625, 0.7, 0.3]), LIMITS)
    assert got == pytest.approx([1.3, 0.3, 0.4, 0.0])
    # simulated: whole periods of full acceleration then full speed never cover the distance sooner
    for d in (0.8, 1.7, 4.2):
        v = x = 0.0
        k = 0
        while x < d - LIMITS.goal_tolerance:
            v_next = min(LIMITS.v_max, v + LIMITS.accel * LIMITS.period)
            x += 0.5 * (v + v_next) * LIMITS.period  # the best any ramp inside the period can do
            v, k = v_next, k + 1
        assert least_time(np.array([d]), LIMITS)[0] <= k * LIMITS.period + 1e-9


def test_limits_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="accel must be finite and > 0"):
        KinematicLimits(v_max=1.0, accel=0.0, goal_tolerance=0.3, period=0.1)
    with pytest.raises(ValueError, match="goal_tolerance"):
        KinematicLimits(v_max=1.0, accel=1.0, goal_tolerance=-0.1, period=0.1)


def test_contract_limits_follow_the_drive() -> None:
    from support.paths import REPO

    holo = bound_of_contract(read_contract(REPO / "ros2_ws/src/nav_policy/nav_policy/default_bundle"))
    assert holo is not None and holo.v_max == pytest.approx(1.5)
    assert holo.accel == pytest.approx(2.5 * math.sqrt(2.0))  # the trained limit, per axis
    jackal = bound_of_contract(read_contract(REPO / "ros2_ws/src/nav_policy/nav_policy/jackal_bundle"))
    assert jackal is not None and jackal.v_max == pytest.approx(2.0) and jackal.accel == pytest.approx(3.0)
    assert (jackal.goal_tolerance, jackal.period) == (pytest.approx(0.3), pytest.approx(0.1))


def test_compare_says_when_the_time_bar_is_below_the_bound() -> None:
    S, T = SUCCESS, TIMEOUT
    straight = np.array([2.5, 2.5, 5.0])  # the bound: 1.3 s on each of the first two
    episodes = {
        "policy": {"outcome": np.array([S, S, T]), "time_s": np.array([1.4, 1.4, 30.0]), "path_len": np.ones(3)},
        "dwa": {"outcome": np.array([S, S, S]), "time_s": np.array([1.4, 1.4, 3.0]), "path_len": np.ones(3),
                "straight": straight},
    }  # fmt: skip
    results = {
        r: {"success_rate": 1.0, "collision_rate": 0.0, "command_change_angular": 0.1, "episodes": 500}
        for r in ("policy", "dwa")
    }
    s = row_summary(results, episodes, LIMITS)
    assert s["least_time_s"] == pytest.approx(1.3) and s["bar_time_s"] == pytest.approx(BAR.max_time_ratio * 1.4)
    text = verdict("rooms", s, results)
    assert "no driver takes less than 1.30 s" in text and "1.08x that" in text
    assert "the bar asks 1.26 s (below it: no driver can)" in text
    slow = {**episodes, "dwa": {**episodes["dwa"], "time_s": np.array([2.6, 2.6, 3.0])}}
    s = row_summary(results, slow, LIMITS)
    assert "below it" not in verdict("rooms", s, results) and "2.00x that" in verdict("rooms", s, results)
    assert "least_time_s" not in row_summary(results, slow)  # without limits: no bound
