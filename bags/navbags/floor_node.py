"""The latency benchmark's floor: a node with the policy node's topics, timer and executor, and no work.

``nav-benchmark-latency --floor`` drives this node exactly as it drives ``policy_node``: it subscribes
to the scan, the odometry, the goal and the path with the policy node's QoS profiles, runs its control
timer on ROS time (``use_sim_time``) at the same period, spins on the same executor, and on each tick
publishes a fixed forward command, then a status string whose ``state`` is ``driving``. What its
latency measures is what every node pays on this machine and this middleware: two DDS hops, the
executor's wake-ups, the timer on ``/clock``. The policy node's latency over this floor is its own
work (inputs, tick, publish).

    python -m navbags.floor_node --ros-args -p use_sim_time:=true -p executor:=events
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry, Path
from rclpy.node import Node
from sensor_msgs.msg import LaserScan
from std_msgs.msg import String

from nav_policy.ros_common import (
    CMD_QOS,
    GOAL_QOS,
    ODOM_SUB_QOS,
    PATH_QOS,
    SENSOR_QOS,
    STATUS_QOS,
    run_node,
)
from navdeploy.node_params import EXECUTORS

FLOOR_SPEED = 0.5
"""[m/s] The forward command of every tick: the benchmark's odometry then moves along its corridor."""


class FloorNode(Node):
    """The policy node's inputs, timer and outputs with nothing computed in between."""

    def __init__(self) -> None:
        super().__init__("latency_floor")
        self.executor_kind = str(self.declare_parameter("executor", "events").value)
        if self.executor_kind not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got '{self.executor_kind}'")
        period = float(self.declare_parameter("control_period", 0.1).value)
        self.last: dict[str, Any] = {}
        self.cmd_pub = self.create_publisher(Twist, "/cmd_vel", CMD_QOS)
        self.status_pub = self.create_publisher(String, "/nav_policy/status", STATUS_QOS)
        self.subs = [
            self.create_subscription(LaserScan, "/scan", lambda m: self._keep("scan", m), SENSOR_QOS),
            self.create_subscription(Odometry, "/odom", lambda m: self._keep("odom", m), ODOM_SUB_QOS),
            self.create_subscription(PoseStamped, "/goal_pose", lambda m: self._keep("goal", m), GOAL_QOS),
            self.create_subscription(Path, "/plan", lambda m: self._keep("path", m), PATH_QOS),
        ]
        self.timer = self.create_timer(period, self.on_tick)

    def _keep(self, name: str, msg: Any) -> None:
        self.last[name] = msg

    def on_tick(self) -> None:
        """Publish the fixed command, then a ``driving`` status with the tick's own time."""
        started = time.perf_counter()
        cmd = Twist()
        cmd.linear.x = FLOOR_SPEED
        self.cmd_pub.publish(cmd)
        tick_ms = (time.perf_counter() - started) * 1e3
        status = {"state": "driving", "reason": "latency floor", "inference_ms": None, "tick_ms": round(tick_ms, 4)}
        self.status_pub.publish(String(data=json.dumps(status)))


def main() -> int:
    return run_node(FloorNode)


if __name__ == "__main__":
    sys.exit(main())
