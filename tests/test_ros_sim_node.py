"""The sim node process on its own (real rclpy, loopback): what it publishes, its pace, episodes."""

from __future__ import annotations

import json
import math
import time

import ros_helpers as h


def test_sim_node_publishes_training_scan_odom_clock_goal_and_reports_timeouts(tmp_path) -> None:
    h.require_ros()
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import String

    from nav_policy.ros_common import EVENT_QOS, GOAL_LATCHED_QOS, SENSOR_QOS

    rtf = 4.0
    cmd = [
        str(h.entry_point_script("sim_node")),
        "--ros-args",
        "--params-file",
        str(h.PKG_SRC / "config" / "sim.yaml"),
        "-p",
        "seed:=3",
        "-p",
        "num_episodes:=2",
        "-p",
        "episode_length_s:=2.0",
        "-p",
        f"real_time_factor:={rtf}",
        "-p",
        "wait_for_policy_timeout:=0.0",
    ]
    lease = h.DomainLease()
    try:
        with h.processes() as procs:
            tn = h.TestNode(lease.domain_id)
            try:
                n = tn.node
                scans, odoms, clocks, goals, episodes = [], [], [], [], []
                n.create_subscription(LaserScan, "/scan", scans.append, SENSOR_QOS)
                n.create_subscription(Odometry, "/odom", odoms.append, 10)
                n.create_subscription(Clock, "/clock", lambda m: clocks.append((time.monotonic(), h_sec(m.clock))), 10)
                n.create_subscription(PoseStamped, "/goal_pose", goals.append, GOAL_LATCHED_QOS)
                n.create_subscription(String, "/sim/episode", lambda m: episodes.append(json.loads(m.data)), EVENT_QOS)
                procs.append(h.Proc(cmd, h.ros_env(lease.domain_id), tmp_path / "sim.log"))
                # no liveness check while waiting: the sim exits by itself after its two episodes
                tn.spin_until(lambda: len(episodes) >= 2, 60, "two timed-out episodes")
                assert procs[0].popen.wait(20) == 0, procs[0].output()[-3000:]
            finally:
                tn.close()
            log = procs[0].output()
    finally:
        lease.release()

    assert [e["outcome"] for e in episodes] == ["timeout", "timeout"], episodes
    assert [e["seed"] for e in episodes] == [3, 4] and all(e["steps"] == 20 for e in episodes)
    assert "episode 0 (seed 3): timeout" in log
    s = scans[-1]
    assert len(s.ranges) == 72 and s.header.frame_id == "base_link"
    assert math.isclose(s.angle_min, -math.pi, abs_tol=1e-6)
    assert math.isclose(s.angle_increment, 2 * math.pi / 72, rel_tol=1e-6)
    assert all(0.0 <= r <= s.range_max == 6.0 for r in s.ranges)
    o = odoms[-1]
    assert o.header.frame_id == "odom" and o.child_frame_id == "base_link"
    assert h_sec(o.header.stamp) == h_sec(s.header.stamp)
    assert [g.header.frame_id for g in goals[:1]] == ["odom"] and len(goals) >= 1
    # the goal published for episode 0 is the one the episode was judged against
    assert abs(goals[0].pose.position.x - episodes[0]["goal"][0]) < 1e-3
    # /clock advances by the control period per step, at about real_time_factor x wall time
    sims = [c for _, c in clocks]
    steps = {round(b - a, 6) for a, b in zip(sims, sims[1:], strict=False)}
    assert steps == {0.1}, steps
    (w0, c0), (w1, c1) = clocks[2], clocks[-2]
    ratio = (c1 - c0) / (w1 - w0)
    assert 0.6 * rtf < ratio < 1.3 * rtf, ratio


def h_sec(stamp) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec


def test_sim_node_takes_goals_from_the_topic_when_not_publishing_its_own() -> None:
    """publish_goal: false, in-process: a goal in the odom frame becomes the episode's goal, one in
    another frame is ignored, and reaching it ends the episode as 'reached'."""
    h.require_ros()
    import numpy as np
    import rclpy
    from geometry_msgs.msg import PoseStamped, Twist
    from rclpy.parameter import Parameter

    from nav_policy.sim_node import SimNode

    lease = h.DomainLease()
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=lease.domain_id)
    try:
        node = SimNode(
            context=ctx,
            parameter_overrides=[
                Parameter("publish_goal", value=False),
                Parameter("seed", value=5),
                Parameter("num_episodes", value=1),
                Parameter("noise_std", value=0.0),
            ],
        )
        try:
            assert node.goal_pub is None and node._goal() is None
            node.advance()
            assert node.world.steps == 1 and not node.results  # no goal yet: nothing to judge
            start = node.room.start
            msg = PoseStamped()
            msg.header.frame_id = "map"
            msg.pose.position.x, msg.pose.position.y = float(start[0]), float(start[1])
            node.on_goal(msg)
            assert node._goal() is None
            msg.header.frame_id = "odom"
            msg.pose.position.x = float(start[0] + 0.5)
            node.on_goal(msg)
            assert np.allclose(node._goal(), [start[0] + 0.5, start[1]])
            # drive straight at it in the body frame until the episode ends
            for _ in range(30):
                if node.done:
                    break
                x, y, yaw = node.world.pose()
                dx, dy = node._goal()[0] - x, node._goal()[1] - y
                c, s = np.cos(yaw), np.sin(yaw)
                t = Twist()
                t.linear.x, t.linear.y = c * dx + s * dy, -s * dx + c * dy  # reaches it in ~1 s
                node.on_cmd(t)
                node.advance()
            assert node.done and node.results[0]["outcome"] == "reached", node.results
            assert node.results[0]["goal"] == [round(float(start[0] + 0.5), 4), round(float(start[1]), 4)]
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
        lease.release()
