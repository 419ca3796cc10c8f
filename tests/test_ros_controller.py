"""The policy node's decision logic without ROS: gating, goals, clamping, with the real runtime."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ros_helpers as h
from navdeploy.controller import (
    Limits,
    PolicyController,
    State,
    clamp_command,
    parse_goal_frames,
    yaw_from_quaternion,
)
from navdeploy.runtime import PolicyRuntime, ScanInput, ScanUnusable


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> PolicyRuntime:
    return PolicyRuntime.load(h.write_goal_seeking_bundle(tmp_path_factory.mktemp("bundle")))


def make(runtime: PolicyRuntime, **kw) -> PolicyController:
    args = dict(
        runtime=runtime,
        limits=Limits(1.5, 2.0, True),
        goal_tolerance=0.3,
        stale_timeout=0.5,
        scan_errors=(ScanUnusable,),
    )
    args.update(kw)
    return PolicyController(**args)


def good_scan(n: int = 72) -> ScanInput:
    return ScanInput.training_beams(np.full(n, 3.0), n, 6.0)


def feed(c: PolicyController, t: float, scan: ScanInput | None = None, yaw: float = 0.0) -> None:
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
