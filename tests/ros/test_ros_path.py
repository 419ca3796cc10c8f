"""Path following in the live policy node (real rclpy, loopback).

One ``policy_node`` process (the console entry point, the installed params file, a hand-made
goal-seeking bundle) runs on wall time for the module. The bundle states the path rule it was
"trained" with (``path_following``); the node takes its lookahead from there (the installed
``path_lookahead: 0``) and its search window from the parameter, and says so at start-up. The
test process publishes scans and odometry of a robot standing still, then a ``nav_msgs/Path`` on
the plan topic, and reads the status topic: the sub-goal the node reports must be the one
``navcontract.subgoal.follow_path`` gives with torch tensors (the training side) for the same path
and pose. An empty path falls back to the goal pose, a new goal pose ends path following, a path
in a foreign frame is refused.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import support.ros as h
from navcontract.subgoal import LookaheadRule, TrainedPathFollowing, follow_path

pytestmark = pytest.mark.ros

LOOKAHEAD, WINDOW = 0.8, 1.5
BUNDLE_WINDOW = 3.0  # the bundle's search window, replaced by the node's path_search_window parameter
POSE = (0.7, 1.9, 0.4)  # x, y, yaw of the robot in odom
STATIC = (1.0, -0.5, math.pi / 2)  # the pose of frame map_fixed in odom


class Rig(h.PolicyNodeRig):
    def __init__(self, tmp: Path) -> None:
        h.require_ros()
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry
        from nav_msgs.msg import Path as PathMsg
        from sensor_msgs.msg import LaserScan

        from nav_policy.ros_common import PATH_QOS

        self.LaserScan, self.Odometry, self.PoseStamped, self.PathMsg = LaserScan, Odometry, PoseStamped, PathMsg
        trained = TrainedPathFollowing(LookaheadRule(LOOKAHEAD, BUNDLE_WINDOW), 0.5)
        bundle = h.write_goal_seeking_bundle(tmp / "bundle", path_following=trained)
        params = {
            "bundle_path": str(bundle),
            "path_search_window": WINDOW,
            "static_goal_frames": "map_fixed {} {} {}".format(*STATIC),
        }
        cmd = [
            str(h.entry_point_script("policy_node")),
            "--ros-args",
            "--params-file",
            str(h.PKG_SRC / "config" / "policy.yaml"),
            *h.ros_args(params)[1:],
        ]
        super().__init__(tmp, cmd, "nav_policy_path_test")
        self.path_pub = self.tn.node.create_publisher(PathMsg, "/plan", PATH_QOS)
        self.tn.spin_until(
            lambda: (
                self.scan_pub.get_subscription_count() > 0
                and self.path_pub.get_subscription_count() > 0
                and self.goal_pub.get_subscription_count() > 0
                and len(self.status) > 0
            ),
            60,
            "the policy node to connect",
            [self.proc],
        )

    def publish_inputs(self) -> None:
        s = self.LaserScan(angle_min=-math.pi, angle_increment=2 * math.pi / 72, range_min=0.05, range_max=6.0)
        s.header.frame_id, s.ranges = "base_link", [3.0] * 72
        self.stamp(s)
        o = self.Odometry()
        o.header.frame_id, o.child_frame_id = "odom", "base_link"
        o.pose.pose.position.x, o.pose.pose.position.y = POSE[0], POSE[1]
        o.pose.pose.orientation.z, o.pose.pose.orientation.w = math.sin(POSE[2] / 2), math.cos(POSE[2] / 2)
        self.stamp(o)
        self.scan_pub.publish(s)
        self.odom_pub.publish(o)

    def goal(self, x: float, y: float) -> None:
        g = self.PoseStamped()
        self.stamp(g)
        g.header.frame_id = "odom"
        g.pose.position.x, g.pose.position.y = x, y
        g.pose.orientation.w = 1.0
        self.goal_pub.publish(g)

    def path(self, points, frame: str = "odom") -> None:
        m = self.PathMsg()
        self.stamp(m)
        m.header.frame_id = frame
        for x, y in points:
            p = self.PoseStamped()
            p.header = m.header
            p.pose.position.x, p.pose.position.y = float(x), float(y)
            p.pose.orientation.w = 1.0
            m.poses.append(p)
        self.path_pub.publish(m)

    def until(self, check, what: str, timeout: float = 15.0) -> dict:
        """Publish inputs at 20 Hz until two status messages in a row pass ``check``; the last one."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            assert self.proc.alive(), f"policy node died:\n{self.proc.output()[-4000:]}"
            assert time.monotonic() < deadline, (
                f"no status with {what}; last: {self.status[-3:]}\n" + (self.proc.output()[-3000:])
            )
            self.publish_inputs()
            n = len(self.status)
            self.tn.spin_for(0.05)
            for st in self.status[n:]:
                seen = seen + 1 if check(st) else 0
                if seen >= 2:
                    return st


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    r = Rig(tmp_path_factory.mktemp("ros_path"))
    yield r
    r.close()


def training_subgoal(points_odom: np.ndarray) -> np.ndarray:
    """The training side's sub-goal (torch) for a robot standing at POSE since the path came: the
    rule stepped from progress 0 until the progress settles (the search window may take a few
    ticks to reach the robot's projection), as the node steps it once per tick."""
    path = torch.tensor(points_odom, dtype=torch.float32)[None]
    count = torch.tensor([len(points_odom)])
    position = torch.tensor([POSE[:2]], dtype=torch.float32)
    rule = LookaheadRule(LOOKAHEAD, WINDOW)
    progress = torch.zeros(1)
    for _ in range(20):
        sub, new, _ = follow_path(path, count, position, progress, rule)
        if torch.equal(new, progress):
            return sub[0].numpy()
        progress = new
    raise AssertionError("the progress did not settle")


def test_startup_line_says_where_the_path_rule_came_from(rig: Rig) -> None:
    log = rig.proc.output()
    assert f"path_lookahead {LOOKAHEAD:g} m (bundle contract; node parameter 0 = the bundle's)" in log
    assert f"path_search_window {WINDOW:g} m (node parameter; the bundle's {BUNDLE_WINDOW:g} m)" in log
    assert f"path_search_window={WINDOW:g} m differs from the {BUNDLE_WINDOW:g} m" in log


def test_reported_subgoal_is_the_training_rules(rig: Rig) -> None:
    rig.goal(5.0, 5.0)
    rig.until(lambda st: st["state"] == "driving" and not st["path_in_use"], "driving to the goal pose")
    points = np.array([(0.0, 1.5), (1.2, 1.6), (1.9, 2.4), (1.9, 2.4), (2.2, 3.9), (3.5, 4.1)])
    expected = training_subgoal(points)
    rig.path(points)
    st = rig.until(lambda st: st["path_in_use"] and st["subgoal"] is not None, "a sub-goal")
    st = rig.until(
        lambda st: st["path_in_use"] and np.allclose(st["subgoal"], expected, atol=1e-5),
        f"the sub-goal {expected.tolist()}",
    )
    assert st["state"] == "driving"
    assert st["distance_to_goal"] == pytest.approx(math.hypot(3.5 - POSE[0], 4.1 - POSE[1]), abs=1e-3)
    assert st["path_remaining"] > 0


def test_path_in_a_static_frame(rig: Rig) -> None:
    local = np.array([(0.0, 0.0), (2.0, 0.5), (3.5, 0.2), (4.0, 1.5)])  # the robot is at (2.4, 0.3) here
    rig.path(local, frame="map_fixed")
    x, y, yaw = STATIC
    c, s = math.cos(yaw), math.sin(yaw)
    odom = np.array([(x + c * px - s * py, y + s * px + c * py) for px, py in local])
    expected = training_subgoal(odom)
    st = rig.until(
        lambda st: st["path_in_use"] and st["subgoal"] is not None and np.allclose(st["subgoal"], expected, atol=1e-5),
        f"the sub-goal {expected.tolist()}",
    )
    assert st["state"] == "driving"


def test_empty_path_falls_back_and_a_goal_pose_ends_path_following(rig: Rig) -> None:
    rig.goal(5.0, 5.0)
    rig.path([(0.0, 1.5), (3.0, 1.5)])
    rig.until(lambda st: st["path_in_use"], "a path in use")
    rig.path([])
    st = rig.until(lambda st: not st["path_in_use"] and st["state"] == "driving", "the goal pose again")
    assert st["subgoal"] is None
    assert st["distance_to_goal"] == pytest.approx(math.hypot(5.0 - POSE[0], 5.0 - POSE[1]), abs=1e-3)
    rig.path([(0.0, 1.5), (3.0, 1.5)])
    rig.until(lambda st: st["path_in_use"], "a path in use")
    rig.goal(-2.0, 0.0)
    st = rig.until(lambda st: not st["path_in_use"], "the new goal pose")
    assert st["distance_to_goal"] == pytest.approx(math.hypot(-2.0 - POSE[0], 0.0 - POSE[1]), abs=1e-3)


def test_path_in_a_foreign_frame_is_refused(rig: Rig) -> None:
    rig.goal(5.0, 5.0)
    rig.until(lambda st: not st["path_in_use"] and st["state"] == "driving", "the goal pose")
    # One at a time: the plan subscription keeps only the latest message (depth 1).
    for points, frame, expected in (
        ([(0.0, 0.0), (1.0, 0.0)], "earth", "path refused: frame 'earth'"),
        ([(0.0, 0.0), (np.nan, 0.0)], "odom", "pose 1 is not finite"),
    ):
        rig.path(points, frame=frame)
        deadline = time.monotonic() + 15.0
        while expected not in rig.proc.output():
            assert time.monotonic() < deadline, rig.proc.output()[-3000:]
            rig.publish_inputs()
            rig.tn.spin_for(0.05)
    log = rig.proc.output()
    assert "path refused: frame 'earth'" in log and "nothing changed" in log
    st = rig.until(lambda st: st["state"] == "driving", "driving")
    assert not st["path_in_use"] and st["distance_to_goal"] == pytest.approx(
        math.hypot(5.0 - POSE[0], 5.0 - POSE[1]), abs=1e-3
    )
