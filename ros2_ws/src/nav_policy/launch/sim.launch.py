"""Closed loop in simulation: the MuJoCo sim node (training world) + the policy node.

    ros2 launch nav_policy sim.launch.py                                   # the installed default bundle
    ros2 launch nav_policy sim.launch.py bundle:=/path/to/bundle seed:=3
    ros2 launch nav_policy sim.launch.py bundle:=... lockstep:=true num_episodes:=5   # fast evaluation

The sim node comes from the ``nav_policy_sim`` package (the training side: torch, mujoco), which a
robot image does not install; without it this launch file stops with one line saying so.
The sim publishes /scan, /odom, /clock and each episode's goal on /goal_pose and consumes
/cmd_vel; the policy node runs on simulated time (use_sim_time) so its control timer follows the
sim however fast it runs. Episode outcomes: /sim/episode (JSON) and the sim's log.

The launch ends with its nodes: when the sim node exits (its ``num_episodes`` done) or either node
dies, the whole launch shuts down (launch's ``OnProcessExit`` + ``Shutdown``); a node that exited
with a non-zero code makes ``ros2 launch`` exit non-zero (the handler raises, which LaunchService
reports as "Caught exception in launch" and turns into return code 1).
"""

import os

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, RegisterEventHandler, Shutdown
from launch.event_handlers import OnProcessExit
from launch.substitutions import EnvironmentVariable, LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    pkg_share = get_package_share_directory("nav_policy")
    try:
        sim_cfg = os.path.join(get_package_share_directory("nav_policy_sim"), "config")
    except PackageNotFoundError:
        raise RuntimeError(
            "sim.launch.py needs the nav_policy_sim package (the simulator; not part of a robot install): "
            "build ros2_ws/src/nav_policy_sim, or use robot.launch.py on a robot"
        ) from None
    sim, policy = _sim_node(), _policy_node()
    return LaunchDescription(
        [
            *_arguments(pkg_share, sim_cfg),
            sim,
            policy,
            *_end_with_either(sim, policy),
        ]
    )


def _sim_node():
    """The MuJoCo sim node (package nav_policy_sim) with its params file and the launch arguments."""
    return Node(
        package="nav_policy_sim",
        executable="sim_node",
        name="sim_node",
        output="screen",
        parameters=[
            LaunchConfiguration("sim_params_file"),
            {
                "seed": ParameterValue(LaunchConfiguration("seed"), value_type=int),
                "num_episodes": ParameterValue(LaunchConfiguration("num_episodes"), value_type=int),
                "real_time_factor": ParameterValue(LaunchConfiguration("real_time_factor"), value_type=float),
                "lockstep": ParameterValue(LaunchConfiguration("lockstep"), value_type=bool),
                "lockstep_timeout": ParameterValue(LaunchConfiguration("lockstep_timeout"), value_type=float),
            },
        ],
    )


def _policy_node():
    """The policy node with its params file, the bundle, the driver and simulated time."""
    return Node(
        package="nav_policy",
        executable="policy_node",
        name="policy_node",
        output="screen",
        parameters=[
            LaunchConfiguration("policy_params_file"),
            {
                "bundle_path": ParameterValue(LaunchConfiguration("bundle"), value_type=str),
                "controller": ParameterValue(LaunchConfiguration("controller"), value_type=str),
                "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool),
            },
        ],
    )


def _end_with_either(sim, policy) -> list:
    """Either node gone: shut everything down; a failure makes the launch exit non-zero."""

    def end_launch(event, context):
        who = "sim_node" if event.action is sim else "policy_node"
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


def _arguments(pkg_share: str, sim_cfg: str) -> list:
    """The launch arguments and their defaults."""
    return [
        DeclareLaunchArgument(
            "bundle",
            default_value=EnvironmentVariable(
                "NAV_POLICY_BUNDLE", default_value=os.path.join(pkg_share, "default_bundle")
            ),
            description="policy bundle folder (policy.onnx + contract.json); default $NAV_POLICY_BUNDLE, "
            "else the trained bundle installed with nav_policy (share/nav_policy/default_bundle)",
        ),
        DeclareLaunchArgument("seed", default_value="0", description="room seed of the first episode"),
        DeclareLaunchArgument("num_episodes", default_value="0", description="episodes to run, 0 = endless"),
        DeclareLaunchArgument(
            "controller", default_value="policy", description="policy | dwa (dynamic-window baseline)"
        ),
        DeclareLaunchArgument("use_sim_time", default_value="true", description="policy node follows /clock"),
        DeclareLaunchArgument("real_time_factor", default_value="1.0", description="sim speed, 0 = max"),
        DeclareLaunchArgument(
            "lockstep", default_value="false", description="sim waits for each command (fast, exact timing)"
        ),
        DeclareLaunchArgument("sim_params_file", default_value=os.path.join(sim_cfg, "sim.yaml")),
        DeclareLaunchArgument("policy_params_file", default_value=os.path.join(pkg_share, "config", "policy.yaml")),
        DeclareLaunchArgument(
            "lockstep_timeout",
            default_value="2.0",
            description="lockstep: wall seconds to wait for each command (no policy node: no wait)",
        ),
    ]
