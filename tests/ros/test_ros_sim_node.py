"""The sim node (package nav_policy_sim) on its own (real rclpy, loopback): what it publishes, its
pace, its episodes."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

import support.ros as h
from navsim.outcomes import Outcome

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@contextlib.contextmanager
def sim_node_in_process(**params: Any) -> Iterator[Any]:
    """A SimNode in this process with ``params`` as its parameter overrides, on a context of its own
    in a leased domain; destroyed, its context shut down and the domain released on leaving."""
    import rclpy
    from rclpy.parameter import Parameter

    from nav_policy_sim.sim_node import SimNode

    lease = h.DomainLease()
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=lease.domain_id)
    try:
        node = SimNode(context=ctx, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        try:
            yield node
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
        lease.release()


def test_sim_node_publishes_training_scan_odom_clock_goal_and_reports_timeouts(tmp_path) -> None:
    h.require_ros()
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import String

    from nav_policy.ros_common import CMD_QOS, EVENT_QOS, GOAL_LATCHED_QOS, GOAL_QOS, SENSOR_QOS

    rtf = 4.0
    cmd = [
        str(h.entry_point_script("sim_node", "nav_policy_sim")),
        "--ros-args",
        "--params-file",
        str(h.SIM_PKG_SRC / "config" / "sim.yaml"),
        "-p",
        "seed:=3",
        "-p",
        "num_episodes:=2",
        "-p",
        "episode_length_s:=2.0",
        "-p",
        f"real_time_factor:={rtf}",
        "-p",
        "wait_for_policy_timeout:=30.0",
    ]
    lease = h.DomainLease()
    try:
        with h.node_processes() as procs:
            tn = h.RosSide(lease.domain_id, "nav_policy_test")
            try:
                n = tn.node
                scans, odoms, clocks, goals, episodes = [], [], [], [], []
                n.create_subscription(LaserScan, "/scan", scans.append, SENSOR_QOS)
                n.create_subscription(Odometry, "/odom", odoms.append, 10)
                n.create_subscription(Clock, "/clock", lambda m: clocks.append((time.monotonic(), h_sec(m.clock))), 10)
                n.create_subscription(PoseStamped, "/goal_pose", goals.append, GOAL_LATCHED_QOS)
                # The test stands in for the policy node: a scan and a (volatile, as the policy node's)
                # goal subscriber and a /cmd_vel publisher that stays silent (the base stops).
                policy_goals = []
                n.create_subscription(PoseStamped, "/goal_pose", policy_goals.append, GOAL_QOS)
                n.create_publisher(Twist, "/cmd_vel", CMD_QOS)
                n.create_subscription(String, "/sim/episode", lambda m: episodes.append(json.loads(m.data)), EVENT_QOS)
                procs.append(h.NodeProc(cmd, lease.domain_id, tmp_path / "sim.log"))
                # no liveness check while waiting: the sim exits by itself after its two episodes
                tn.spin_until(lambda: len(episodes) >= 2, 60, "two timed-out episodes")
                assert procs[0].popen.wait(20) == 0, procs[0].output()[-3000:]
            finally:
                tn.close()
            log = procs[0].output()
    finally:
        lease.release()

    assert [e["outcome"] for e in episodes] == [Outcome.TIMEOUT, Outcome.TIMEOUT], episodes
    assert [e["seed"] for e in episodes] == [3, 4] and all(e["steps"] == 20 for e in episodes)
    assert "episode 0 (seed 3): timeout" in log and "policy node connected" in log
    s = scans[-1]
    assert len(s.ranges) == 72 and s.header.frame_id == "base_link"
    assert math.isclose(s.angle_min, -math.pi, abs_tol=1e-6)
    assert math.isclose(s.angle_increment, 2 * math.pi / 72, rel_tol=1e-6)
    assert all(0.0 <= r <= s.range_max == 6.0 for r in s.ranges)
    o = odoms[-1]
    assert o.header.frame_id == "odom" and o.child_frame_id == "base_link"
    assert h_sec(o.header.stamp) == h_sec(s.header.stamp)
    # one goal per episode, in the odom frame, the one the episode was judged against; the first
    # goes out once the (volatile) goal subscriber of the policy node has matched, so it gets it too
    for received in (goals, policy_goals):
        assert [g.header.frame_id for g in received] == ["odom", "odom"]
        for g, e in zip(received, episodes, strict=True):
            assert math.dist((g.pose.position.x, g.pose.position.y), e["goal"]) < 1e-3, (g, e)
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
    another frame is ignored, and reaching it ends the episode as a success."""
    h.require_ros()
    import numpy as np
    from geometry_msgs.msg import PoseStamped, Twist

    with sim_node_in_process(publish_goal=False, seed=5, num_episodes=1, noise_std=0.0) as node:
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
        assert node.done and node.results[0]["outcome"] == Outcome.SUCCESS, node.results
        assert node.results[0]["goal"] == [round(float(start[0] + 0.5), 4), round(float(start[1]), 4)]


def test_lockstep_without_a_policy_node_steps_at_once_and_says_why(tmp_path) -> None:
    """Lockstep used to sleep 2 s silently on every tick with no policy node (300 ticks: 10 min)."""
    h.require_ros()
    cmd = [
        str(h.entry_point_script("sim_node", "nav_policy_sim")),
        *h.ros_args(
            {
                "seed": 3,
                "num_episodes": 2,
                "episode_length_s": 1.5,  # 15 ticks each
                "lockstep": True,
                "lockstep_timeout": 2.0,
                "wait_for_policy_timeout": 0.0,
            }
        ),
    ]
    t0 = time.monotonic()
    code, out = h.run_node(cmd, tmp_path / "sim.log", timeout=120)
    wall = time.monotonic() - t0
    assert code == 0, out[-3000:]
    assert wall < 30, f"30 ticks took {wall:.1f} s: the sim waited per tick"
    assert "lockstep: no /cmd_vel publisher (is the policy node running?)" in out, out[-3000:]
    assert "all 2 episodes done" in out


@pytest.mark.parametrize(
    "param", ["real_time_factor:=.nan", "lockstep_timeout:=.inf", "num_episodes:=-1", "seed:=abc", "lockstep:=2"]
)
def test_sim_node_refuses_unusable_numbers(tmp_path, param: str) -> None:
    h.require_ros()
    cmd = [str(h.entry_point_script("sim_node", "nav_policy_sim")), "--ros-args", "-p", param]
    code, out = h.run_node(cmd, tmp_path / "sim.log")
    name = param.split(":=")[0]
    assert code == 2 and f"parameter '{name}'" in out and "Traceback" not in out, out[-2000:]
    lines = [ln for ln in out.splitlines() if "startup failed" in ln]
    assert len(lines) == 1 and lines[0].startswith("[nav_policy] startup failed:"), out[-2000:]


def test_sim_node_simulates_the_base_it_is_given_and_drops_a_diff_drives_sideways_command() -> None:
    """robot_base: a preset sets the simulated base; a diff drive applies a command's linear.y as 0
    (warned once); a bundle folder gives the base its contract states."""
    h.require_ros()
    import numpy as np
    from geometry_msgs.msg import Twist

    from nav_policy_sim.sim_node import robot_base_overrides
    from navcontract.base import load_base
    from navsim.config_load import load_config
    from navsim.contract_objects import base_spec
    from support.paths import FIXTURE_BUNDLE

    assert robot_base_overrides("") == []
    assert base_spec(load_config(overrides=robot_base_overrides(str(FIXTURE_BUNDLE)))) == load_base("holonomic_disc")
    with sim_node_in_process(robot_base="jackal", seed=5, noise_std=0.0) as node:
        assert node.base == load_base("jackal") and node.world.drive == "diff_drive"
        assert node.world.env_cfg.robot.radius == load_base("jackal").radius
        t = Twist()
        t.linear.x, t.linear.y, t.angular.z = 1.0, 0.7, 0.5
        node.on_cmd(t)
        assert np.array_equal(node.cmd, [1.0, 0.0, 0.5]) and "lateral_cmd" in node._warned
        for _ in range(5):
            node.advance()
        assert abs(node.world.body_twist()[1]) < 0.1 and node.world.body_twist()[0] > 0.5


def test_lockstep_publishes_an_unanswered_tick_again_with_the_same_messages() -> None:
    """A best-effort scan or a clock sent before the policy node matched the sim's publishers is lost
    for good; in lockstep the sim then publishes the same tick again every LOCKSTEP_RESEND seconds
    (same stamps, same readings) until its lockstep_timeout."""
    h.require_ros()
    import threading

    from geometry_msgs.msg import Twist
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan

    from nav_policy.ros_common import SENSOR_QOS
    from nav_policy_sim.sim_node import LOCKSTEP_RESEND

    with sim_node_in_process(lockstep=True, lockstep_timeout=2.5, seed=4, num_episodes=1) as node:
        peer = Node("silent_policy", context=node.context)
        clocks: list[int] = []
        scans: list[list[float]] = []
        peer.create_subscription(Clock, "/clock", lambda m: clocks.append(m.clock.sec * 10**9 + m.clock.nanosec), 10)
        peer.create_subscription(LaserScan, "/scan", lambda m: scans.append(list(m.ranges)), SENSOR_QOS)
        peer.create_publisher(Twist, "/cmd_vel", 10)  # a policy node that never answers
        executor = SingleThreadedExecutor(context=node.context)
        executor.add_node(node)
        executor.add_node(peer)
        try:
            deadline = time.monotonic() + 10
            while node.cmd_sub.get_publisher_count() == 0 or node.scan_pub.get_subscription_count() == 0:
                assert time.monotonic() < deadline, "the peer never matched"
                executor.spin_once(timeout_sec=0.05)
            node.publish_state()
            t0 = time.monotonic()
            node._lockstep_wait(executor, threading.Event())
            waited = time.monotonic() - t0
            for _ in range(20):
                executor.spin_once(timeout_sec=0.02)
        finally:
            executor.shutdown()
            peer.destroy_node()
    resends = int(2.5 // LOCKSTEP_RESEND)
    assert 2.4 <= waited < 4.0 and node.lockstep_misses == 1 and node.lockstep_resends == resends
    assert len(clocks) == 1 + resends and len(set(clocks)) == 1
    assert len(scans) == 1 + resends and all(s == scans[0] for s in scans)
