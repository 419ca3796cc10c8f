"""Closed loop in simulation: the MuJoCo sim node (training world) + the policy node.

    ros2 launch nav_policy sim.launch.py                                   # the installed default bundle
    ros2 launch nav_policy sim.launch.py bundle:=/path/to/bundle seed:=3
    ros2 launch nav_policy sim.launch.py bundle:=... lockstep:=true num_episodes:=5   # fast evaluation
    ros2 launch nav_policy sim.launch.py bundle:=/path/to/jackal_bundle            # simulates the bundle's base
    ros2 launch nav_policy sim.launch.py robot_base:=jackal                        # a Jackal-class base and its installed bundle

``robot_base`` (a preset name or a base YAML file) is the simulated robot's base; without it the sim
simulates the base the given bundle's contract states, and without a bundle the sim config's (the
holonomic disc). Given, it is the policy node's ``robot_base`` too, so the node refuses a bundle
trained for another drive or footprint, and without a bundle loads the one installed for that preset.

The sim node comes from the ``nav_policy_sim`` package (the training side: torch, mujoco), which a
robot image does not install; without it this launch file stops with one line saying so.
The sim publishes /scan, /odom, /clock and each episode's goal on /goal_pose and consumes
/cmd_vel; the policy node runs on simulated time (use_sim_time) so its control timer follows the
sim however fast it runs. Episode outcomes: /sim/episode (JSON) and the sim's log.

Every argument is checked before any node starts (``nav_policy.launch_args``): a wrong one stops
the launch with one line naming it and what it accepts (``ros2 launch`` prints launch's "Caught
exception in launch" line and exits 1).

The launch ends with its nodes: when the sim node exits (its ``num_episodes`` done) or either node
dies, the whole launch shuts down (launch's ``OnProcessExit`` + ``Shutdown``). The first node to
exit decides: with code 0 the launch ends with code 0; with another code the handler raises, which
LaunchService reports in one line ("Caught exception in launch") and turns into return code 1. The
other node, stopped by that shutdown, ends quietly.
"""

import os

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, RegisterEventHandler, Shutdown
from launch.event_handlers import OnProcessExit
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from nav_policy import launch_args


def generate_launch_description():
    pkg_share = get_package_share_directory("nav_policy")
    return LaunchDescription([*_arguments(pkg_share), OpaqueFunction(function=_launch)])


def _launch(context) -> list:
    """Both nodes from the checked arguments, and the end of the launch with either."""
    try:
        sim_share = get_package_share_directory("nav_policy_sim")
    except PackageNotFoundError:
        raise RuntimeError(
            "sim.launch.py needs the nav_policy_sim package (the simulator; not part of a robot install): "
            "build ros2_ws/src/nav_policy_sim, or use robot.launch.py on a robot"
        ) from None
    a = launch_args.configurations(context)
    sim, policy = _sim_node(a, sim_share), _policy_node(a)
    return [sim, policy, *_end_with_either(sim, policy)]


def _sim_node(a, sim_share: str):
    """The MuJoCo sim node (package nav_policy_sim) with its params file and the checked arguments."""
    params_file = a["sim_params_file"] or os.path.join(sim_share, "config", "sim.yaml")
    return Node(
        package="nav_policy_sim",
        executable="sim_node",
        name="sim_node",
        output="screen",
        parameters=[
            launch_args.params_file("sim_params_file", params_file),
            {
                "seed": launch_args.as_int("seed", a["seed"]),
                "num_episodes": launch_args.as_int("num_episodes", a["num_episodes"], meaning=" (0: endless)"),
                "real_time_factor": launch_args.as_float(
                    "real_time_factor",
                    a["real_time_factor"],
                    0.0,
                    1e6,
                    meaning=" (1: real time, 0: as fast as it goes)",
                ),
                "lockstep": launch_args.as_bool("lockstep", a["lockstep"]),
                "robot_base": ParameterValue(_sim_base(a), value_type=str),
                "lockstep_timeout": launch_args.as_float(
                    "lockstep_timeout", a["lockstep_timeout"], 0.0, 60.0, lo_open=True, meaning=" seconds"
                ),
                **launch_args.stamped(a),
            },
        ],
    )


def _sim_base(a) -> str:
    """The simulated base: ``robot_base`` when given, else the given bundle folder (the sim reads the
    base its contract states), else ``""`` (the sim config's)."""
    return launch_args.robot_base(a["robot_base"]) or launch_args.bundle(a["bundle"])


def _policy_node(a):
    """The policy node with its params file, the bundle (when given), the driver, simulated time and,
    when given, the robot base it must have been trained for."""
    params = launch_args.policy_params(a, ParameterValue)
    return Node(
        package="nav_policy",
        executable="policy_node",
        name="policy_node",
        output="screen",
        parameters=[launch_args.params_file("policy_params_file", a["policy_params_file"]), params],
    )


def _end_with_either(sim, policy) -> list:
    """Either node gone: shut everything down; a failure makes the launch exit 1. Only the first exit
    counts: the other node, stopped by the shutdown, ends quietly."""
    ended: list[str] = []

    def end_launch(event, context):
        who = "sim_node" if event.action is sim else "policy_node"
        if ended or getattr(context, "is_shutdown", False):
            return None
        ended.append(who)
        if event.returncode != 0:
            raise RuntimeError(f"{who} exited with code {event.returncode}; shutting the launch down")
        return [
            LogInfo(msg=f"{who} exited (code 0); shutting the launch down"),
            Shutdown(reason=f"{who} exited"),
        ]

    return [
        RegisterEventHandler(OnProcessExit(target_action=sim, on_exit=end_launch)),
        RegisterEventHandler(OnProcessExit(target_action=policy, on_exit=end_launch)),
    ]


def _arguments(pkg_share: str) -> list:
    """The launch arguments and their defaults."""
    return launch_args.declarations(
        DeclareLaunchArgument,
        {
            **launch_args.POLICY_ARGUMENTS,
            "robot_base": (
                "",
                "simulated base: a preset (holonomic_disc | turtlebot4 | jackal) or a base YAML file; "
                "default: the bundle's base when bundle:= is given, else holonomic_disc",
            ),
            "seed": ("0", "room seed of the first episode (>= 0)"),
            "num_episodes": ("0", "episodes to run, 0 = endless"),
            "use_sim_time": ("true", "policy node follows /clock"),
            "real_time_factor": ("1.0", "sim speed, 0 = max"),
            "lockstep": ("false", "sim waits for each command (fast, exact timing)"),
            "enable_stamped_cmd_vel": (
                "",
                "true: TwistStamped on /cmd_vel for both nodes; false: Twist; default: their params files'",
            ),
            "sim_params_file": ("", "sim node parameters; default nav_policy_sim's sim.yaml"),
            "policy_params_file": (os.path.join(pkg_share, "config", "policy.yaml"), None),
            "lockstep_timeout": ("2.0", "lockstep: wall seconds to wait for each command (no policy node: no wait)"),
        },
    )
