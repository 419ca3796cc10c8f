"""The velocity smoother in the live policy node (real rclpy, loopback).

The node runs on simulated time and the test drives its clock in lockstep: scan and odometry, then
one /clock step of the control period, then wait for that tick's status (state and command), so
every tick sees exactly one period. With a bundle whose contract says the policy was trained with
a 2.5 m/s^2 acceleration limit, a step to 1.5 m/s ramps up by 0.25 m/s per tick; an unusable scan
stops the robot on that very tick; with ``velocity_smoother:=false`` the command goes out at once.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

import support.ros as h
from navcontract.response import RobotResponse  # noqa: E402

A_LIN = 2.5  # [m/s^2] the low end of the trained linear range below
TRAINED = RobotResponse(
    randomized=True,
    physics_substep=0.02,
    terms=("accel_limit", "actuator_lag", "command_latency", "control_jitter", "lidar_noise", "observation_latency"),
    accel_linear=(A_LIN, 6.0),
    accel_angular=(3.2, 8.0),
    actuator_tau=(0.02, 0.12),
    command_latency=(0, 2),
    observation_latency=(0, 2),
    control_jitter=(0, 1),
)
"""The response section of a policy trained with every base term (as tests/runtime/test_velocity_smoother.py)."""

pytestmark = pytest.mark.ros

PERIOD = 0.1


class LockstepRig(h.PolicyNodeRig):
    def __init__(self, tmp: Path, bundle: Path, **params) -> None:
        h.require_ros()
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import LaserScan

        self.Clock, self.LaserScan, self.Odometry, self.PoseStamped = Clock, LaserScan, Odometry, PoseStamped
        args = {"bundle_path": str(bundle), "use_sim_time": True, "stale_timeout": 1.0, **params}
        cmd = [str(h.entry_point_script("policy_node")), *h.ros_args(args)]
        super().__init__(tmp, cmd, "smoother_test", clock=True, status_depth=100)
        self.t = 0.0
        pubs = (self.clock_pub, self.scan_pub, self.odom_pub, self.goal_pub)
        self.tn.spin_until(
            lambda: all(p.get_subscription_count() > 0 for p in pubs) and self.status_sub.get_publisher_count() > 0,
            30,
            "the policy node's subscriptions",
            [self.proc],
        )

    def _stamp(self, msg) -> None:
        msg.header.stamp.sec = int(self.t)
        msg.header.stamp.nanosec = int(round((self.t - int(self.t)) * 1e9))

    def goal(self, x: float) -> None:
        g = self.PoseStamped()
        g.header.frame_id = "odom"
        g.pose.position.x = x
        g.pose.orientation.w = 1.0
        self.goal_pub.publish(g)

    def tick(self, scan_value: float = 3.0) -> dict:
        """Inputs stamped at the next tick's time, then /clock to it; that tick's status."""
        self.t = round(self.t + PERIOD, 9)
        s = self.LaserScan(angle_min=-math.pi, angle_increment=2 * math.pi / 72, range_min=0.05, range_max=6.0)
        s.header.frame_id, s.ranges = "base_link", [scan_value] * 72
        self._stamp(s)
        o = self.Odometry()
        o.header.frame_id, o.child_frame_id = "odom", "base_link"
        o.pose.pose.orientation.w = 1.0
        self._stamp(o)
        self.scan_pub.publish(s)
        self.odom_pub.publish(o)
        self.tn.spin_for(0.02)  # let the inputs arrive before the clock moves
        c = self.Clock()
        c.clock.sec, c.clock.nanosec = int(self.t), int(round((self.t - int(self.t)) * 1e9))
        n = len(self.status)
        self.clock_pub.publish(c)
        self.tn.spin_until(lambda: len(self.status) > n, 10, f"the tick at {self.t:.1f} s", [self.proc])
        return self.status[n]

    def start(self) -> None:
        """Start the node's clock. The first /clock switches its ROS time on, and rcl restarts the
        timer from there, so that message fires no tick: step the clock until one does."""
        for _ in range(20):
            self.t = round(self.t + PERIOD, 9)
            c = self.Clock()
            c.clock.sec, c.clock.nanosec = int(self.t), int(round((self.t - int(self.t)) * 1e9))
            self.clock_pub.publish(c)
            deadline = time.monotonic() + 1.0
            while not self.status and time.monotonic() < deadline:
                self.tn.spin_for(0.02)
            if self.status:
                return
        raise AssertionError(f"the node never ticked on /clock:\n{self.proc.output()[-3000:]}")

    def until_driving(self, limit: int = 50) -> dict:
        for _ in range(limit):
            st = self.tick()
            if st["state"] == "driving":
                return st
        raise AssertionError(f"never driving: {self.status[-3:]}\n{self.proc.output()[-3000:]}")


@pytest.fixture(scope="module")
def trained_bundle(tmp_path_factory) -> Path:
    return h.write_goal_seeking_bundle(tmp_path_factory.mktemp("bundle") / "trained", response=TRAINED)


def test_live_node_ramps_to_the_trained_limit_and_stops_at_once(tmp_path: Path, trained_bundle: Path) -> None:
    rig = LockstepRig(tmp_path, trained_bundle)
    try:
        rig.start()  # no goal yet
        rig.goal(5.0)
        first = rig.until_driving()
        vx = [first["cmd"][0]] + [rig.tick()["cmd"][0] for _ in range(6)]
        step = A_LIN * PERIOD
        assert vx == pytest.approx([step * k for k in (1, 2, 3, 4, 5, 6)] + [1.5], abs=1e-4), vx
        stop = rig.tick(scan_value=math.nan)  # every reading NaN: bad_scan on this very tick
        assert stop["state"] == "bad_scan" and stop["cmd"] == [0.0, 0.0, 0.0]
        again = rig.tick()
        assert again["state"] == "driving" and again["cmd"][0] == pytest.approx(step, abs=1e-4)  # from rest
        log = rig.proc.output()
        assert "velocity smoother linear 2.5 m/s^2 per axis, angular 3.2 rad/s^2" in log
        assert "latency budget 0.1 s" in log
    finally:
        rig.close()


def test_live_node_with_the_smoother_off_sends_the_policy_command_at_once(tmp_path: Path, trained_bundle: Path) -> None:
    rig = LockstepRig(tmp_path, trained_bundle, velocity_smoother=False)
    try:
        rig.start()
        rig.goal(5.0)
        first = rig.until_driving()
        assert first["cmd"][0] == pytest.approx(1.5, abs=1e-4)
        assert "velocity smoother off" in rig.proc.output()
    finally:
        rig.close()
