"""A diff-drive bundle in the live policy node (real rclpy, loopback): every command on /cmd_vel has
``linear.y`` exactly 0.0 (driving backward and forward, turning, slowed by the guard, smoothed,
stopped), ``linear.x`` within [-v_backward, v_max]; the node runs with ``robot_base`` declaring the
same base as a file, and names it."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest
import yaml

import support.ros as h
from navcontract.guard import GuardRule
from support.bases import V_BACKWARD, diff_drive_base, write_diff_drive_bundle

pytestmark = pytest.mark.ros

GUARD = GuardRule(radius=0.2, margin=0.05, headway=0.5, decel=2.5, slide=True)


def commands_once_connected(rig: h.PolicyNodeRig) -> list[tuple[float, float, float]]:
    """The (linear.x, linear.y, angular.z) of every /cmd_vel the node sends, filled as the rig spins;
    returns once the node subscribes to every input."""
    from geometry_msgs.msg import Twist

    cmds: list[tuple[float, float, float]] = []
    rig.tn.node.create_subscription(
        Twist, "/cmd_vel", lambda m: cmds.append((m.linear.x, m.linear.y, m.angular.z)), 200
    )
    pubs = (rig.scan_pub, rig.odom_pub, rig.goal_pub)
    rig.tn.spin_until(lambda: all(p.get_subscription_count() > 0 for p in pubs), 30, "subscriptions", [rig.proc])
    return cmds


def publish_inputs(rig: h.PolicyNodeRig, ranges: list[float], range_max: float) -> None:
    """One scan of ``ranges`` over the full circle (from -pi) and odometry at the origin, stamped now."""
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import LaserScan

    s = LaserScan(angle_min=-math.pi, angle_increment=2 * math.pi / len(ranges), range_min=0.05, range_max=range_max)
    s.header.frame_id, s.ranges = "base_link", ranges
    o = Odometry()
    o.header.frame_id, o.child_frame_id = "odom", "base_link"
    o.pose.pose.orientation.w = 1.0
    rig.stamp(s)
    rig.stamp(o)
    rig.scan_pub.publish(s)
    rig.odom_pub.publish(o)


def publish_goal(rig: h.PolicyNodeRig, x: float, y: float) -> None:
    from geometry_msgs.msg import PoseStamped

    g = PoseStamped()
    g.header.frame_id, g.pose.position.x, g.pose.position.y = "odom", x, y
    g.pose.orientation.w = 1.0
    rig.goal_pub.publish(g)


def test_a_diff_drive_bundle_never_publishes_a_lateral_command(tmp_path: Path) -> None:
    h.require_ros()
    bundle = write_diff_drive_bundle(tmp_path / "bundle", guard=GUARD)
    declared = tmp_path / "rover.yaml"
    declared.write_text(yaml.safe_dump({k: v for k, v in diff_drive_base().to_dict().items() if k != "name"}))
    params = {
        "bundle_path": str(bundle),
        "robot_base": str(declared),
        "scan_map": False,
        "max_accel_linear": 2.5,
        "max_accel_angular": 3.2,
    }
    cmd = [str(h.entry_point_script("policy_node")), *h.ros_args(params)]
    rig = h.PolicyNodeRig(tmp_path, cmd, "diff_drive_test", status_depth=200)
    try:
        cmds = commands_once_connected(rig)

        def inputs(behind: float) -> None:
            """Scan (a wall ``behind`` metres behind the robot, open ahead) and odometry at the origin."""
            publish_inputs(rig, [behind if abs(-math.pi + i * 2 * math.pi / 72) > 2.6 else 5.0 for i in range(72)], 6.0)

        def goal(x: float, y: float) -> None:
            publish_goal(rig, x, y)

        for gx, gy, behind in ((-2.0, 1.5, 5.0), (-2.0, 1.5, 0.4), (2.0, -1.0, 5.0), (0.05, 0.0, 5.0)):
            goal(gx, gy)
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                inputs(behind)
                rig.tn.spin_for(0.05)
        states = {st["state"] for st in rig.status}
        scales = [st["guard_scale"] for st in rig.status if st["guard_scale"] is not None]
    finally:
        rig.close()
    log = rig.proc.output()
    assert len(cmds) > 25, log[-3000:]
    assert all(c[1] == 0.0 for c in cmds)  # exactly, in every state
    assert all(-V_BACKWARD - 1e-9 <= c[0] <= 1.5 + 1e-9 for c in cmds)
    assert min(c[0] for c in cmds) < -0.2 and max(c[0] for c in cmds) > 0.2  # backward and forward
    assert max(c[2] for c in cmds) > 0.5 and min(c[2] for c in cmds) < -0.5  # turning both ways
    assert {"driving", "goal_reached"} <= states and min(scales) < 1.0  # the guard slowed it
    assert "base test_diff_drive (diff_drive, radius 0.2 m" in log and "matches node parameter robot_base" in log


def test_robot_base_jackal_alone_runs_the_installed_jackal_bundle_without_lateral_commands(tmp_path: Path) -> None:
    """``robot_base:=jackal`` and no bundle: the node loads the Jackal bundle installed with the
    package, says so, checks its base, and drives it (scan map on, as shipped) with ``linear.y``
    exactly 0 in every command."""
    h.require_ros()
    from nav_policy.paths import BUNDLE_ENV, installed_bundles

    assert not os.environ.get(BUNDLE_ENV), f"${BUNDLE_ENV} is set: the node would load it"
    cmd = [str(h.entry_point_script("policy_node")), *h.ros_args({"robot_base": "jackal"})]
    rig = h.PolicyNodeRig(tmp_path, cmd, "jackal_test", status_depth=200)
    try:
        cmds = commands_once_connected(rig)
        for gx, gy in ((3.0, 2.0), (-2.0, -1.0)):
            publish_goal(rig, gx, gy)
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                publish_inputs(rig, [4.0 + math.sin(3 * i * 2 * math.pi / 720) for i in range(720)], 12.0)
                rig.tn.spin_for(0.05)
        states = {st["state"] for st in rig.status}
    finally:
        rig.close()
    log = rig.proc.output()
    assert f"{installed_bundles()['jackal']} (the installed bundle of base jackal" in log, log[-3000:]
    assert "base jackal (diff_drive, radius 0.333 m" in log and "matches node parameter robot_base jackal" in log
    assert "driving" in states and len(cmds) > 20, log[-3000:]
    assert all(c[1] == 0.0 for c in cmds)  # exactly, in every state
    assert max(abs(c[0]) for c in cmds) > 0.05 and max(abs(c[2]) for c in cmds) > 0.05  # it drove
