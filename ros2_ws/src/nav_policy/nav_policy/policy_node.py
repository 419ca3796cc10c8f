"""ROS 2 policy node: /scan + /odom + goal (or a path) -> exported policy (deploy runtime) -> /cmd_vel.

A ``nav_msgs/Path`` on the plan topic switches to path following: the policy drives to a sub-goal
``path_lookahead`` metres along the path ahead of the robot (``navcontract.subgoal``, the rule
training uses; by default with the lookahead and search window the bundle's policy was trained
with), and the goal is the path's last point. A new goal pose or an empty path ends it.

``controller:=dwa`` swaps the policy for the dynamic-window baseline (``navdeploy.dwa``), built
from the same bundle's contract (limits, period, radius), behind the same safety controller,
topics and status.

The bundle: the ``bundle_path`` parameter, else ``$NAV_POLICY_BUNDLE``, else the trained default
installed with this package (``nav_policy/default_bundle``); the log names which one was loaded.
The velocity smoother (``navdeploy.smoother``, parameters ``velocity_smoother``,
``max_accel_linear``, ``max_accel_angular``) limits the acceleration of driving commands to what the
bundle's policy was trained with; it never delays a stop. Before it, the collision guard
(``navcontract.guard``, parameter ``guard``) slows the planar command toward returns of the policy's
own scan, as in training, when the bundle carries the guard its policy was trained with.

Publishes on a timer at the control period (default from the bundle's contract), never from a
subscription callback, so a missing or stale sensor can never freeze the last command in place:
every tick publishes either the clamped policy command or an explicit zero. State changes are
logged once; a JSON status string (state, reason, scan fault, coverage and filled sectors of the
scan, distance to goal, last inference time, the path's sub-goal, the guard's scale) goes out each tick on the status
topic, and what the policy saw of the scan (the training beams after resampling and fill, filled
sectors marked with intensity 1) on the policy scan topic. Under ``use_sim_time`` a second timer on wall time keeps
publishing zero (state ``clock_stalled``) when /clock stops advancing (docs/ros2.md, states).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry, Path
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.node import Node
from sensor_msgs.msg import LaserScan
from std_msgs.msg import String

from nav_policy.paths import resolve_bundle
from nav_policy.ros_common import (
    CMD_QOS,
    GOAL_QOS,
    ODOM_SUB_QOS,
    PATH_QOS,
    SENSOR_QOS,
    STATUS_QOS,
    StartupError,
    declare_bool,
    declare_number,
    run_node,
)
from navcontract.scan import DEFAULT_MAX_FILL_GAP, DEFAULT_MIN_COVERAGE, DEFAULT_MIN_VALID_SHARE
from navdeploy.controller import (
    DEFAULT_CLOCK_TIMEOUT,
    FAULT_STATES,
    ClockWatchdog,
    PolicyController,
    State,
    TickResult,
    resolve_settings,
)
from navdeploy.dwa import DwaParams, DwaPlanner
from navdeploy.runtime import PolicyRuntime
from navdeploy.smoother import AccelLimits

CONTROLLERS = ("policy", "dwa")


class PolicyNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("policy_node", **kwargs)
        p = self.declare_parameter
        bundle = p("bundle_path", "").value
        scan_topic = p("scan_topic", "/scan").value
        odom_topic = p("odom_topic", "/odom").value
        goal_topic = p("goal_topic", "/goal_pose").value
        plan_topic = p("plan_topic", "/plan").value
        cmd_topic = p("cmd_vel_topic", "/cmd_vel").value
        status_topic = p("status_topic", "/nav_policy/status").value
        policy_scan_topic = p("policy_scan_topic", "/nav_policy/policy_scan").value
        cmd_arrow_topic = p("cmd_arrow_topic", "/nav_policy/cmd_arrow").value
        control_period = declare_number(self, "control_period", 0.0, 0.0, 10.0)  # 0: the bundle's
        goal_tolerance = declare_number(self, "goal_tolerance", 0.0, 0.0, 100.0)  # 0: the bundle's
        v_max = declare_number(self, "v_max", 0.0, 0.0, 100.0)  # 0: the bundle's; never above it
        omega_max = declare_number(self, "omega_max", 0.0, 0.0, 100.0)
        stale_timeout = declare_number(self, "stale_timeout", 0.5, 0.0, 60.0, lo_open=True)
        clock_timeout = declare_number(self, "clock_timeout", DEFAULT_CLOCK_TIMEOUT, 0.0, 60.0, lo_open=True)
        below_min = p("below_min", "obstacle").value
        fill = p("fill", "nearest").value
        fill_value = declare_number(self, "fill_value", 0.0, 0.0, 1000.0)
        min_valid_share = declare_number(self, "min_valid_share", DEFAULT_MIN_VALID_SHARE, 0.0, 1.0)
        min_coverage = declare_number(self, "min_coverage", DEFAULT_MIN_COVERAGE, 0.0, 1.0)
        max_fill_gap = declare_number(self, "max_fill_gap", DEFAULT_MAX_FILL_GAP, 0.0, 1000.0, integer=True)
        velocity_smoother = declare_bool(self, "velocity_smoother", True)
        max_accel_linear = declare_number(self, "max_accel_linear", 0.0, 0.0, 1e4)  # 0: the bundle's
        max_accel_angular = declare_number(self, "max_accel_angular", 0.0, 0.0, 1e4)
        path_lookahead = declare_number(self, "path_lookahead", 0.0, 0.0, 100.0)  # 0: the bundle's
        path_search_window = declare_number(self, "path_search_window", 0.0, 0.0, 100.0)  # 0: the bundle's
        guard = declare_bool(self, "guard", True)  # the bundle's collision guard (none without the section)
        scan_map = declare_bool(self, "scan_map", True)  # goal without a path: plan on the robot's own scans
        self.odom_frame = p("odom_frame", "odom").value
        self.base_frame = p("base_frame", "base_link").value
        goal_frames_text = p("static_goal_frames", "").value
        controller = p("controller", "policy").value
        dwa_params_file = p("dwa_params_file", "").value

        if controller not in CONTROLLERS:
            raise StartupError(f"parameter 'controller' must be one of {', '.join(CONTROLLERS)}, got '{controller}'")
        bundle_dir, bundle_from = resolve_bundle(str(bundle))
        bundle = str(bundle_dir)
        if not os.path.isdir(bundle):
            raise StartupError(
                f"bundle '{bundle}' ({bundle_from}) is not a directory (expected policy.onnx + contract.json)"
            )
        try:
            self.runtime = PolicyRuntime.load(bundle)
        except Exception as exc:
            raise StartupError(f"cannot load bundle '{bundle}': {type(exc).__name__}: {exc}") from exc
        c = self.runtime.contract
        driver = self.runtime
        if controller == "dwa":
            try:
                params = DwaParams.from_yaml(os.path.expanduser(dwa_params_file) if dwa_params_file else None)
                driver = DwaPlanner(c, params)
            except (OSError, ValueError) as exc:
                raise StartupError(f"cannot build the dwa controller: {exc}") from exc
        try:
            settings, warnings = resolve_settings(
                c,
                control_period=control_period,
                goal_tolerance=goal_tolerance,
                v_max=v_max,
                omega_max=omega_max,
                stale_timeout=stale_timeout,
                odom_frame=self.odom_frame,
                static_goal_frames=goal_frames_text,
                below_min=below_min,
                fill=fill,
                fill_value=fill_value,
                min_valid_share=min_valid_share,
                min_coverage=min_coverage,
                max_fill_gap=int(max_fill_gap),
                clock_timeout=clock_timeout,
                velocity_smoother=velocity_smoother,
                max_accel_linear=max_accel_linear,
                max_accel_angular=max_accel_angular,
                path_lookahead=path_lookahead,
                path_search_window=path_search_window,
                guard=guard,
                scan_map=scan_map,
            )
        except ValueError as exc:
            raise StartupError(str(exc)) from exc
        for text in warnings:
            self.get_logger().warn(text)
        self.get_logger().info("limits: " + "; ".join(settings.limit_sources))
        response = getattr(c, "response", None)
        self.get_logger().info(
            "robot response the policy was trained for: "
            + (response.describe() if response is not None else "not stated (bundle format 1)")
        )
        self.control_period = settings.control_period
        tol, limits = settings.goal_tolerance, settings.limits
        # The one safety controller (navdeploy.controller), shared with the bag replay's reference.
        self.ctrl = PolicyController.from_settings(driver, settings)
        self.state: State | None = None
        self._odom_problem: str | None = None
        self._scan_problem: str | None = None
        self._scan_frame_seen: str | None = None
        self._callback_error: str | None = None
        self._odom_child_seen: str | None = None

        self.cmd_pub = self.create_publisher(Twist, cmd_topic, CMD_QOS)
        self.status_pub = self.create_publisher(String, status_topic, STATUS_QOS)
        self.policy_scan_pub = self.create_publisher(LaserScan, policy_scan_topic, STATUS_QOS)
        # The command for RViz (a Pose display): an arrow in the base frame along the planar velocity.
        self.cmd_arrow_pub = self.create_publisher(PoseStamped, cmd_arrow_topic, STATUS_QOS)
        self.max_range = float(c.max_range)
        subs = [
            self.create_subscription(LaserScan, scan_topic, self._guard(self.on_scan, "scan"), SENSOR_QOS),
            self.create_subscription(Odometry, odom_topic, self._guard(self.on_odom, "odom"), ODOM_SUB_QOS),
            self.create_subscription(PoseStamped, goal_topic, self._guard(self.on_goal, "goal"), GOAL_QOS),
            self.create_subscription(Path, plan_topic, self._guard(self.on_path, "path"), PATH_QOS),
        ]
        self.timer = self.create_timer(self.control_period, self.on_tick)
        # /clock can stop (sim paused, bag ended, sim died): a timer on ROS time then stops with it.
        self.use_sim_time = bool(self.get_parameter("use_sim_time").value)
        self.watchdog = ClockWatchdog(settings.clock_timeout)
        self.wall_timer = None
        if self.use_sim_time:
            steady = Clock(clock_type=ClockType.STEADY_TIME)
            self.wall_timer = self.create_timer(self.control_period, self.on_wall_tick, clock=steady)
        so = settings.scan_options
        self.get_logger().info(
            f"controller {controller}; bundle {bundle} ({bundle_from}; fingerprint {getattr(c, 'fingerprint', '?')}); "
            f"period {self.control_period} s, "
            f"goal tolerance {tol} m, limits v {limits.v_max} m/s w {limits.omega_max} rad/s, "
            f"stale timeout {settings.stale_timeout} s"
            + (f", clock watchdog {settings.clock_timeout} s wall" if self.use_sim_time else "")
            + f"; velocity smoother {_accel_text(settings.accel_limits)}"
            + f"; scan rules below_min {so.below_min}, fill {so.fill}"
            + (f" {so.fill_value} m" if so.fill == "constant" else "")
            + f", min_valid_share {so.min_valid_share}, min_coverage {so.min_coverage} of the trained "
            f"{math.degrees(getattr(c, 'trained_fov', 2 * math.pi)):.0f} deg, max_fill_gap {so.max_fill_gap}; "
            f"path following {settings.path_source}; {settings.guard_source}; {settings.scan_map_source}; "
            f"{' + '.join(x.topic_name for x in subs)} -> {self.cmd_pub.topic_name}, {self.policy_scan_pub.topic_name}"
        )

    # ------------------------------------------------------------------ inputs
    def _guard(self, fn, what: str):
        """A callback that never takes the node down: on an exception the input counts as unusable."""

        def cb(msg) -> None:
            try:
                fn(msg)
            except Exception as exc:
                text = f"{what} message could not be handled: {type(exc).__name__}: {exc}"
                self.ctrl.input_failed(what, text)
                if text != self._callback_error:
                    self._callback_error = text
                    self.get_logger().error(text + " (publishing zero)")

        return cb

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def on_scan(self, msg: LaserScan) -> None:
        problem = self.ctrl.scan_message(msg, self._now())
        if problem is not None:
            self._report_scan_problem(problem)
            return
        self._scan_problem = None
        if self._scan_frame_seen != msg.header.frame_id:
            self._scan_frame_seen = msg.header.frame_id
            self.get_logger().info(
                f"scan frame '{msg.header.frame_id}', {len(msg.ranges)} beams, "
                f"angle_min {msg.angle_min:.4f} increment {msg.angle_increment:.5f}"
            )
            if msg.header.frame_id and msg.header.frame_id != self.base_frame:
                self.get_logger().warn(
                    f"scan frame '{msg.header.frame_id}' is not '{self.base_frame}': the policy was trained "
                    f"with the lidar at the centre of {self.base_frame}, facing forward"
                )

    def _report_scan_problem(self, text: str) -> None:
        if text != self._scan_problem:
            self._scan_problem = text
            self.get_logger().warn(text)

    def on_odom(self, msg: Odometry) -> None:
        problem = self.ctrl.odom_message(msg, self._now())
        child = msg.child_frame_id
        if child and child != self.base_frame and child != self._odom_child_seen:
            self._odom_child_seen = child
            self.get_logger().warn(
                f"odometry child frame '{child}' is not '{self.base_frame}': its twist is taken as {self.base_frame}'s"
            )
        if problem != self._odom_problem:
            self._odom_problem = problem
            if problem:
                self.get_logger().warn(f"odometry unusable: {problem}")

    def on_goal(self, msg: PoseStamped) -> None:
        ok, text = self.ctrl.goal_message(msg)
        if ok:
            self.get_logger().info(text)
        else:
            self.get_logger().error(text)

    def on_path(self, msg: Path) -> None:
        """A planner republishes its path often: a new path is logged at debug level, a refused one,
        the start and the end of path following at info (warn when refused)."""
        had = self.ctrl.path is not None
        ok, text = self.ctrl.path_message(msg)
        if not ok:
            self.get_logger().warn(text)
        elif had and self.ctrl.path is not None:
            self.get_logger().debug(text)
        else:
            self.get_logger().info(text)

    # ------------------------------------------------------------------ control
    def on_tick(self) -> None:
        now = self._now()
        self.watchdog.check(now, time.monotonic())  # the clock advanced (or has not started)
        self._emit(self.ctrl.tick(now), now)  # never raises; zero unless driving

    def on_wall_tick(self) -> None:
        """Wall-time watchdog (use_sim_time): zero, status and one log line while /clock is stalled."""
        now = self._now()
        res = self.watchdog.check(now, time.monotonic())
        if res is not None:
            self.ctrl.stopped(now)  # a zero went out: the smoother starts again from rest
            self._emit(res, now)

    def _emit(self, res: TickResult, now: float) -> None:
        cmd, state, reason = res.cmd, res.state, res.reason
        self._publish(cmd)
        self._publish_cmd_arrow(cmd)
        if state != self.state:
            self.state = state
            log = self.get_logger()
            if state == State.ERROR:
                log.error(f"state -> {state.value}: {reason}")
            elif state in FAULT_STATES:
                log.warn(f"state -> {state.value}: {reason} (publishing zero)")
            else:
                log.info(f"state -> {state.value}: {reason}")
        status = {
            "state": state.value,
            "reason": reason,
            "distance_to_goal": None if res.distance is None else round(res.distance, 4),
            "inference_ms": None if res.inference_ms is None else round(res.inference_ms, 4),
            "last_inference_ms": None if self.ctrl.last_inference_ms is None else round(self.ctrl.last_inference_ms, 4),
            "cmd": [round(float(v), 5) for v in cmd],
            "scan_age_s": None if self.ctrl.scan is None else round(now - self.ctrl.scan.stamp, 4),
            "scan_fault": res.scan_fault,
            "coverage_deg": None,
            "filled_sectors": None,
            "valid_share": None,
            "path_in_use": res.path_in_use,
            "subgoal": None if res.subgoal is None else [round(float(v), 6) for v in res.subgoal],
            "path_remaining": None if res.path_remaining is None else round(res.path_remaining, 4),
            "guard_scale": None if res.guard_scale is None else round(res.guard_scale, 4),
        }
        if res.scan_report is not None:
            status.update(res.scan_report.to_status())
            self._publish_policy_scan(res)
        self.status_pub.publish(String(data=json.dumps(status)))

    def _publish_policy_scan(self, res: TickResult) -> None:
        """The 72 beams the policy saw (after resampling and fill) as a LaserScan in the base frame;
        intensity 1 marks a filled sector (no valid reading there), 0 a measured one."""
        rep = res.scan_report
        b = int(rep.ranges.shape[0])
        msg = LaserScan()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.base_frame
        msg.angle_min = -math.pi
        msg.angle_increment = 2.0 * math.pi / b
        msg.angle_max = msg.angle_min + (b - 1) * msg.angle_increment
        msg.scan_time = float(self.control_period)
        msg.range_min = 0.0
        msg.range_max = self.max_range
        msg.ranges = [float(v) for v in rep.ranges]
        msg.intensities = [1.0 if f else 0.0 for f in rep.filled]
        self.policy_scan_pub.publish(msg)

    def _publish(self, cmd: np.ndarray) -> None:
        msg = Twist()
        msg.linear.x, msg.linear.y, msg.angular.z = (float(v) for v in cmd)
        self.cmd_pub.publish(msg)

    def _publish_cmd_arrow(self, cmd: np.ndarray) -> None:
        arrow = PoseStamped()
        arrow.header.stamp = self.get_clock().now().to_msg()
        arrow.header.frame_id = self.base_frame
        heading = math.atan2(float(cmd[1]), float(cmd[0])) if math.hypot(cmd[0], cmd[1]) > 0 else 0.0
        arrow.pose.orientation.z, arrow.pose.orientation.w = math.sin(heading / 2), math.cos(heading / 2)
        self.cmd_arrow_pub.publish(arrow)

    def close(self) -> None:
        """Last word on shutdown: stop the robot (and give reliable subscribers time to get it)."""
        self._publish(np.zeros(3))
        self.cmd_pub.wait_for_all_acked(Duration(seconds=0.5))


def _accel_text(limits: AccelLimits) -> str:
    if not limits.active:
        return "off"
    lin = "unlimited" if limits.linear is None else f"{limits.linear:g} m/s^2"
    ang = "unlimited" if limits.angular is None else f"{limits.angular:g} rad/s^2"
    return f"linear {lin} per axis, angular {ang}"


def main(args=None) -> int:
    return run_node(PolicyNode)


if __name__ == "__main__":
    sys.exit(main())
