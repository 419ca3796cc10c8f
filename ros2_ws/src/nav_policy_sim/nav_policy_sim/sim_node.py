"""ROS 2 simulation node: one C MuJoCo training world that closes the loop with the policy node.

Each control period it publishes ``/scan`` (the training beams, best effort like a lidar driver),
``/odom`` (odom -> base_link, body-frame twist) and ``/clock`` (simulated time: run the policy
node with ``use_sim_time``), then applies the latest ``/cmd_vel`` as the training env applies an
action and runs ``physics_substeps`` physics steps.

Pacing: ``real_time_factor`` 1 is real time, 10 ten times faster, 0 as fast as the CPU allows. In
``lockstep`` mode the sim instead waits, after each ``/clock`` tick, for the one ``/cmd_vel`` the
policy's timer publishes for it (up to ``lockstep_timeout`` wall seconds): the fastest setting that
still gives each command exactly one control period, as in training. Without any /cmd_vel
publisher it does not wait at all: it steps with a zero command and logs that it does (every 5 s).

Episodes: the room of episode ``k`` is the training generator's room for ``seed + k``. The sim
publishes the episode's goal on the goal topic (transient local; the first one once a policy node
has subscribed, see ``wait_for_policy_timeout``), or with ``publish_goal: false`` takes goals from
that topic. It ends an episode on reaching the goal, a collision (any contact of
the robot shell), leaving the room, or the episode time limit, and reports each outcome as a JSON
string on the episode topic and in its log, named as in training (``navsim.outcomes``: success,
collision, out_of_bounds, timeout). After ``num_episodes`` (0 = endless) it exits when
``exit_when_done`` is set, its /clock publisher gone first (a policy node then reports
``clock_ended``, not a stalled clock).

The robot base (``robot_base``): ``""`` is the config's own (``conf/nav.yaml``: the holonomic disc); a
preset name (``jackal``) or a base YAML file sets ``env.robot.base``; a bundle folder takes the
base its contract states (``sim.launch.py`` passes the bundle's when no base is given). A
differential-drive base cannot move sideways: a command's ``linear.y`` is applied as 0 (warned
once when it was not 0).

``enable_stamped_cmd_vel``: the command arrives as ``geometry_msgs/TwistStamped`` (as the policy node
publishes it with the same parameter). A node stopped while it still imports exits with code 0,
without a traceback.
"""

from __future__ import annotations

import nav_policy.quiet_start  # noqa: F401 - first of all: SIGINT while importing exits quietly

# isort: split
import json
import sys
import time
from pathlib import Path

import numpy as np
import rclpy
import rclpy.duration
from geometry_msgs.msg import PoseStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import LaserScan
from std_msgs.msg import String

from nav_policy.ros_common import (
    CMD_QOS,
    EVENT_QOS,
    GOAL_LATCHED_QOS,
    GOAL_QOS,
    SENSOR_QOS,
    StartupError,
    declare_bool,
    declare_number,
    ns_to_stamp,
    run_node,
)
from navcontract.bundle import BundleError, read_contract
from navsim.config_load import load_config
from navsim.contract_objects import base_overrides, base_spec
from navsim.outcomes import Outcome
from navsim.sim_world import SimWorld

LOCKSTEP_RESEND = 1.0
"""[s wall] In lockstep, a tick still unanswered after this long is published again (the same
messages), every this long, until the policy's command comes or ``lockstep_timeout`` ends."""


def robot_base_overrides(robot_base: str) -> list[str]:
    """The config overrides of the ``robot_base`` parameter: none for ``""``; the base a bundle folder's
    contract states (every field); else ``env.robot.base=`` the preset name or base file."""
    if not robot_base:
        return []
    path = Path(robot_base).expanduser()
    if not path.is_dir():
        return [f"env.robot.base={path if robot_base.endswith(('.yaml', '.yml')) else robot_base}"]
    try:
        base = read_contract(path).base
    except BundleError as exc:
        raise StartupError(f"parameter robot_base: {robot_base} is not a readable bundle: {exc}") from None
    if base is None:
        raise StartupError(f"parameter robot_base: the bundle {robot_base} states no base (nor robot.radius)")
    return base_overrides(base)


class SimNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("sim_node", **kwargs)
        p = self.declare_parameter
        self.seed = int(p("seed", 0).value)
        self.num_episodes = int(p("num_episodes", 0).value)
        self.exit_when_done = bool(p("exit_when_done", True).value)
        config_path = p("config_path", "").value
        self.lockstep = bool(p("lockstep", False).value)
        self.rtf = declare_number(self, "real_time_factor", 1.0, 0.0, 1e6)
        self.lockstep_timeout = declare_number(self, "lockstep_timeout", 2.0, 0.0, 60.0, lo_open=True)
        self.wait_for_policy = declare_number(self, "wait_for_policy_timeout", 30.0, 0.0, 3600.0)
        noise_std = declare_number(self, "noise_std", -1.0, -1.0, 10.0)
        episode_length_s = declare_number(self, "episode_length_s", 0.0, 0.0, 1e6)
        self.publish_goal = bool(p("publish_goal", True).value)
        self.cmd_timeout = declare_number(self, "cmd_timeout", 0.5, 0.0, 60.0, lo_open=True)
        self.start_time = declare_number(self, "start_time", 1.0, 0.0, 1e9)
        if self.num_episodes < 0:
            raise StartupError(f"parameter 'num_episodes' must be >= 0 (0 = endless), got {self.num_episodes}")
        scan_topic = p("scan_topic", "/scan").value
        odom_topic = p("odom_topic", "/odom").value
        cmd_topic = p("cmd_vel_topic", "/cmd_vel").value
        goal_topic = p("goal_topic", "/goal_pose").value
        episode_topic = p("episode_topic", "/sim/episode").value
        self.odom_frame = p("odom_frame", "odom").value
        self.base_frame = p("base_frame", "base_link").value
        self.scan_frame = p("scan_frame", "base_link").value

        robot_base = str(p("robot_base", "").value)
        try:
            cfg = load_config(config_path or None, robot_base_overrides(robot_base))
        except StartupError:
            raise
        except Exception as exc:
            raise StartupError(f"cannot load the simulator config '{config_path or 'default'}': {exc}") from exc
        self.base = base_spec(cfg)
        if episode_length_s > 0:
            cfg.env.episode_length_s = episode_length_s
        self.world = SimWorld(cfg, noise_std=noise_std)
        self.period_ns = int(round(self.world.control_period * 1e9))
        self.t_ns = int(round(self.start_time * 1e9))

        self.scan_pub = self.create_publisher(LaserScan, scan_topic, SENSOR_QOS)
        self.odom_pub = self.create_publisher(Odometry, odom_topic, 10)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10)
        self.episode_pub = self.create_publisher(String, episode_topic, EVENT_QOS)
        self.goal_pub = self.create_publisher(PoseStamped, goal_topic, GOAL_LATCHED_QOS) if self.publish_goal else None
        stamped = declare_bool(self, "enable_stamped_cmd_vel", False)
        self.cmd_sub = self.create_subscription(TwistStamped if stamped else Twist, cmd_topic, self.on_cmd, CMD_QOS)
        if not self.publish_goal:
            self.create_subscription(PoseStamped, goal_topic, self.on_goal, GOAL_QOS)
        self.cmd = np.zeros(3)
        self.cmd_count = 0
        self.cmd_t_ns = -1
        self.ext_goal: np.ndarray | None = None
        self.episode = 0
        self.results: list[dict] = []
        self.done = False
        self._warned: set[str] = set()
        self.lockstep_misses = 0  # ticks stepped without the policy's command (lockstep)
        self.lockstep_resends = 0  # ticks published again while waiting for the policy's command (lockstep)
        self._waiting_since: float | None = None  # wall time lockstep started stepping with no policy node
        self.running = False
        self._start_episode()
        self.get_logger().info(
            f"sim: base {self.base.name} ({self.base.drive}, radius {self.base.radius} m), seed {self.seed}, "
            f"{self.world.num_beams} beams, max range {self.world.max_range} m, "
            f"period {self.world.control_period} s x {self.world.substeps} substeps, episode limit "
            f"{self.world.max_steps} steps, {'lockstep' if self.lockstep else f'real-time factor {self.rtf}'}"
        )

    # ------------------------------------------------------------------ callbacks
    def on_cmd(self, msg) -> None:
        """A Twist, or a TwistStamped (``enable_stamped_cmd_vel``; its stamp and frame are not used)."""
        t = msg.twist if isinstance(msg, TwistStamped) else msg
        cmd = np.array([t.linear.x, t.linear.y, t.angular.z], dtype=np.float64)
        if not np.all(np.isfinite(cmd)):
            self._warn_once("nonfinite_cmd", f"non-finite /cmd_vel {cmd.tolist()} ignored (zero applied)")
            cmd = np.zeros(3)
        cmd, dropped = self.world.base_command(cmd)
        if dropped:
            self._warn_once(
                "lateral_cmd",
                f"/cmd_vel linear.y {t.linear.y:.3g} m/s applied as 0: the base {self.base.name} is a "
                "diff drive (logged once)",
            )
        self.cmd = cmd
        self.cmd_count += 1
        self.cmd_t_ns = self.t_ns

    def on_goal(self, msg: PoseStamped) -> None:
        if msg.header.frame_id != self.odom_frame:
            self.get_logger().error(
                f"goal in frame '{msg.header.frame_id}' ignored (the sim's frame is '{self.odom_frame}')"
            )
            return
        self.ext_goal = np.array([msg.pose.position.x, msg.pose.position.y])
        self.get_logger().info(f"external goal ({self.ext_goal[0]:.2f}, {self.ext_goal[1]:.2f})")

    def _warn_once(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warn(text)

    # ------------------------------------------------------------------ episodes
    def _start_episode(self) -> None:
        room_seed = self.seed + self.episode
        self.room = self.world.make_room(room_seed)
        self.world.reset(self.room)
        self.cmd = np.zeros(3)
        self.get_logger().info(
            f"episode {self.episode} (room seed {room_seed}): start ({self.room.start[0]:.2f}, "
            f"{self.room.start[1]:.2f}, {self.room.start[2]:.2f}), goal ({self.room.goal[0]:.2f}, "
            f"{self.room.goal[1]:.2f}), {int(self.room.slot_active.sum())} obstacles"
        )
        if self.running:  # the first episode's goal goes out once the policy node is there (run())
            self._publish_goal()

    def _publish_goal(self) -> None:
        if self.goal_pub is None:
            return
        msg = PoseStamped()
        msg.header.frame_id = self.odom_frame
        ns_to_stamp(self.t_ns, msg.header.stamp)
        msg.pose.position.x, msg.pose.position.y = (float(v) for v in self.room.goal)
        msg.pose.orientation.w = 1.0
        self.goal_pub.publish(msg)

    def _goal(self) -> np.ndarray | None:
        return self.room.goal if self.publish_goal else self.ext_goal

    def _finish_episode(self, outcome: str) -> None:
        goal = self._goal()
        result = {
            "episode": self.episode,
            "seed": self.room.seed,
            "outcome": outcome,
            "steps": self.world.steps,
            "sim_time_s": round(self.world.steps * self.world.control_period, 3),
            "final_distance": round(self.world.goal_distance(goal), 4),
            "start": [round(float(v), 4) for v in self.room.start],
            "goal": [round(float(v), 4) for v in goal],
            "final_pose": [round(float(v), 4) for v in self.world.pose()],
            "lockstep_misses": self.lockstep_misses,
            "lockstep_resends": self.lockstep_resends,
        }
        self.results.append(result)
        self.episode_pub.publish(String(data=json.dumps(result)))
        text = f"episode {self.episode} (seed {self.room.seed}): {outcome} after {result['sim_time_s']} s"
        if outcome == Outcome.SUCCESS:
            self.get_logger().info(text)
        else:
            self.get_logger().warn(text)
        self.episode += 1
        if self.num_episodes > 0 and self.episode >= self.num_episodes:
            self.done = True
            ok = sum(r["outcome"] == Outcome.SUCCESS for r in self.results)
            self.get_logger().info(f"all {self.num_episodes} episodes done: {ok} {Outcome.SUCCESS}")
        else:
            self._start_episode()

    # ------------------------------------------------------------------ publishing
    def publish_state(self) -> None:
        w = self.world
        scan = LaserScan()
        ns_to_stamp(self.t_ns, scan.header.stamp)
        scan.header.frame_id = self.scan_frame
        scan.angle_min = w.beams.angle_min
        scan.angle_increment = w.beams.angle_increment
        scan.angle_max = w.beams.angle_max
        scan.time_increment = 0.0
        scan.scan_time = w.control_period
        scan.range_min = 0.0
        scan.range_max = w.max_range
        scan.ranges = w.scan().astype(np.float32).tolist()
        odom = Odometry()
        odom.header.stamp = scan.header.stamp
        odom.header.frame_id = self.odom_frame
        odom.child_frame_id = self.base_frame
        x, y, yaw = w.pose()
        odom.pose.pose.position.x, odom.pose.pose.position.y = float(x), float(y)
        odom.pose.pose.orientation.z = float(np.sin(yaw / 2.0))
        odom.pose.pose.orientation.w = float(np.cos(yaw / 2.0))
        vx, vy, wz = w.body_twist()
        odom.twist.twist.linear.x, odom.twist.twist.linear.y = float(vx), float(vy)
        odom.twist.twist.angular.z = float(wz)
        clock = Clock()
        ns_to_stamp(self.t_ns, clock.clock)
        self._tick_msgs = (scan, odom, clock)
        self._send_tick()

    def _send_tick(self) -> None:
        """Publish this tick's scan, odometry and clock (again: the same messages)."""
        scan, odom, clock = self._tick_msgs
        self.scan_pub.publish(scan)
        self.odom_pub.publish(odom)
        self.clock_pub.publish(clock)

    def advance(self) -> None:
        stale = self.cmd_t_ns < 0 or (self.t_ns - self.cmd_t_ns) > self.cmd_timeout * 1e9
        cmd = np.zeros(3) if stale else self.cmd
        if self._goal() is None:
            cmd = np.zeros(3)
        self.world.step(cmd)
        self.t_ns += self.period_ns
        goal = self._goal()
        outcome = self.world.outcome(goal) if goal is not None else None
        if outcome is None and goal is None and self.world.steps >= self.world.max_steps:
            outcome = Outcome.TIMEOUT
        if outcome is not None:
            self._finish_episode(outcome)

    # ------------------------------------------------------------------ main loop
    def wait_for_peers(self, executor, stop) -> None:
        """Wait (wall time) until someone subscribes to the scan (and the goal) and publishes /cmd_vel.

        The goal subscription matters: a policy node subscribes to goals volatile (as RViz / Nav2
        publish them), so a goal published before it matched would never reach it."""
        if self.wait_for_policy <= 0:
            return
        deadline = time.monotonic() + self.wait_for_policy
        while not stop.is_set() and time.monotonic() < deadline:
            goal_seen = self.goal_pub is None or self.goal_pub.get_subscription_count() > 0
            if self.scan_pub.get_subscription_count() > 0 and self.cmd_sub.get_publisher_count() > 0 and goal_seen:
                self.get_logger().info("policy node connected (scan and goal subscribers, cmd_vel publisher seen)")
                return
            executor.spin_once(timeout_sec=0.05)
        self.get_logger().warn(f"no policy node after {self.wait_for_policy} s; running anyway")

    def _lockstep_wait(self, executor, stop) -> None:
        """Wait (wall time) for the policy's command of this tick, at most ``lockstep_timeout``.

        With no /cmd_vel publisher at all there is nobody to wait for: the sim steps on at once with
        a zero command and says so (every 5 s of wall time, with how many ticks ran unanswered),
        instead of sleeping ``lockstep_timeout`` silently on every tick. A policy node that
        appears later is waited for again from its first tick."""
        if self.cmd_sub.get_publisher_count() == 0:
            executor.spin_once(timeout_sec=0.0)
            now = time.monotonic()
            self.lockstep_misses += 1
            if self._waiting_since is None or now - self._waiting_since >= 5.0:
                self._waiting_since = now
                self.get_logger().warn(
                    f"lockstep: no /cmd_vel publisher (is the policy node running?); stepping with zero "
                    f"command without waiting ({self.lockstep_misses} ticks unanswered so far)"
                )
            return
        if self._waiting_since is not None:
            self._waiting_since = None
            self.get_logger().info("lockstep: /cmd_vel publisher connected; waiting for its command each tick")
        before = self.cmd_count
        start = time.monotonic()
        deadline = start + self.lockstep_timeout
        resend_at = start + LOCKSTEP_RESEND
        while self.cmd_count == before and not stop.is_set():
            now = time.monotonic()
            left = deadline - now
            if now >= resend_at and left > 0:
                # A best-effort scan or the clock sent before the policy node matched this publisher
                # is lost for good: the same tick again (same stamps, same readings), until answered.
                self._send_tick()
                self.lockstep_resends += 1
                resend_at = now + LOCKSTEP_RESEND
            if left <= 0:
                self.lockstep_misses += 1
                self._warn_once(
                    "lockstep",
                    f"lockstep: no /cmd_vel within lockstep_timeout {self.lockstep_timeout} s of a clock tick; "
                    "stepping on (logged once; the count is in the episode reports)",
                )
                break
            executor.spin_once(timeout_sec=min(left, 0.1))

    def run(self, executor, stop) -> None:
        self.wait_for_peers(executor, stop)
        self.running = True
        self._publish_goal()  # the first episode's goal
        wall0 = time.monotonic()
        k = 0
        while not stop.is_set() and rclpy.ok() and not self.done:
            self.publish_state()
            k += 1
            if self.lockstep:
                self._lockstep_wait(executor, stop)
            elif self.rtf > 0:
                target = wall0 + k * self.world.control_period / self.rtf
                while not stop.is_set():
                    left = target - time.monotonic()
                    if left <= 0:
                        break
                    executor.spin_once(timeout_sec=left)
            else:
                executor.spin_once(timeout_sec=0.0)
            self.advance()
        # /clock ends here: without its publisher a policy node reports the end (clock_ended), not a
        # stalled clock, while reliable subscribers get the last episode reports.
        self.destroy_publisher(self.clock_pub)
        self.episode_pub.wait_for_all_acked(rclpy.duration.Duration(seconds=2.0))
        if self.done and not self.exit_when_done:
            while not stop.is_set() and rclpy.ok():  # stay up (robot stopped) until told to go
                executor.spin_once(timeout_sec=0.1)


def _loop(node: SimNode, executor, stop) -> None:
    node.run(executor, stop)


def main(args=None) -> int:
    return run_node(SimNode, loop=_loop)


if __name__ == "__main__":
    sys.exit(main())
