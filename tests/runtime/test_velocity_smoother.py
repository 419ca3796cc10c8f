"""The velocity smoother and the contract's robot_response section (no ROS).

The smoother (``navdeploy.smoother``) limits each axis of a driving command to ``accel * dt`` from
the last sent command; the command gate (``navdeploy.gate``) applies it to driving
commands only, so a stop is always an immediate zero, and before the collision guard, whose cut is
sent as it is and remembered as the last sent command (tests/runtime/test_controller.py). Its default limits come from the bundle's
``robot_response`` section (:class:`navcontract.response.RobotResponse`; the training side fills it
in from its randomisation, tests/sim/test_contract_objects.py).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

import support.ros as h
from navcontract.bundle import (
    FORMAT_VERSION,
    LEGACY_FORMAT_VERSION,
    BundleError,
    parse_contract,
    read_contract,
)
from navcontract.response import SECTION, ResponseError, RobotResponse
from navdeploy.gate import CommandGate
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime, ScanInput
from navdeploy.settings import UNGUARDED, resolve_settings
from navdeploy.smoother import MAX_DT_PERIODS, AccelLimits, VelocitySmoother, limit_change
from navdeploy.states import State

PERIOD = 0.1
A_LIN, A_ANG = 2.5, 3.2  # the low ends of the trained ranges below


SUBSTEP = (0.02, "physics_substep")
RANGES = {
    "actuator_tau": ([0.02, 0.12], "actuator_tau"),
    "accel_linear": ([A_LIN, 6.0], "accel_linear"),
    "accel_angular": ([A_ANG, 8.0], "accel_angular"),
    "command_latency": ([0, 2], "command_latency"),
    "observation_latency": ([0, 2], "observation_latency"),
    "control_jitter": ([0, 1], "control_jitter"),
}
TERMS = ("accel_limit", "actuator_lag", "command_latency", "control_jitter", "lidar_noise", "observation_latency")
TRAINED = RobotResponse.checked(True, SUBSTEP, TERMS, RANGES)


# --------------------------------------------------------------------------- the section


def test_section_of_trained_ranges() -> None:
    sec = TRAINED.to_dict()
    assert sec["randomized"] is True
    assert sec["accel_limit"] == {"linear": A_LIN, "angular": A_ANG}  # the most restrictive trained
    assert sec["accel_limit_trained"] == {"linear": [A_LIN, 6.0], "angular": [A_ANG, 8.0]}
    assert sec["actuator_tau"] == [0.02, 0.12]
    assert sec["physics_substep"] == pytest.approx(0.02)
    assert sec["latency_budget"] == pytest.approx((2 + 2 + 1) * 0.02)  # the high ends x the substep
    assert sec["latency_substeps"] == {"command": [0, 2], "observation": [0, 2], "jitter": [0, 1]}
    assert sec["terms"] == list(TERMS)
    assert RobotResponse.from_dict(json.loads(json.dumps(sec))) == TRAINED  # JSON round trip


def test_nothing_trained_means_no_limit_and_no_budget() -> None:
    r = RobotResponse.checked(False, SUBSTEP)
    assert not r.randomized and r.terms == ()
    assert r.accel_limit_linear is None and r.accel_limit_angular is None and r.actuator_tau is None
    assert r.latency_budget == 0.0
    sec = r.to_dict()
    assert sec["accel_limit"] == {"linear": None, "angular": None}
    assert RobotResponse.from_dict(sec) == r


def test_a_range_left_out_or_null_was_not_trained() -> None:
    ranges = {k: v for k, v in RANGES.items() if k not in ("accel_linear", "command_latency")}
    ranges["accel_angular"] = (None, "accel_angular")
    r = RobotResponse.checked(True, SUBSTEP, ("observation_latency",), ranges)
    assert r.randomized and r.accel_limit_linear is None and r.accel_limit_angular is None
    assert r.latency_budget == pytest.approx((2 + 1) * 0.02)


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("accel_linear", [0.0, 6.0], "where.accel_linear must be finite with 0 < lo"),
        ("accel_linear", [6.0, 2.5], "where.accel_linear"),
        ("actuator_tau", [float("nan"), 0.1], "where.actuator_tau"),
        ("command_latency", [0, 1.5], "whole substeps"),
        ("control_jitter", "two", "where.control_jitter"),
        ("speed", [0, 1], "unknown range field"),
    ],
)
def test_unusable_ranges_are_refused_naming_where_they_came_from(field: str, value, needle: str) -> None:
    ranges = {**RANGES, field: (value, f"where.{field}")}
    with pytest.raises(ResponseError, match=needle):
        RobotResponse.checked(True, SUBSTEP, TERMS, ranges)
    with pytest.raises(ResponseError, match="where.substep"):
        RobotResponse.checked(True, (0.0, "where.substep"), TERMS, RANGES)


def test_the_sections_derived_numbers_must_agree_with_its_ranges() -> None:
    for key, edit in (
        ("accel_limit.linear", lambda s: s["accel_limit"].update(linear=6.0)),
        ("latency_budget", lambda s: s.update(latency_budget=0.02)),
    ):
        sec = TRAINED.to_dict()
        edit(sec)
        with pytest.raises(ResponseError, match=key):
            RobotResponse.from_dict(sec)
    sec = TRAINED.to_dict()
    sec["randomized"] = "yes"
    with pytest.raises(ResponseError, match="randomized"):
        RobotResponse.from_dict(sec)


# --------------------------------------------------------------------------- bundles


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bundles")
    return {
        "trained": h.write_goal_seeking_bundle(root / "trained", response=TRAINED),
        "legacy": h.write_goal_seeking_bundle(root / "legacy"),
    }


def test_format_2_carries_the_section_and_format_1_still_loads(bundles: dict[str, Path]) -> None:
    new, old = read_contract(bundles["trained"]), read_contract(bundles["legacy"])
    assert new.raw["format_version"] == FORMAT_VERSION == 2 and new.response == TRAINED
    assert old.raw["format_version"] == LEGACY_FORMAT_VERSION == 1 and old.response is None
    # The section is not part of the observation fingerprint: same spec, same fingerprint.
    assert new.fingerprint == old.fingerprint
    fixture = PolicyRuntime.load(h.fixture_bundle()).contract  # the committed bundle: format 1
    assert fixture.response is None and fixture.raw["format_version"] == 1


def test_format_and_section_must_go_together(bundles: dict[str, Path]) -> None:
    data = read_contract(bundles["trained"]).raw
    no_section = {k: v for k, v in data.items() if k != SECTION}
    with pytest.raises(BundleError, match=f"format_version 2 has no {SECTION}"):
        parse_contract(no_section)
    with pytest.raises(BundleError, match=f"format_version 1 carries a {SECTION}"):
        parse_contract({**data, "format_version": 1})
    with pytest.raises(BundleError, match="format_version 3 unsupported"):
        parse_contract({**data, "format_version": 3})
    bad = copy.deepcopy(data)
    bad[SECTION]["accel_limit"]["angular"] = 1.0
    with pytest.raises(BundleError, match="accel_limit.angular"):
        parse_contract(bad)


# --------------------------------------------------------------------------- the smoother


def test_step_input_respects_the_limits_then_tracks_exactly() -> None:
    s = VelocitySmoother(AccelLimits(A_LIN, A_ANG), PERIOD)
    target = np.array([1.5, -1.0, 2.0])
    out, t = [], 0.0
    for _ in range(12):
        t += PERIOD
        out.append(s.step(target, t))
    cmds = np.array([np.zeros(3), *out])
    deltas = np.abs(np.diff(cmds, axis=0))
    assert np.all(deltas[:, :2] <= A_LIN * PERIOD + 1e-12) and np.all(deltas[:, 2] <= A_ANG * PERIOD + 1e-12)
    assert cmds[1] == pytest.approx([0.25, -0.25, 0.32])
    ticks_to_reach = [int(np.argmax(np.isclose(cmds[:, i], target[i]))) for i in range(3)]
    assert ticks_to_reach == [math.ceil(1.5 / 0.25), math.ceil(1.0 / 0.25), math.ceil(2.0 / 0.32)]
    assert np.array_equal(out[-1], target)  # then the target itself, no lag left
    # Braking while driving ramps down at the same limit.
    assert s.step(np.zeros(3), t + PERIOD) == pytest.approx([1.25, -0.75, 1.68])


def test_propose_remembers_nothing_and_sent_is_the_memory() -> None:
    """The gate's two calls: the proposal toward a target, then what actually went out (the guard's
    cut of it, say); the next proposal moves from what went out. ``step`` is both at once."""
    s = VelocitySmoother(AccelLimits(A_LIN, A_ANG), PERIOD)
    target = np.array([1.5, -1.0, 2.0])
    first = s.propose(target, 0.1)
    assert first == pytest.approx([0.25, -0.25, 0.32]) and not s.last.any() and s.last_time is None
    assert np.array_equal(s.propose(target, 0.1), first)  # nothing moved
    cut = 0.1 * first
    s.sent(cut, 0.1)
    assert np.array_equal(s.last, cut) and s.last_time == 0.1
    assert s.propose(target, 0.2) == pytest.approx(cut + [0.25, -0.25, 0.32])
    twin = VelocitySmoother(AccelLimits(A_LIN, A_ANG), PERIOD)
    for t in (0.1, 0.2, 0.3):
        assert np.array_equal(twin.step(target, t), twin.last)


def test_the_rule_is_one_function_for_one_robot_or_a_batch() -> None:
    """limit_change: the smoother's step, per row of a batch (the simulator's command stages)."""
    rng = np.random.default_rng(5)
    prev, target = rng.uniform(-2, 2, (32, 3)), rng.uniform(-2, 2, (32, 3))
    batch = limit_change(prev, target, A_LIN, A_ANG, PERIOD)
    for i in range(32):
        s = VelocitySmoother(AccelLimits(A_LIN, A_ANG), PERIOD)
        s.sent(prev[i], 0.0)
        assert np.array_equal(s.propose(target[i], PERIOD), batch[i])
    step = np.abs(batch - prev)
    assert np.all(step[:, :2] <= A_LIN * PERIOD + 1e-12) and np.all(step[:, 2] <= A_ANG * PERIOD + 1e-12)
    assert np.array_equal(limit_change(prev, target, None, None, PERIOD), target)


def test_dt_is_the_actual_period_within_bounds() -> None:
    s = VelocitySmoother(AccelLimits(1.0, None), PERIOD)
    s.reset(0.0)
    assert s.step(np.array([5.0, 0, 0]), 0.05)[0] == pytest.approx(0.05)  # a tick after 50 ms: 50 ms worth
    assert s.step(np.array([5.0, 0, 0]), 0.25)[0] == pytest.approx(0.25)  # 200 ms later
    late = s.step(np.array([5.0, 0, 0]), 10.0)[0]  # a stalled node: at most MAX_DT_PERIODS periods credited
    assert late == pytest.approx(0.25 + MAX_DT_PERIODS * PERIOD)
    back = s.step(np.array([5.0, 0, 0]), 5.0)[0]  # the clock went back: the nominal period
    assert back == pytest.approx(late + PERIOD)
    assert s.step(np.array([0.0, 0.0, 7.0]), 5.1)[2] == 7.0  # no angular limit: that axis passes


def test_no_limits_is_the_identity_and_limits_must_be_positive() -> None:
    s = VelocitySmoother(AccelLimits(), PERIOD)
    for t, cmd in enumerate(np.random.default_rng(0).uniform(-2, 2, (20, 3))):
        assert np.array_equal(s.step(cmd, 0.1 * t), cmd)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="acceleration limit linear"):
            AccelLimits(bad, None)


# --------------------------------------------------------------------------- in the safety controller


def controller(bundle: Path, **params) -> CommandGate:
    rt = PolicyRuntime.load(bundle)
    settings, _ = resolve_settings(rt.contract, NodeParams(**params))
    return CommandGate.from_settings(rt, settings)


def feed(c: CommandGate, t: float, scan: ScanInput | None = None) -> None:
    c.set_scan(scan or ScanInput.training_beams(np.full(72, 3.0), 72, 6.0), t)
    c.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), t, "odom")


def drive(c: CommandGate, t0: float, n: int) -> list:
    out = []
    for k in range(n):
        t = t0 + k * PERIOD
        feed(c, t)
        out.append(c.tick(t))
    return out


def test_controller_ramps_with_the_contracts_limits_and_stops_at_once(bundles: dict[str, Path]) -> None:
    c = controller(bundles["trained"])
    assert c.smoother is not None and c.smoother.limits == AccelLimits(A_LIN, A_ANG)
    feed(c, 0.0)
    c.set_goal(5.0, 0.0, "odom")  # straight ahead: the policy asks for 1.5 m/s at once
    res = drive(c, 0.0, 8)
    assert all(r.state == State.DRIVING for r in res)
    vx = [r.cmd[0] for r in res]
    assert vx == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.5, 1.5])
    # A safety state: zero on that very tick, not a ramp down.
    t = 0.8
    feed(c, t, scan=ScanInput(np.full(72, np.nan), -math.pi, 2 * math.pi / 72, 0.1, 6.0))
    stop = c.tick(t)
    assert stop.state == State.BAD_SCAN and not stop.cmd.any()
    # Driving again starts from rest.
    again = drive(c, 0.9, 2)
    assert [r.cmd[0] for r in again] == pytest.approx([0.25, 0.5])
    # A stale input (no new scan) and the goal reached are stops too.
    stale = c.tick(0.9 + 0.1 + 1.0)
    assert stale.state == State.STALE_SCAN and not stale.cmd.any()
    assert c.smoother.last.tolist() == [0.0, 0.0, 0.0]
    c.set_goal(0.1, 0.0, "odom")
    feed(c, 3.0)
    assert not c.tick(3.0).cmd.any()


def test_controller_watchdog_stop_resets_the_smoother(bundles: dict[str, Path]) -> None:
    c = controller(bundles["trained"])
    feed(c, 0.0)
    c.set_goal(5.0, 0.0, "odom")
    drive(c, 0.0, 8)
    c.stopped(0.8)  # what the node does when its clock watchdog publishes a zero
    assert drive(c, 0.9, 1)[0].cmd[0] == pytest.approx(0.25)


def test_smoother_off_or_legacy_bundle_is_the_identity(bundles: dict[str, Path]) -> None:
    off = controller(bundles["trained"], velocity_smoother=False)
    legacy = controller(bundles["legacy"])
    for c in (off, legacy):
        assert c.smoother is None
        feed(c, 0.0)
        c.set_goal(5.0, 0.0, "odom")
        assert drive(c, 0.0, 1)[0].cmd == pytest.approx([1.5, 0.0, 0.0], abs=1e-5)
    # A legacy bundle with limits set by the node is smoothed.
    c = controller(bundles["legacy"], max_accel_linear=1.0)
    assert c.smoother is not None and c.smoother.limits == AccelLimits(1.0, None)
    feed(c, 0.0)
    c.set_goal(5.0, 0.0, "odom")
    assert [r.cmd[0] for r in drive(c, 0.0, 2)] == pytest.approx([0.1, 0.2])


def test_smoothed_commands_stay_within_the_speed_limits(bundles: dict[str, Path]) -> None:
    c = controller(bundles["trained"], v_max=1.0, max_accel_linear=100.0)
    feed(c, 0.0)
    c.set_goal(3.0, 3.0, "odom")  # diagonal: the planar clamp binds
    for r in drive(c, 0.0, 5):
        assert h.finite_within(tuple(r.cmd), 1.0, 2.0)


def test_settings_name_where_each_acceleration_limit_came_from(bundles: dict[str, Path]) -> None:
    trained = read_contract(bundles["trained"])
    s, warn = resolve_settings(trained)
    assert s.accel_limits == AccelLimits(A_LIN, A_ANG) and warn == [UNGUARDED]  # no radius: no guard
    assert any("max_accel_linear 2.5 m/s^2 (bundle contract" in line for line in s.limit_sources)
    s, warn = resolve_settings(trained, NodeParams(max_accel_linear=4.0, max_accel_angular=1.0))
    assert s.accel_limits == AccelLimits(4.0, 1.0)
    assert warn[1:] == [UNGUARDED] and "max_accel_angular=1 rad/s^2 is outside the range" in warn[0]
    s, warn = resolve_settings(trained, NodeParams(velocity_smoother=False, max_accel_linear=3.0))
    assert not s.accel_limits.active and any("ignored" in w for w in warn)
    assert any("trained with acceleration limits" in w for w in warn)
    s, _ = resolve_settings(read_contract(bundles["legacy"]))
    assert not s.accel_limits.active
    assert any("no robot_response section" in line for line in s.limit_sources)


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"max_accel_linear": -1.0}, "max_accel_linear"),
        ({"max_accel_angular": float("nan")}, "max_accel_angular"),
        ({"max_accel_linear": float("inf")}, "max_accel_linear"),
        ({"velocity_smoother": 1}, "velocity_smoother"),
    ],
)
def test_smoother_parameters_are_checked(bundles: dict[str, Path], kw: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        resolve_settings(read_contract(bundles["trained"]), NodeParams(**kw))
