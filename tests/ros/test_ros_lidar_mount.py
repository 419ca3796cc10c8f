"""The node's lidar_* parameters (scan rule 0): a lidar turned by 90 degrees and upside down, its scans
in its own frame, gives the policy the beams of the body frame; the startup log states the mount and
no frame warning is given (real rclpy on loopback)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import support.ros as h

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_a_turned_upside_down_lidar_is_read_in_the_body_frame(tmp_path: Path) -> None:
    h.require_ros()
    from sensor_msgs.msg import LaserScan

    from nav_policy.ros_common import GOAL_QOS

    n = 720
    angles = -math.pi + np.arange(n) * 2 * math.pi / n
    # The lidar's angle a points at body angle pi/2 - a: a wall 0.6 m to the body's left lies at a = 0.
    lidar = np.where(np.abs(np.remainder(angles + math.pi, 2 * math.pi) - math.pi) < 0.3, 0.6, 5.0)
    params = {
        "bundle_path": str(h.write_goal_seeking_bundle(tmp_path / "bundle")),
        "use_sim_time": True,
        "scan_map": False,
        "lidar_yaw": math.pi / 2,
        "lidar_upside_down": True,
    }
    with h.policy_node_with_peer(tmp_path, params, "lidar_mount_test") as live:
        procs, tn = live.procs, live.peer
        n_ = tn.node
        policy_scans: list = []
        n_.create_subscription(LaserScan, "/nav_policy/policy_scan", policy_scans.append, 20)
        clock_pub, scan_pub, odom_pub, goal_pub = h.input_publishers(n_, GOAL_QOS, clock=True)
        tn.spin_until(lambda: goal_pub.get_subscription_count() > 0, 30, "the policy node's goal subscription", procs)
        h.goal_ahead(goal_pub)
        t = [1.0]

        def step() -> bool:
            t[0] += 0.1
            h.sim_tick((clock_pub, scan_pub, odom_pub), t[0], lidar, scan_frame="laser", range_max=10.0)
            tn.spin_for(0.1)
            return len(policy_scans) >= 2

        tn.spin_until(step, 30, "the policy's scan", procs)
        log = live.proc.output()
    beams = np.array(policy_scans[-1].ranges)
    left, right, behind = 54, 18, 0  # +90, -90 and 180 degrees
    assert beams[left] < 0.7 and beams[right] > 4.5 and beams[behind] > 4.5, beams
    assert "lidar at x 0 m, y 0 m, yaw 90.0 deg, upside down on the body (node parameters lidar_*)" in log
    assert "is not 'base_link'" not in log
