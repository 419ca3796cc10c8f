"""The policy node process fails safe (issue 11): parameters that would disable a rule are refused at
startup in one line with a non-zero exit, and a stalled /clock under use_sim_time still gets a zero
command, a status and one log line at the control rate, said as an end (``clock_ended``, info) once
/clock has no publisher left; stamps an hour or more from the node's clock are ``clock_mismatch``
with a hint about use_sim_time; both nodes stopped while they still import exit 0 without a
traceback (real rclpy on loopback)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

import support.ros as h

pytestmark = [pytest.mark.ros, pytest.mark.slow]


REFUSED = {  # -p NAME:=VALUE -> what the one startup line that refuses it says
    "stale_timeout:=.nan": "parameter 'stale_timeout' must be finite",
    "stale_timeout:=.inf": "parameter 'stale_timeout' must be finite",
    "clock_timeout:=-1.0": "parameter 'clock_timeout'",
    "v_max:=.inf": "parameter 'v_max'",
    "min_coverage:=2.0": "parameter 'min_coverage'",
    "max_fill_gap:=1.5": "parameter 'max_fill_gap' must be a whole number",
    "lidar_yaw:=9.0": "parameter 'lidar_yaw' must be finite",
    "lidar_upside_down:=1": "parameter 'lidar_upside_down' must be true or false",
    "self_radius:=0.5": "parameter 'self_radius' 0.5 m is beyond the robot's radius",
    "below_min:=ignore": "below_min must be one of",
    "controller:=mpc": "parameter 'controller' must be one of",
    "executor:=multi_threaded": "parameter 'executor' must be one of",
    "max_accel_linear:=-1.0": "parameter 'max_accel_linear' must be finite",
    "max_accel_angular:=.nan": "parameter 'max_accel_angular' must be finite",
    "velocity_smoother:=1": "parameter 'velocity_smoother' must be true or false",
    "scan_topic:=5": "parameter 'scan_topic' to '5' of type 'INTEGER', expecting type 'STRING'",
    "enable_stamped_cmd_vel:=2": "parameter 'enable_stamped_cmd_vel' must be true or false",
    "robot_base:=jackal": "parameter 'robot_base': jackal is diff_drive, the bundle's policy drives a holonomic base",
    "robot_base:=rover": "parameter 'robot_base': no base named 'rover'",
}


@pytest.mark.parametrize("param, needle", REFUSED.items())
def test_unusable_parameters_are_refused_in_one_line(tmp_path: Path, param: str, needle: str) -> None:
    h.require_ros()
    bundle = h.ros_args({"bundle_path": str(h.fixture_bundle())})
    code, out = h.run_node([str(h.entry_point_script("policy_node")), *bundle, "-p", param], tmp_path / "policy.log")
    assert code != 0, out[-2000:]
    lines = [ln for ln in out.splitlines() if needle in ln]
    assert len(lines) == 1 and lines[0].startswith("[nav_policy] startup failed:"), out[-2000:]
    assert "Traceback" not in out


def test_a_declared_base_of_another_footprint_is_refused_and_the_bundles_base_is_named(tmp_path: Path) -> None:
    """``robot_base``: a base file of the bundle's drive but another radius stops the node in one line;
    the bundle's own base starts it, and its startup log names the base it runs."""
    h.require_ros()
    import yaml

    from navcontract.base import load_base

    wide = {k: v for k, v in load_base("holonomic_disc").to_dict().items() if k != "name"} | {"radius": 0.3}
    (tmp_path / "wide.yaml").write_text(yaml.safe_dump(wide))
    cmd = [str(h.entry_point_script("policy_node")), *h.ros_args({"bundle_path": str(h.fixture_bundle())})]
    code, out = h.run_node([*cmd, "-p", f"robot_base:={tmp_path / 'wide.yaml'}"], tmp_path / "wide.log")
    lines = [ln for ln in out.splitlines() if "parameter 'robot_base': wide has radius 0.3 m" in ln]
    assert code != 0 and len(lines) == 1 and lines[0].startswith("[nav_policy] startup failed:"), out[-2000:]
    with h.leased_node([*cmd, "-p", "robot_base:=holonomic_disc"], tmp_path / "disc.log") as proc:
        deadline = time.monotonic() + 30.0
        while "limits:" not in proc.output() and proc.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        out = proc.output()
    assert "base holonomic_disc (holonomic, radius 0.2 m" in out, out[-2000:]
    assert "matches node parameter robot_base holonomic_disc" in out


def test_stalled_clock_gives_zero_status_and_one_log_line_at_the_control_rate(tmp_path: Path) -> None:
    h.require_ros()
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan

    from nav_policy.ros_common import GOAL_LATCHED_QOS

    bundle = h.write_goal_seeking_bundle(tmp_path / "bundle")
    params = {"bundle_path": str(bundle), "use_sim_time": True, "clock_timeout": 0.5}
    with h.policy_node_with_peer(tmp_path, params, "clock_test") as live:
        proc, procs, tn = live.proc, live.procs, live.peer
        n = tn.node
        clock_pub, scan_pub, odom_pub, goal_pub = h.input_publishers(n, GOAL_LATCHED_QOS, clock=True)
        cmds: list[tuple[float, float]] = []  # (wall time, vx)
        status: list[dict] = []
        n.create_subscription(Twist, "/cmd_vel", lambda m: cmds.append((time.monotonic(), m.linear.x)), 100)
        h.status_subscription(n, status, 100)
        sim = {"t": 1.0, "clock_sent": 0.0}  # sim time; wall time of the last /clock sent

        def stamp(msg) -> None:
            msg.header.stamp.sec = int(sim["t"])
            msg.header.stamp.nanosec = int(round((sim["t"] % 1.0) * 1e9))

        def publish(advance: bool) -> None:
            if advance:
                sim["t"] += 0.05
                c = Clock()
                c.clock.sec, c.clock.nanosec = int(sim["t"]), int(round((sim["t"] % 1.0) * 1e9))
                clock_pub.publish(c)
                sim["clock_sent"] = time.monotonic()
            s = LaserScan(angle_min=-math.pi, angle_increment=2 * math.pi / 72, range_min=0.05, range_max=6.0)
            s.header.frame_id, s.ranges = "base_link", [3.0] * 72
            stamp(s)
            o = Odometry()
            o.header.frame_id, o.child_frame_id = "odom", "base_link"
            o.pose.pose.orientation.w = 1.0
            stamp(o)
            scan_pub.publish(s)
            odom_pub.publish(o)

        tn.spin_until(lambda: scan_pub.get_subscription_count() > 0, 30, "the policy node", procs)
        # The node's goal subscription is volatile: a goal sent before it matched is never seen.
        tn.spin_until(lambda: goal_pub.get_subscription_count() > 0, 30, "the goal subscriber", procs)
        g = PoseStamped()
        g.header.frame_id = "odom"
        g.pose.position.x = 3.0
        goal_pub.publish(g)

        def running(state: str, advance: bool, timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while not (status and status[-1]["state"] == state):
                assert time.monotonic() < deadline, f"no {state}: {status[-3:]}\n{proc.output()[-3000:]}"
                publish(advance)
                tn.spin_for(0.05)

        running("driving", True, 20)
        assert cmds[-1][1] > 1.0
        running("clock_stalled", False, 5)  # /clock stops; the sensors keep talking
        # The node sees the last advance no earlier than it was sent: no stall before clock_timeout.
        assert time.monotonic() - sim["clock_sent"] >= 0.5
        t0, n0 = time.monotonic(), len(cmds)
        tn.spin_for(1.0)
        stalled = [c for c in cmds[n0:] if c[0] >= t0]
        assert len(stalled) >= 6, f"zero at the control rate (10 Hz), got {len(stalled)} in 1 s"
        assert all(vx == 0.0 for _, vx in stalled)
        assert status[-1]["state"] == "clock_stalled" and "clock_timeout" in status[-1]["reason"]
        assert proc.output().count("state -> clock_stalled") == 1
        running("driving", True, 10)  # the clock comes back: so does the policy
        assert proc.alive()
        # The clock's publisher goes away (the sim or the bag ended): zero, said as an end, not a fault.
        n.destroy_publisher(clock_pub)
        running("clock_ended", False, 10)
        assert "no publisher left" in status[-1]["reason"]
        n0 = len(cmds) - 1
        tn.spin_for(0.5)
        assert len(cmds) - n0 >= 3 and all(vx == 0.0 for _, vx in cmds[n0:])  # zeros at the control rate
        ended = [ln for ln in proc.output().splitlines() if "state -> clock_ended" in ln]
        assert len(ended) == 1 and ended[0].startswith("[INFO]"), ended


@pytest.mark.parametrize(
    "use_sim_time, hint",
    [
        (False, "the node runs on wall time and the stamps are simulated time: set use_sim_time true"),
        (True, "the node runs on simulated time (use_sim_time true, /clock) and the stamps are wall time"),
    ],
)
def test_simulated_and_wall_time_mixed_is_named(tmp_path: Path, use_sim_time: bool, hint: str) -> None:
    """Scan and odometry stamped in simulated time (12 s) for a node on wall time, or in wall time for a
    node on /clock (12 s): zero, state clock_mismatch, the hint, one warning; never stale_scan."""
    h.require_ros()
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import LaserScan

    params = {"bundle_path": str(h.fixture_bundle()), "use_sim_time": use_sim_time}
    with h.policy_node_with_peer(tmp_path, params, "clock_mismatch_test") as live:
        proc, procs, tn = live.proc, live.procs, live.peer
        n = tn.node
        clock_pub, scan_pub, odom_pub, _ = h.input_publishers(n, clock=True)
        status: list[dict] = []
        h.status_subscription(n, status, 100)
        tn.spin_until(lambda: scan_pub.get_subscription_count() > 0, 30, "the policy node", procs)
        sim_t = [12.0]

        def publish() -> None:
            stamp = n.get_clock().now().to_msg()  # wall time
            if use_sim_time:
                sim_t[0] += 0.05
                c = Clock()
                c.clock.sec, c.clock.nanosec = int(sim_t[0]), int(round((sim_t[0] % 1.0) * 1e9))
                clock_pub.publish(c)
            else:
                stamp.sec, stamp.nanosec = 12, 0
            s = LaserScan(angle_min=-math.pi, angle_increment=2 * math.pi / 72, range_min=0.05, range_max=6.0)
            s.header.frame_id, s.ranges, s.header.stamp = "base_link", [3.0] * 72, stamp
            o = Odometry()
            o.header.frame_id, o.child_frame_id, o.header.stamp = "odom", "base_link", stamp
            o.pose.pose.orientation.w = 1.0
            scan_pub.publish(s)
            odom_pub.publish(o)

        deadline = time.monotonic() + 20
        while not (status and status[-1]["state"] == "clock_mismatch"):
            assert time.monotonic() < deadline, f"{status[-3:]}\n{proc.output()[-3000:]}"
            publish()
            tn.spin_for(0.05)
    reason = status[-1]["reason"]
    assert status[-1]["cmd"] == [0.0, 0.0, 0.0] and hint in reason and "scan stamped" in reason, reason
    assert "stale_scan" not in {s["state"] for s in status}
    warned = [ln for ln in proc.output().splitlines() if "state -> clock_mismatch" in ln]
    assert len(warned) == 1 and warned[0].startswith("[WARN]"), proc.output()[-2000:]


def _imports_started(proc: h.NodeProc, library: str, timeout: float = 60) -> None:
    """Wait until ``proc`` has loaded ``library`` (a shared object: its imports are under way)."""
    deadline = time.monotonic() + timeout
    while library not in Path(f"/proc/{proc.pid}/maps").read_text():
        assert proc.alive() and time.monotonic() < deadline, proc.output()[-2000:]
        time.sleep(0.005)


@pytest.mark.parametrize(
    "node, package, late",
    [("policy_node", "nav_policy", "onnxruntime"), ("sim_node", "nav_policy_sim", "torch")],
)
def test_a_node_stopped_while_importing_exits_quietly(tmp_path: Path, node: str, package: str, late: str) -> None:
    """SIGINT (what the launch sends when it ends, and Ctrl-C) while the node still imports: exit code 0,
    no traceback, nothing printed. The signal comes once numpy is loaded, before ``late`` is."""
    params = {"bundle_path": str(h.fixture_bundle())} if node == "policy_node" else {}
    cmd = [str(h.entry_point_script(node, package)), *h.ros_args(params)]
    with h.leased_node(cmd, tmp_path / f"{node}.log") as proc:
        _imports_started(proc, "_multiarray_umath")
        assert late not in Path(f"/proc/{proc.pid}/maps").read_text()
        proc.popen.send_signal(2)
        code = proc.popen.wait(60)
        out = proc.output()
    assert code == 0 and "Traceback" not in out and "KeyboardInterrupt" not in out, (code, out[-3000:])
