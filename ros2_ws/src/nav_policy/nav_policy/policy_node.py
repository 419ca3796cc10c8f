"""ROS 2 policy node: /scan + /odom + goal (or a path) -> exported policy (deploy runtime) -> /cmd_vel.

A ``nav_msgs/Path`` on the plan topic switches to path following: the policy drives to a sub-goal
``path_lookahead`` metres along the path ahead of the robot (``navcontract.subgoal``, the rule
training uses; by default with the lookahead and search window the bundle's policy was trained
with), and the goal is the path's last point. A new goal pose or an empty path ends it.

``controller:=dwa`` swaps the policy for the dynamic-window baseline (``navdeploy.dwa``), built
from the same bundle's contract (limits, period, radius), behind the same command gate
(``navdeploy.gate``), topics and status.

Parameters: the table of ``navdeploy.node_params`` (names, types, defaults, ranges, docs), declared
in one loop (``nav_policy.ros_common.declare_node_params``) and read into its typed ``NodeParams``;
``config/policy.yaml`` and the table in docs/ros2.md are renderings of it.

The bundle: the ``bundle_path`` parameter, else ``$NAV_POLICY_BUNDLE``, else the bundle installed
with this package for the base preset ``robot_base`` names (``nav_policy/<preset>_bundle``), else
the trained default (``nav_policy/default_bundle``); the log names which one was loaded.
The velocity smoother (``navdeploy.smoother``, parameters ``velocity_smoother``,
``max_accel_linear``, ``max_accel_angular``) limits the acceleration of driving commands to what the
bundle's policy was trained with; it never delays a stop. After it, as the last stage, the collision
guard (``navcontract.guard``, parameter ``guard``) slows the planar command toward returns of the
policy's own scan and toward what the scan did not see, as in training, when the bundle carries the
guard its policy was trained with. The scan map plans with the clearance that guard needs; a path the
guard keeps refusing is re-planned (status reason ``replanning: ...``), and a robot that makes no
progress is ``stuck``, backs off (``recovering``) and re-plans, a few times at most
(``navdeploy.progress``; parameters ``blocked_time``, ``progress_time``, ...).

Inputs: scan and odometry are read best effort (either kind of publisher matches). Each tick first
hands every input that has reached the node to its callback, so a tick never acts on an older scan
or odometry than the newest one delivered.

Publishes on a timer at the control period (default from the bundle's contract), never from a
subscription callback, so a missing or stale sensor can never freeze the last command in place:
every tick publishes either the clamped policy command or an explicit zero. State changes are
logged once; a JSON status string (state, reason, scan fault, coverage and filled sectors of the
scan, distance to goal, last inference time, the path's sub-goal, the guard's scale) goes out each tick on the status
topic, and what the policy saw of the scan (the training beams after resampling and fill, filled
sectors marked with intensity 1) on the policy scan topic. Under ``use_sim_time`` a second timer on wall time keeps
publishing zero when /clock stops advancing: state ``clock_stalled``, or ``clock_ended`` once /clock
has no publisher left (the simulation or bag ended; logged as info). Stamps more than an hour from the
node's clock are ``clock_mismatch`` (simulated and wall time mixed; docs/ros2.md, states).

The node spins on rclpy's events executor (parameter ``executor``; ``single_threaded`` for the
standard one).

``enable_stamped_cmd_vel`` (Nav2's name) publishes the command as ``geometry_msgs/TwistStamped``
(stamp: the node's ROS time, frame: ``base_frame``) instead of ``Twist``.

A node stopped while it still imports (the launch ending, Ctrl-C) exits with code 0, without a traceback.
"""

from __future__ import annotations

import nav_policy.quiet_start  # noqa: F401 - first of all: SIGINT while importing exits quietly

# isort: split
import json
import math
import os
import sys
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist, TwistStamped
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
    declare_node_params,
    run_node,
)
from navdeploy.gate import CommandGate
from navdeploy.inputs import ClockWatchdog
from navdeploy.node_params import PARAM, NodeParams
from navdeploy.priority import raise_priority
from navdeploy.runtime import PolicyRuntime
from navdeploy.settings import GateSettings, resolve_settings
from navdeploy.smoother import AccelLimits
from navdeploy.states import FAULT_STATES, State, TickResult


class PolicyNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("policy_node", **kwargs)
        params = declare_node_params(self)
        self.odom_frame, self.base_frame = params.odom_frame, params.base_frame
        self.stamped_cmd = params.enable_stamped_cmd_vel
        check_choice("controller", params.controller)
        check_choice("executor", params.executor)
        self.executor_kind = params.executor  # run_node spins the node on it
        self.runtime, bundle, bundle_from = self._load_bundle(params.bundle_path, params.robot_base)
        driver = self._driver(params)
        settings = self._resolve(params, f"bundle {bundle} ({bundle_from})", driver)
        self.control_period = settings.control_period
        # The one command gate (navdeploy.gate), shared with the bag replay's reference.
        self.gate = CommandGate.from_settings(driver, settings)
        scheduling = raise_priority(params.realtime_priority)  # before the worker starts: it resets to ordinary
        self.gate.start()  # the scan map's worker (parameter scan_map_worker), stopped in close()
        self.state: State | None = None
        self._odom_problem: str | None = None
        self._scan_problem: str | None = None
        self._scan_frame_seen: str | None = None
        self._callback_error: str | None = None
        self._odom_child_seen: str | None = None
        subs = self._connect(params)
        self._inputs = subs
        self._start_timers(settings)
        self.get_logger().info(
            f"controller {params.controller}; executor {params.executor}; bundle {bundle} ({bundle_from}; "
            f"fingerprint {getattr(self.runtime.contract, 'fingerprint', '?')}); "
            + self._settings_text(settings)
            + f"; {scheduling.line}"
            + f"; {' + '.join(x.topic_name for x in subs)} -> {self.cmd_pub.topic_name} "
            + f"({'TwistStamped, frame ' + self.base_frame if self.stamped_cmd else 'Twist'}), "
            f"{self.policy_scan_pub.topic_name}"
        )

    # ------------------------------------------------------------------ startup
    def _load_bundle(self, bundle_path: str, robot_base: str) -> tuple[PolicyRuntime, str, str]:
        """The bundle named by ``bundle_path`` (else $NAV_POLICY_BUNDLE, else the one installed for
        ``robot_base``, else the installed default), loaded; StartupError saying why when it cannot be."""
        bundle_dir, bundle_from = resolve_bundle(bundle_path, robot_base=robot_base)
        bundle = str(bundle_dir)
        if not os.path.isdir(bundle):
            raise StartupError(
                f"bundle '{bundle}' ({bundle_from}) is not a directory (expected policy.onnx + contract.json)"
            )
        try:
            return PolicyRuntime.load(bundle), bundle, bundle_from
        except Exception as exc:
            raise StartupError(f"cannot load bundle '{bundle}': {type(exc).__name__}: {exc}") from exc

    def _driver(self, params: NodeParams):
        """What the ``controller`` parameter names behind the gate: the bundle's policy, or the DWA
        baseline built from the same contract."""
        if params.controller == "policy":
            return self.runtime
        from navdeploy.dwa import DwaParams, DwaPlanner  # only the dwa controller needs it

        path = params.dwa_params_file
        try:
            return DwaPlanner(self.runtime.contract, DwaParams.from_yaml(os.path.expanduser(path) if path else None))
        except (OSError, ValueError) as exc:
            raise StartupError(f"cannot build the dwa controller: {exc}") from exc

    def _resolve(self, params: NodeParams, origin: str, driver: Any) -> GateSettings:
        """The gate's settings from the parameters, the contract and the driver (the DWA's own path
        lookahead); warnings and where each limit came from go to the log. A refusal names
        the bundle and where it came from (``origin``)."""
        c = self.runtime.contract
        try:
            settings, warnings = resolve_settings(c, params, driver)
        except ValueError as exc:
            raise StartupError(f"{exc}; {origin}") from exc
        for text in warnings:
            self.get_logger().warn(text)
        self.get_logger().info("limits: " + "; ".join(settings.limit_sources))
        response = getattr(c, "response", None)
        self.get_logger().info(
            "robot response the policy was trained for: "
            + (response.describe() if response is not None else "not stated (bundle format 1)")
        )
        return settings

    def _connect(self, params: NodeParams) -> list:
        """Publishers and subscriptions on the parameters' topics; returns the subscriptions."""
        self.cmd_pub = self.create_publisher(TwistStamped if self.stamped_cmd else Twist, params.cmd_vel_topic, CMD_QOS)
        self.status_pub = self.create_publisher(String, params.status_topic, STATUS_QOS)
        self.policy_scan_pub = self.create_publisher(LaserScan, params.policy_scan_topic, STATUS_QOS)
        # The command for RViz (a Pose display): an arrow in the base frame along the planar velocity.
        self.cmd_arrow_pub = self.create_publisher(PoseStamped, params.cmd_arrow_topic, STATUS_QOS)
        self.max_range = float(self.runtime.contract.max_range)
        return [
            self.create_subscription(LaserScan, params.scan_topic, self._guard(self.on_scan, "scan"), SENSOR_QOS),
            self.create_subscription(Odometry, params.odom_topic, self._guard(self.on_odom, "odom"), ODOM_SUB_QOS),
            self.create_subscription(PoseStamped, params.goal_topic, self._guard(self.on_goal, "goal"), GOAL_QOS),
            self.create_subscription(Path, params.plan_topic, self._guard(self.on_path, "path"), PATH_QOS),
        ]

    def _start_timers(self, settings: GateSettings) -> None:
        """The control timer (ROS time), and under use_sim_time the clock watchdog's on wall time."""
        self.timer = self.create_timer(self.control_period, self.on_tick)
        # /clock can stop (sim paused, bag ended, sim died): a timer on ROS time then stops with it.
        self.use_sim_time = bool(self.get_parameter("use_sim_time").value)
        self.watchdog = ClockWatchdog(settings.clock_timeout)
        self.wall_timer = None
        if self.use_sim_time:
            steady = Clock(clock_type=ClockType.STEADY_TIME)
            self.wall_timer = self.create_timer(self.control_period, self.on_wall_tick, clock=steady)

    def _settings_text(self, settings: GateSettings) -> str:
        """The startup log's account of the resolved settings."""
        c, so, limits = self.runtime.contract, settings.scan_options, settings.limits
        return (
            f"period {self.control_period} s, "
            f"goal tolerance {settings.goal_tolerance} m, limits v {limits.v_max} m/s w {limits.omega_max} rad/s, "
            f"stale timeout {settings.stale_timeout} s"
            + (f", clock watchdog {settings.clock_timeout} s wall" if self.use_sim_time else "")
            + f"; velocity smoother {_accel_text(settings.accel_limits)}"
            + f"; scan rules below_min {so.below_min}, fill {so.fill}"
            + (f" {so.fill_value} m" if so.fill == "constant" else "")
            + f", min_valid_share {so.min_valid_share}, min_coverage {so.min_coverage} of the trained "
            f"{math.degrees(getattr(c, 'trained_fov', 2 * math.pi)):.0f} deg, max_fill_gap {so.max_fill_gap}"
            + (f", self_radius {so.self_radius:g} m (nearer returns are the robot's own)" if so.self_radius else "")
            + "; "
            f"{settings.lidar_source}; "
            f"path following {settings.path_source}; {settings.guard_source}; {settings.scan_map_source}; "
            f"{settings.progress_source}"
        )

    # ------------------------------------------------------------------ inputs
    def _guard(self, fn, what: str):
        """A callback that never takes the node down: on an exception the input counts as unusable."""

        def cb(msg) -> None:
            try:
                fn(msg)
            except Exception as exc:
                text = f"{what} message could not be handled: {type(exc).__name__}: {exc}"
                self.gate.input_failed(what, text)
                if text != self._callback_error:
                    self._callback_error = text
                    self.get_logger().error(text + " (publishing zero)")

        return cb

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def on_scan(self, msg: LaserScan) -> None:
        problem = self.gate.scan_message(msg, self._now())
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
            if msg.header.frame_id and msg.header.frame_id != self.base_frame and self.gate.lidar_mount is None:
                self.get_logger().warn(
                    f"scan frame '{msg.header.frame_id}' is not '{self.base_frame}': the policy was trained "
                    f"with the lidar at the centre of {self.base_frame}, facing forward, upright; where it sits "
                    "elsewhere, set lidar_x, lidar_y, lidar_yaw and lidar_upside_down to its mounting pose"
                )

    def _report_scan_problem(self, text: str) -> None:
        if text != self._scan_problem:
            self._scan_problem = text
            self.get_logger().warn(text)

    def on_odom(self, msg: Odometry) -> None:
        problem = self.gate.odom_message(msg, self._now())
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
        ok, text = self.gate.goal_message(msg)
        if ok:
            self.get_logger().info(text)
        else:
            self.get_logger().error(text)

    def on_path(self, msg: Path) -> None:
        """A planner republishes its path often: a new path is logged at debug level, a refused one,
        the start and the end of path following at info (warn when refused)."""
        had = self.gate.path is not None
        ok, text = self.gate.path_message(msg)
        if not ok:
            self.get_logger().warn(text)
        elif had and self.gate.path is not None:
            self.get_logger().debug(text)
        else:
            self.get_logger().info(text)

    # ------------------------------------------------------------------ control
    def on_tick(self) -> None:
        started = time.perf_counter()
        now = self._now()
        self.watchdog.check(now, time.monotonic())  # the clock advanced (or has not started)
        self._take_arrived_inputs()
        self._emit(self.gate.tick(now, dispatch=False), now, started)  # never raises; zero unless driving

    def _take_arrived_inputs(self) -> None:
        """Hand every input message that has reached this node to its callback before the tick reads
        them. The executor runs a ready timer before ready subscriptions, so without this a scan or
        odometry message that arrived together with the tick's clock (or just after the timer became
        due) would wait for the next tick, and the tick would act on the one before it. Per topic
        the messages keep their order; the executor later finds nothing left to take."""
        for sub in self._inputs:
            while True:
                with sub.handle:
                    taken = sub.handle.take_message(sub.msg_type, sub.raw)
                if taken is None:
                    break
                sub.callback(taken[0])

    def on_wall_tick(self) -> None:
        """Wall-time watchdog (use_sim_time): zero, status and one log line while /clock is stalled."""
        now = self._now()
        res = self.watchdog.check(now, time.monotonic(), lambda: self.count_publishers("/clock") > 0)
        if res is not None:
            self.gate.stopped(now)  # a zero went out: the smoother starts again from rest
            self._emit(res, now)

    def _emit(self, res: TickResult, now: float, started: float | None = None) -> None:
        """Publish the tick's command, then the rest: the worker's scan, the arrow, state logs and the
        status, whose ``tick_ms`` is the wall time from the timer's callback (``started``) to the
        command's publish call (inputs taken, the tick, the publish)."""
        cmd, state, reason = res.cmd, res.state, res.reason
        self._publish(cmd)
        tick_ms = None if started is None else (time.perf_counter() - started) * 1e3
        self.gate.dispatch()  # the scan map's worker gets the tick's scan once the command is out
        self._publish_cmd_arrow(cmd)
        if state != self.state:
            self.state = state
            log = self.get_logger()
            if state == State.ERROR:
                log.error(f"state -> {state.value}: {reason}")
            elif state in FAULT_STATES:
                log.warn(f"state -> {state.value}: {reason} (publishing zero)")
            elif state == State.STUCK:
                log.warn(f"state -> {state.value}: {reason}")
            else:
                log.info(f"state -> {state.value}: {reason}")
        status = {
            "state": state.value,
            "reason": reason,
            "distance_to_goal": None if res.distance is None else round(res.distance, 4),
            "inference_ms": None if res.inference_ms is None else round(res.inference_ms, 4),
            "last_inference_ms": None if self.gate.last_inference_ms is None else round(self.gate.last_inference_ms, 4),
            "tick_ms": None if tick_ms is None else round(tick_ms, 4),
            "cmd": [round(float(v), 5) for v in cmd],
            "scan_age_s": None if self.gate.scan is None else round(now - self.gate.scan.stamp, 4),
            "input_stamps": list(self.gate.input_stamps()),
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
        """The command as Twist, or as TwistStamped (``enable_stamped_cmd_vel``: stamped with the node's
        ROS time, frame ``base_frame``)."""
        twist = Twist()
        twist.linear.x, twist.linear.y, twist.angular.z = (float(v) for v in cmd)
        if not self.stamped_cmd:
            self.cmd_pub.publish(twist)
            return
        msg = TwistStamped(twist=twist)
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.base_frame
        self.cmd_pub.publish(msg)

    def _publish_cmd_arrow(self, cmd: np.ndarray) -> None:
        arrow = PoseStamped()
        arrow.header.stamp = self.get_clock().now().to_msg()
        arrow.header.frame_id = self.base_frame
        heading = math.atan2(float(cmd[1]), float(cmd[0])) if math.hypot(cmd[0], cmd[1]) > 0 else 0.0
        arrow.pose.orientation.z, arrow.pose.orientation.w = math.sin(heading / 2), math.cos(heading / 2)
        self.cmd_arrow_pub.publish(arrow)

    def close(self) -> None:
        """Last word on shutdown: stop the robot (and give reliable subscribers time to get it); stop
        the scan map's worker."""
        self._publish(np.zeros(3))
        self.gate.close()
        self.cmd_pub.wait_for_all_acked(Duration(seconds=0.5))


def check_choice(param: str, value: str) -> None:
    """A parameter with named choices (``controller``: policy | dwa, ``executor``: events |
    single_threaded) must name one of them: StartupError otherwise, before the bundle is loaded."""
    choices = PARAM[param].choices
    if value not in choices:
        raise StartupError(f"parameter '{param}' must be one of {', '.join(choices)}, got '{value}'")


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
