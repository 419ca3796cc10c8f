"""The command gate (navdeploy.gate) without ROS: gating, goals, clamping, with the real runtime."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import support.ros as h
from navdeploy.gate import CommandGate, clamp_command
from navdeploy.inputs import parse_goal_frames, yaw_from_quaternion
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime, ScanInput, ScanUnusable
from navdeploy.settings import Limits, resolve_settings
from navdeploy.states import State


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> PolicyRuntime:
    return PolicyRuntime.load(h.write_goal_seeking_bundle(tmp_path_factory.mktemp("bundle")))


def make(runtime: PolicyRuntime, **kw) -> CommandGate:
    args = dict(
        driver=runtime,
        limits=Limits(1.5, 2.0, True),
        goal_tolerance=0.3,
        stale_timeout=0.5,
        scan_errors=(ScanUnusable,),
    )
    args.update(kw)
    return CommandGate(**args)


def good_scan(n: int = 72) -> ScanInput:
    return ScanInput.training_beams(np.full(n, 3.0), n, 6.0)


def feed(c: CommandGate, t: float, scan: ScanInput | None = None, yaw: float = 0.0) -> None:
    c.set_scan(scan or good_scan(), t)
    c.set_odom((0.0, 0.0), (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)), (0.0, 0.0, 0.0), t, "odom")


def test_drives_toward_goal_in_body_frame(runtime: PolicyRuntime) -> None:
    c = make(runtime)
    feed(c, 10.0, yaw=math.pi / 2)  # facing +y
    ok, _ = c.set_goal(3.0, 0.0, "odom")  # goal to the robot's right
    assert ok
    r = c.tick(10.05)
    assert r.state == State.DRIVING and r.inference_ms is not None
    assert r.cmd[0] == pytest.approx(0.0, abs=1e-5) and r.cmd[1] == pytest.approx(-1.5, abs=1e-5)
    assert r.distance == pytest.approx(3.0)


def test_zero_without_goal_inputs_or_after_reaching(runtime: PolicyRuntime) -> None:
    c = make(runtime)
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
    c = make(runtime)
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
    c = make(runtime)
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
    c = make(runtime, goal_frames=parse_goal_frames("map 1.0 2.0 1.5707963267948966"))
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

    c = make(Broken())
    feed(c, 1.0)
    c.set_goal(3.0, 0.0, "odom")
    r = c.tick(1.0)
    assert r.state == State.ERROR and not r.cmd.any()
    c2 = make(runtime, limits=lim)
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
    c = make(runtime, goal_frames=parse_goal_frames("map 1.0 0.0 0.0"))
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
    c = make(runtime)
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
    assert s.control_period == ct.control_period and s.goal_tolerance == ct.goal_tolerance and not warnings
    assert s.limits == Limits(ct.v_max, ct.omega_max, ct.scaling.limit_planar_speed)
    s, warnings = resolve_settings(
        ct, NodeParams(v_max=ct.v_max / 2, omega_max=ct.omega_max * 2, static_goal_frames="map 1 2 0")
    )
    assert s.limits.v_max == ct.v_max / 2 and s.limits.omega_max == ct.omega_max  # capped to the bundle's
    assert len(warnings) == 1 and "omega_max" in warnings[0] and set(s.goal_frames) == {"map"}
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

    c = make(ResetFails())
    feed(c, 1.0)
    c.set_goal(3.0, 0.0, "odom")
    r = c.tick(1.0)
    assert r.state == State.ERROR and "boom" in r.reason and not r.cmd.any()
