"""The command as ``geometry_msgs/Twist`` or ``TwistStamped`` (node parameter ``enable_stamped_cmd_vel``,
Nav2's name): stamped with the node's ROS time of the tick, ``frame_id`` the ``base_frame``, on
either executor; the sim node reads the type its own parameter names (real rclpy on loopback)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import support.ros as h

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def _types_of(tn: h.RosSide, node: str, topic: str, publishers: bool, procs) -> list[str]:
    get = (
        tn.node.get_publisher_names_and_types_by_node if publishers else tn.node.get_subscriber_names_and_types_by_node
    )
    found: dict[str, list[str]] = {}

    def seen() -> bool:
        try:
            found.update(dict(get(node, "/")))
        except Exception:  # the node is not in the graph yet
            return False
        return topic in found

    tn.spin_until(seen, 30, f"{node}'s {topic}", procs)
    return found[topic]


@pytest.mark.parametrize("stamped, executor", [(True, "events"), (False, "single_threaded")])
def test_policy_node_publishes_twist_or_twist_stamped(tmp_path: Path, stamped: bool, executor: str) -> None:
    """Either command type, on either executor (parameter ``executor``; the log names it)."""
    h.require_ros()
    from geometry_msgs.msg import Twist, TwistStamped

    from nav_policy.ros_common import GOAL_QOS

    bundle = h.write_goal_seeking_bundle(tmp_path / "bundle")
    params = {
        "bundle_path": str(bundle),
        "use_sim_time": True,
        "enable_stamped_cmd_vel": stamped,
        "base_frame": "robot_base",
        "scan_map": False,
        "executor": executor,
    }
    with h.policy_node_with_peer(tmp_path, params, "cmd_vel_test") as live:
        proc, procs, tn = live.proc, live.procs, live.peer
        n = tn.node
        want = "geometry_msgs/msg/TwistStamped" if stamped else "geometry_msgs/msg/Twist"
        assert _types_of(tn, "policy_node", "/cmd_vel", True, procs) == [want]
        got: list = []
        n.create_subscription(TwistStamped if stamped else Twist, "/cmd_vel", got.append, 100)
        clock_pub, scan_pub, odom_pub, goal_pub = h.input_publishers(n, GOAL_QOS, clock=True)
        tn.spin_until(
            lambda: goal_pub.get_subscription_count() > 0 and scan_pub.get_subscription_count() > 0,
            30,
            "the policy node's subscriptions",
            procs,
        )
        h.goal_ahead(goal_pub)
        t = [1.0]

        def step() -> bool:
            t[0] += 0.1
            h.sim_tick(
                (clock_pub, scan_pub, odom_pub), t[0], [3.0] * 72, scan_frame="robot_base", base_frame="robot_base"
            )
            tn.spin_for(0.1)
            last = got[-1] if got else None
            twist = last.twist if stamped and last is not None else last
            return twist is not None and twist.linear.x > 0.1

        tn.spin_until(step, 30, "a forward command", procs)
        log = proc.output()
    assert f"controller policy; executor {executor}; bundle" in log
    if stamped:
        last = got[-1]
        stamp = last.header.stamp.sec + 1e-9 * last.header.stamp.nanosec
        assert last.header.frame_id == "robot_base" and math.isclose(stamp, round(t[0], 1), abs_tol=0.15), last
        assert 0.9 < stamp <= t[0] + 1e-6  # the simulated time of a tick, not wall time
        assert "-> /cmd_vel (TwistStamped, frame robot_base)" in log
    else:
        assert "-> /cmd_vel (Twist)" in log


def test_sim_node_reads_the_command_type_its_parameter_names(tmp_path: Path) -> None:
    h.require_ros()
    lease = h.DomainLease()
    try:
        with h.node_processes() as procs:
            for stamped in (True, False):
                params = {"enable_stamped_cmd_vel": stamped, "wait_for_policy_timeout": 0.0, "real_time_factor": 1.0}
                cmd = [str(h.entry_point_script("sim_node", "nav_policy_sim")), *h.ros_args(params)]
                procs.append(h.NodeProc(cmd, lease.domain_id, tmp_path / f"sim_{stamped}.log"))
                tn = h.RosSide(lease.domain_id, "cmd_vel_sim_test")
                try:
                    want = "geometry_msgs/msg/TwistStamped" if stamped else "geometry_msgs/msg/Twist"
                    assert _types_of(tn, "sim_node", "/cmd_vel", False, procs[-1:]) == [want]
                finally:
                    tn.close()
                assert procs[-1].stop() == 0, procs[-1].output()[-2000:]
    finally:
        lease.release()
