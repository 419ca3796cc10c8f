"""The command gate (navdeploy.gate) without ROS: gating, goals, clamping, with the real runtime, and
the order of its stages: clamp, velocity smoother, then the collision guard on the command that is
sent, with unseen sectors occupied."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import support.ros as h
from navcontract.guard import UNSEEN_CLEARANCE, GuardRule, apply_guard
from navdeploy.gate import CommandGate, clamp_command
from navdeploy.inputs import parse_goal_frames, yaw_from_quaternion
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime, ScanInput, ScanUnusable
from navdeploy.settings import UNGUARDED, Limits, resolve_settings
from navdeploy.states import State
from support.gates import make_gate


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> PolicyRuntime:
    return PolicyRuntime.load(h.write_goal_seeking_bundle(tmp_path_factory.mktemp("bundle")))


def good_scan(n: int = 72) -> ScanInput:
    return ScanInput.training_beams(np.full(n, 3.0), n, 6.0)


def feed(c: CommandGate, t: float, scan: ScanInput | None = None, yaw: float = 0.0) -> None:
    c.set_scan(scan or good_scan(), t)
    c.set_odom((0.0, 0.0), (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)), (0.0, 0.0, 0.0), t, "odom")


def test_drives_toward_goal_in_body_frame(runtime: PolicyRuntime) -> None:
    c = make_gate(runtime)
    feed(c, 10.0, yaw=math.pi / 2)  # facing +y
    ok, _ = c.set_goal(3.0, 0.0, "odom")  # goal to the robot's right
    assert ok
    r = c.tick(10.05)
    assert r.state == State.DRIVING and r.inference_ms is not None
    assert r.cmd[0] == pytest.approx(0.0, abs=1e-5) and r.cmd[1] == pytest.approx(-1.5, abs=1e-5)
    assert r.distance == pytest.approx(3.0)


def test_zero_without_goal_inputs_or_after_reaching(runtime: PolicyRuntime) -> None:
    c = make_gate(runtime)
    assert c.tick(0.0).state == State.WAITING_INPUT
    feed(c, 1.0)
    r = c.tick(1.0)
    assert r.state == State.NO_GOAL and not r.cmd.any()
    c.set_goal(0.2, 0.0, "odom")
    r = c.tick(1.0)
    assert r.state == State.GOAL_REACHED and not r.cmd.any()
    c.set_goal(3.0, 0.0, "odom")  # a new goal leaves the reached state
    assert c.tick(1.0).state == State.DRIVING


def test_stale_and_future_inputs_stop(runtime: PolicyRuntime) -> None:
    c = make_gate(runtime)
    feed(c, 1.0)
    c.set_goal(3.0, 0.0, "odom")
    assert c.tick(1.4).state == State.DRIVING
    r = c.tick(1.6)
    assert r.state == State.STALE_SCAN and not r.cmd.any()
    c.set_scan(good_scan(), 1.6)
    assert c.tick(1.6).state == State.STALE_ODOM
    feed(c, 5.0)
    assert c.tick(4.0).state == State.STALE_SCAN  # stamped a second in the future: clock jumped back


def test_unusable_scan_and_odometry(runtime: PolicyRuntime) -> None:
    c = make_gate(runtime)
    feed(c, 1.0, scan=ScanInput(np.array([]), -math.pi, 0.1, 0.0, 6.0))
    c.set_goal(3.0, 0.0, "odom")
    r = c.tick(1.0)
    assert r.state == State.BAD_SCAN and not r.cmd.any() and "no readings" in r.reason
    feed(c, 1.0, scan=ScanInput(np.full(72, np.nan), -math.pi, 2 * math.pi / 72, 0.1, 6.0))
    assert c.tick(1.0).state == State.BAD_SCAN
    feed(c, 1.0)
    problem = c.set_odom((0.0, 0.0), (np.nan, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, "odom")
    assert problem and "quaternion" in problem
    r = c.tick(1.0)
    assert r.state == State.BAD_ODOM and not r.cmd.any()
    assert c.set_odom((0.0, 0.0), (0, 0, 0, 1), (np.inf, 0, 0), 1.0, "odom") is not None
    assert c.set_odom((0.0, 0.0), (0, 0, 0, 1), (0, 0, 0), 1.0, "map") is not None
    assert c.set_odom((0.0, 0.0), (0, 0, 0, 2.0), (0, 0, 0), 1.0, "odom") is None  # normalised
    assert c.tick(1.0).state == State.DRIVING


def test_foreign_goal_frames(runtime: PolicyRuntime) -> None:
    c = make_gate(runtime, goal_frames=parse_goal_frames("map 1.0 2.0 1.5707963267948966"))
    feed(c, 1.0)
    ok, text = c.set_goal(1.0, 0.0, "earth")
    assert not ok and "earth" in text and "no static transform" in text
    assert c.tick(1.0).state == State.NO_GOAL
    ok, _ = c.set_goal(1.0, 0.0, "map")
    assert ok and c.goal == pytest.approx((1.0, 3.0))
    assert c.set_goal(1.0, 0.0, "odom")[0]
    c.set_goal(1.0, 0.0, "earth")  # a rejected goal also drops the current one
    assert c.goal is None
    with pytest.raises(ValueError, match="expected 'frame x y yaw'"):
        parse_goal_frames("map 1 2")


def test_clamp_and_non_finite_policy_output(runtime: PolicyRuntime) -> None:
    lim = Limits(0.5, 1.0, True)
    assert np.allclose(clamp_command(np.array([2.0, 2.0, -5.0]), lim), [0.5 / math.sqrt(2), 0.5 / math.sqrt(2), -1.0])
    assert np.allclose(clamp_command(np.array([2.0, 2.0, 5.0]), Limits(0.5, 1.0, False)), [0.5, 0.5, 1.0])
    assert not clamp_command(np.array([np.nan, 0.0, 0.0]), lim).any()

    class Broken:
        def reset(self) -> None:
            pass

        def step(self, *a, **k):
            return np.array([np.nan, 1.0, 0.0])

    c = make_gate(Broken())
    feed(c, 1.0)
    c.set_goal(3.0, 0.0, "odom")
    r = c.tick(1.0)
    assert r.state == State.ERROR and not r.cmd.any()
    c2 = make_gate(runtime, limits=lim)
    feed(c2, 1.0)
    c2.set_goal(3.0, 0.0, "odom")
    assert c2.tick(1.0).cmd == pytest.approx([0.5, 0.0, 0.0], abs=1e-6)


def test_yaw_from_quaternion() -> None:
    assert yaw_from_quaternion(0, 0, math.sin(0.4), math.cos(0.4)) == pytest.approx(0.8)
    assert yaw_from_quaternion(0, 0, 0, 0) is None
    assert yaw_from_quaternion(0, 0, np.inf, 1) is None


# ------------------------------------------------------------------ messages, settings, tick guard
def _stamp(t: float) -> SimpleNamespace:
    sec = int(t)
    return SimpleNamespace(sec=sec, nanosec=int(round((t - sec) * 1e9)))


def scan_msg(ranges, t: float = 1.0, **kw) -> SimpleNamespace:
    """A LaserScan-like object (rclpy messages and rosbags dataclasses have these attributes)."""
    n = len(ranges)
    fields = dict(angle_min=-math.pi, angle_increment=2 * math.pi / max(n, 1), range_min=0.05, range_max=6.0)
    fields.update(kw)
    return SimpleNamespace(header=SimpleNamespace(stamp=_stamp(t), frame_id="base_link"), ranges=ranges, **fields)


def odom_msg(t: float = 1.0, frame: str = "odom", x: float = 0.0, q=(0.0, 0.0, 0.0, 1.0)) -> SimpleNamespace:
    v3 = lambda a=0.0, b=0.0, c=0.0: SimpleNamespace(x=a, y=b, z=c)
    pose = SimpleNamespace(position=v3(x), orientation=SimpleNamespace(x=q[0], y=q[1], z=q[2], w=q[3]))
    twist = SimpleNamespace(linear=v3(), angular=v3())
    return SimpleNamespace(
        header=SimpleNamespace(stamp=_stamp(t), frame_id=frame),
        pose=SimpleNamespace(pose=pose),
        twist=SimpleNamespace(twist=twist),
    )


def goal_msg(x: float, y: float, frame: str = "odom") -> SimpleNamespace:
    return SimpleNamespace(
        header=SimpleNamespace(stamp=_stamp(0.0), frame_id=frame),
        pose=SimpleNamespace(position=SimpleNamespace(x=x, y=y, z=0.0)),
    )


def test_message_adapters_fold_messages_like_the_node(runtime: PolicyRuntime) -> None:
    c = make_gate(runtime, goal_frames=parse_goal_frames("map 1.0 0.0 0.0"))
    assert c.scan_message(scan_msg([3.0] * 72, t=2.0), now=5.0) is None
    assert c.scan.stamp == pytest.approx(2.0)
    assert c.odom_message(odom_msg(t=0.0), now=2.1) is None  # an unset stamp: taken at "now"
    assert c.odom.stamp == pytest.approx(2.1)
    assert c.goal_message(goal_msg(2.0, 0.0, "map"))[0] and c.goal == pytest.approx((3.0, 0.0))
    r = c.tick(2.2)
    assert r.state == State.DRIVING and r.distance == pytest.approx(3.0)
    # numpy ranges (as rosbags decodes a float32 sequence) work the same
    c.scan_message(scan_msg(np.full(72, 3.0, dtype=np.float32), t=2.2), now=2.2)
    assert c.tick(2.2).cmd == pytest.approx(r.cmd)
    assert c.odom_message(odom_msg(t=2.2, frame="map"), now=2.2) is not None
    assert c.tick(2.2).state == State.BAD_ODOM


def test_unreadable_messages_make_their_input_unusable(runtime: PolicyRuntime) -> None:
    c = make_gate(runtime)
    c.scan_message(scan_msg([3.0] * 72), now=1.0)
    c.odom_message(odom_msg(), now=1.0)
    c.goal_message(goal_msg(3.0, 0.0))
    assert c.tick(1.0).state == State.DRIVING
    problem = c.scan_message(scan_msg(["far"] * 72), now=1.0)  # not even a ScanInput
    assert problem and problem.startswith("scan unusable")
    r = c.tick(1.0)
    assert r.state == State.BAD_SCAN and not r.cmd.any()
    c.scan_message(scan_msg([3.0] * 72), now=1.0)
    assert c.tick(1.0).state == State.DRIVING
    assert c.odom_message(SimpleNamespace(header=None), now=1.0) is not None
    assert c.tick(1.0).state == State.BAD_ODOM
    c.odom_message(odom_msg(), now=1.0)
    ok, text = c.goal_message(SimpleNamespace(pose=None))
    assert not ok and "could not be read" in text and c.goal is None
    assert c.tick(1.0).state == State.NO_GOAL
    c.input_failed("odom", "callback failed")
    assert c.tick(1.0).state == State.BAD_ODOM and c.odom_error == "callback failed"


def test_resolve_settings_from_parameters_and_contract(runtime: PolicyRuntime) -> None:
    ct = runtime.contract
    s, warnings = resolve_settings(ct)
    assert s.control_period == ct.control_period and s.goal_tolerance == ct.goal_tolerance
    assert warnings == [UNGUARDED]  # no guard section and no robot.radius: nothing to guard with
    assert s.limits == Limits(ct.v_max, ct.omega_max, ct.scaling.limit_planar_speed)
    s, warnings = resolve_settings(
        ct, NodeParams(v_max=ct.v_max / 2, omega_max=ct.omega_max * 2, static_goal_frames="map 1 2 0")
    )
    assert s.limits.v_max == ct.v_max / 2 and s.limits.omega_max == ct.omega_max  # capped to the bundle's
    assert warnings[1:] == [UNGUARDED] and "omega_max" in warnings[0] and set(s.goal_frames) == {"map"}
    for kw, name in (({"v_max": -1.0}, "v_max"), ({"stale_timeout": 0.0}, "stale_timeout")):
        with pytest.raises(ValueError, match=name):
            resolve_settings(ct, NodeParams(**kw))
    with pytest.raises(ValueError, match="static_goal_frames"):
        resolve_settings(ct, NodeParams(static_goal_frames="map 1"))
    c = CommandGate.from_settings(runtime, s)
    assert c.scan_errors == (ScanUnusable,) and c.limits == s.limits


def test_tick_never_raises(runtime: PolicyRuntime) -> None:
    class ResetFails:
        def reset(self) -> None:
            raise RuntimeError("boom")

        def step(self, *a, **k):
            return np.zeros(3)

    c = make_gate(ResetFails())
    feed(c, 1.0)
    c.set_goal(3.0, 0.0, "odom")
    r = c.tick(1.0)
    assert r.state == State.ERROR and "boom" in r.reason and not r.cmd.any()


# ------------------------------------------------------------------ the stages: clamp, smoother, guard last
GUARD = GuardRule(radius=0.2, margin=0.03, headway=0.5, decel=2.5, slide=False)  # the shipped default's numbers
B = 72
R_MAX = 6.0
DIAG = 1.5 / math.sqrt(2.0)  # the goal-seeking policy's vx, vy toward a goal 45 degrees off (planar limit)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> PolicyRuntime:
    """The goal-seeking policy with a guard section that does not state the unseen clearance."""
    return PolicyRuntime.load(h.write_goal_seeking_bundle(tmp_path_factory.mktemp("guarded"), guard=GUARD))


def gate(runtime: PolicyRuntime, **params) -> CommandGate:
    """The node's gate (its parameters' defaults, no scan map) with the smoother at the shipped
    default bundle's limits unless ``params`` say otherwise."""
    params = {"scan_map": False, "max_accel_linear": 2.5, "max_accel_angular": 3.2, **params}
    settings, _ = resolve_settings(runtime.contract, NodeParams(**params))
    return CommandGate.from_settings(runtime, settings)


def post(bearing_deg: float, r: float) -> np.ndarray:
    """Training-beam ranges: nothing within range but one return at ``bearing_deg``, ``r`` metres."""
    ranges = np.full(B, R_MAX)
    ranges[int(round((math.radians(bearing_deg) + math.pi) / (2 * math.pi / B))) % B] = r
    return ranges


def at(c: CommandGate, t: float, goal: tuple[float, float], scan: ScanInput | np.ndarray):
    """One tick at ``t``: the robot at the origin facing +x, at rest as odometry says, ``goal`` set."""
    if isinstance(scan, np.ndarray):
        scan = ScanInput.training_beams(scan, B, R_MAX)
    c.set_scan(scan, t)
    c.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), t, "odom")
    if c.goal != goal:
        c.set_goal(*goal, "odom")
    return c.tick(t)


def cruise(c: CommandGate, goal: tuple[float, float], ticks: int = 8) -> float:
    """Ramp up to the policy's command toward ``goal`` in open space; returns the last tick's time."""
    for k in range(ticks):
        res = at(c, 0.1 * k, goal, np.full(B, R_MAX))
        assert res.state == State.DRIVING and res.guard_scale == 1.0
    return 0.1 * (ticks - 1)


def test_the_guard_checks_the_smoothed_command_that_is_sent(guarded: PolicyRuntime) -> None:
    """The policy flips its sideways direction (-45 to +45 degrees); the smoother's in-between command
    heads at -37 degrees, into a post there that the new target passes by. The command sent is the
    guard's cut of that in-between command on the same scan (not the in-between command itself,
    which guarding the target and smoothing after it sent), and the smoother remembers it."""
    c = gate(guarded)
    t = cruise(c, (3.0, -3.0))
    assert c.smoother.last == pytest.approx([DIAG, -DIAG, 0.0])
    ranges = post(-35.0, 0.3)
    target = np.array([DIAG, DIAG, 0.0])
    between = c.smoother.propose(target, t + 0.1)
    assert between == pytest.approx([DIAG, -DIAG + 0.25, 0.0])  # the old order's sent command
    assert float(apply_guard(ranges, target, GUARD, R_MAX)[1]) == 1.0  # the target itself is clear
    cut, scale = apply_guard(ranges, between, GUARD, R_MAX)
    assert float(scale) < 0.1
    res = at(c, t + 0.1, (3.0, 3.0), ranges)
    assert res.state == State.DRIVING and res.guard_scale == pytest.approx(float(scale))
    assert res.cmd == pytest.approx(cut, abs=1e-9) and math.hypot(*res.cmd[:2]) < 0.1 * math.hypot(*between[:2])
    assert c.smoother.last == pytest.approx(res.cmd)  # the memory is what was sent
    nxt = at(c, t + 0.2, (3.0, 3.0), np.full(B, R_MAX))  # the post gone: ramps on from the cut command
    assert nxt.cmd[:2] == pytest.approx(res.cmd[:2] + np.array([0.25, 0.25]))


def test_a_stop_by_the_guard_is_not_ramped(guarded: PolicyRuntime) -> None:
    """At 1.5 m/s straight ahead a post shows up 3.5 cm from the shell: the guard's zero goes out on that
    tick (the smoother alone would send 1.25 m/s), and the next command ramps up from it."""
    c = gate(guarded)
    t = cruise(c, (5.0, 0.0))
    assert c.smoother.last == pytest.approx([1.5, 0.0, 0.0])
    assert c.smoother.propose(np.array([1.5, 0.0, 0.0]), t + 0.1) == pytest.approx([1.5, 0.0, 0.0])
    res = at(c, t + 0.1, (5.0, 0.0), post(0.0, 0.235))
    assert res.state == State.DRIVING and res.guard_scale == 0.0 and not res.cmd.any()
    assert not c.smoother.last.any()
    assert at(c, t + 0.2, (5.0, 0.0), np.full(B, R_MAX)).cmd == pytest.approx([0.25, 0.0, 0.0])


def test_without_a_smoother_the_guard_still_comes_last(guarded: PolicyRuntime) -> None:
    c = gate(guarded, velocity_smoother=False)
    assert c.smoother is None
    ranges = post(0.0, 0.6)
    res = at(c, 0.0, (5.0, 0.0), ranges)
    expected, scale = apply_guard(ranges, np.array([1.5, 0.0, 0.0]), GUARD, R_MAX)
    assert 0.0 < float(scale) < 1.0 and res.cmd == pytest.approx(expected, abs=1e-9)


def fov_scan(fov_deg: float) -> ScanInput:
    """Open space as a lidar of ``fov_deg`` degrees centred on forward publishes it (one reading per
    training beam inside the view, none outside)."""
    n = int(round(fov_deg / 5.0)) + 1
    return ScanInput(np.full(n, 4.0), -math.radians(fov_deg) / 2, math.radians(5.0), 0.05, R_MAX)


@pytest.mark.parametrize("blind", ["fov", "no readings"])
def test_nothing_goes_into_what_the_scan_does_not_see(guarded: PolicyRuntime, blind: str) -> None:
    """The goal straight behind: the policy commands -1.5 m/s. With a 270-degree lidar the back is
    outside its view; with a 360-degree one whose back readings are all invalid (NaN) the scan rule
    fills them for lack of readings. Either way no planar speed is sent (the bundle's section states
    no unseen clearance: the default), smoother or not; sideways and forward motion stay free."""
    if blind == "fov":
        scan = fov_scan(270.0)
    else:
        ranges = np.full(B, 4.0)
        ranges[np.abs(np.arange(B) * 5.0 - 180.0) >= 140.0] = np.nan  # the sectors a 270-degree lidar misses
        scan = ScanInput.training_beams(ranges, B, R_MAX)
    assert GUARD.unseen_clearance == UNSEEN_CLEARANCE
    for params in ({"velocity_smoother": False}, {}):
        c = gate(guarded, **params)
        results = [at(c, 0.1 * k, (-3.0, 0.0), scan) for k in range(10)]
        assert c.driver.last_scan_report.filled.sum() == 17  # 85 degrees centred behind
        assert all(r.guard_scale is not None and r.cmd[0] >= -1e-12 for r in results), [r.cmd for r in results]
    open_back = gate(guarded, velocity_smoother=False)
    assert at(open_back, 0.0, (-3.0, 0.0), fov_scan(360.0)).cmd[0] == pytest.approx(-1.5, abs=1e-5)
    for goal in ((0.0, 3.0), (0.0, -3.0), (3.0, 0.0)):  # sideways and forward: no unseen return in the way
        c = gate(guarded, velocity_smoother=False)
        res = at(c, 0.0, goal, scan)
        assert res.guard_scale == 1.0 and math.hypot(*res.cmd[:2]) == pytest.approx(1.5, abs=1e-5)


@pytest.fixture(scope="module")
def turning(tmp_path_factory) -> PolicyRuntime:
    """The goal-seeking policy that also turns toward the goal (wz = omega_max sin(bearing)), guarded."""
    return PolicyRuntime.load(h.write_goal_seeking_bundle(tmp_path_factory.mktemp("turning"), guard=GUARD, turn=1.0))


@pytest.mark.parametrize("side", ["right", "left"])
def test_the_gate_holds_a_turn_that_would_carry_a_near_post_out_of_a_270_degree_view(
    turning: PolicyRuntime, side: str
) -> None:
    """The goal ahead on the left: the policy drives at 45 degrees and turns counter-clockwise. A post
    2 cm from the shell at the right-rear edge of a 270-degree view would be turned into the blind
    sector: the gate sends no turn (rule step 0b; the section states no keep_sight: on by default) and
    the planar part as the rest of the rule leaves it. The same post at the left-rear edge is turned
    away from the blind sector: the turn goes out whole."""
    from dataclasses import replace

    readings = np.full(55, 4.0)
    readings[0 if side == "right" else -1] = GUARD.radius + GUARD.margin + 0.02  # at -135 or +135 degrees
    scan = ScanInput(readings, -math.radians(135.0), math.radians(5.0), 0.05, R_MAX)
    c = gate(turning, velocity_smoother=False)
    res = at(c, 0.0, (3.0, 3.0), scan)
    assert c.guard is not None and c.guard.keep_sight and res.state == State.DRIVING
    report = c.driver.last_scan_report
    asked = clamp_command(np.array([1.5, 1.5, c.limits.omega_max * math.sin(math.pi / 4)]), c.limits)
    without, _ = apply_guard(report.ranges, asked, replace(c.guard, keep_sight=False), R_MAX, ~report.filled)
    assert without[2] > 1.0  # the step is what holds the turn
    assert res.cmd[:2] == pytest.approx(without[:2], abs=1e-5)
    assert res.cmd[2] == (0.0 if side == "right" else pytest.approx(without[2], abs=1e-5)), res.cmd


def test_a_goal_reached_at_speed_and_coasted_out_of_is_driven_to_again(guarded: PolicyRuntime) -> None:
    """Posts270 episode 567: the odometry put the robot 0.296 m from the goal at 1.3 m/s (tolerance
    0.3 m), the gate latched `goal_reached`, and the robot braked to rest 0.39 m away and stood there,
    saying reached, until the episode ran out. A reached goal stays reached within the tolerance plus
    REACHED_SLACK (odometry's noise at rest); beyond it the gate drives to the goal again and says so."""
    from navdeploy.gate import REACHED_SLACK

    c = gate(guarded, velocity_smoother=False)
    goal = (3.0, 0.0)
    c.set_goal(*goal, "odom")
    scan = ScanInput.training_beams(np.full(B, R_MAX), B, R_MAX)

    def tick_at(t: float, x: float):
        c.set_scan(scan, t)
        c.set_odom((x, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), t, "odom")
        return c.tick(t)

    tol = c.goal_tolerance
    assert tick_at(0.0, 3.0 - tol - 0.2).state == State.DRIVING
    reached = tick_at(0.1, 3.0 - tol + 0.004)
    assert reached.state == State.GOAL_REACHED and not reached.cmd.any()
    held = tick_at(0.2, 3.0 - tol - REACHED_SLACK + 0.005)  # within the slack: still reached
    assert held.state == State.GOAL_REACHED
    out = tick_at(0.3, 3.0 - tol - REACHED_SLACK - 0.04)  # at rest beyond it: driving to the goal again
    assert out.state == State.DRIVING and out.cmd[0] > 0.5 and "driving back to the goal" in out.reason
    assert tick_at(0.4, 3.0 - 0.1).state == State.GOAL_REACHED
