"""The policy node alone, against a real robot's topics.

    ros2 launch nav_policy robot.launch.py scan:=/lidar/scan        # the installed default bundle
    ros2 launch nav_policy robot.launch.py bundle:=/opt/bundle scan:=/lidar/scan odom:=/wheel/odom
    ros2 launch nav_policy robot.launch.py params_file:=/my/policy.yaml cmd_vel:=/base/cmd_vel
    ros2 launch nav_policy robot.launch.py controller:=dwa plan:=/planner/plan enable_stamped_cmd_vel:=true
    ros2 launch nav_policy robot.launch.py robot_base:=jackal       # a Jackal-class base: its installed bundle

Remapping arguments rename the node's topics (/scan, /odom, /goal_pose, /cmd_vel, /plan); params_file
replaces the installed config/policy.yaml (limits, stale timeout, frames, ...). Without ``bundle`` the
node takes its params file's bundle_path, else $NAV_POLICY_BUNDLE, else the bundle installed with the
package for the preset ``robot_base`` names (jackal), else the installed default, and its startup line
says which. ``robot_base`` (a preset name or a base YAML file, docs/bases.md) declares the base the
robot is: the node refuses a bundle trained for another drive or footprint.

Every argument is checked before the node starts (``nav_policy.launch_args``): a wrong one stops the
launch with one line naming it and what it accepts, and ``ros2 launch`` exits 1. A node that exits
with an error ends the launch with exit code 1 too.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from nav_policy import launch_args

TOPICS = {"scan": "/scan", "odom": "/odom", "goal": "/goal_pose", "cmd_vel": "/cmd_vel", "plan": "/plan"}


def generate_launch_description():
    share = get_package_share_directory("nav_policy")
    return LaunchDescription([*_arguments(share), OpaqueFunction(function=_launch)])


def _arguments(share: str) -> list:
    """The launch arguments and their defaults."""
    return launch_args.declarations(
        DeclareLaunchArgument,
        {
            **launch_args.POLICY_ARGUMENTS,
            "params_file": (
                os.path.join(share, "config", "policy.yaml"),
                "policy node parameters (ROS 2 params YAML)",
            ),
            "use_sim_time": ("false", "true | false (also 1 | 0)"),
            "robot_base": (
                "",
                "the base this robot is: a preset (holonomic_disc, turtlebot4, jackal) or a base YAML "
                "file; the node refuses a bundle of another drive or footprint; default: the params file's",
            ),
            "enable_stamped_cmd_vel": (
                "",
                "true: geometry_msgs/TwistStamped on cmd_vel (Nav2's enable_stamped_cmd_vel); "
                "false: Twist; default: the params file's",
            ),
            "scan": (TOPICS["scan"], "LaserScan topic"),
            "odom": (TOPICS["odom"], "Odometry topic"),
            "goal": (TOPICS["goal"], "PoseStamped goal topic"),
            "cmd_vel": (TOPICS["cmd_vel"], "command topic"),
            "plan": (TOPICS["plan"], "nav_msgs/Path global plan topic (path following)"),
        },
    )


def _launch(context) -> list:
    """The policy node from the checked arguments, and the end of the launch when it fails."""
    a = launch_args.configurations(context)
    params = launch_args.policy_params(a, ParameterValue)
    node = Node(
        package="nav_policy",
        executable="policy_node",
        name="policy_node",
        output="screen",
        parameters=[launch_args.params_file("params_file", a["params_file"]), params],
        remappings=[(topic, launch_args.topic(arg, a[arg])) for arg, topic in TOPICS.items()],
    )
    return [node, RegisterEventHandler(OnProcessExit(target_action=node, on_exit=_failed))]


def _failed(event, context):
    """The node exited: with an error, the launch exits 1 (the node's own last line says why); a node
    stopped by the launch's own shutdown (Ctrl-C) is no failure."""
    if event.returncode != 0 and not getattr(context, "is_shutdown", False):
        raise RuntimeError(f"policy_node exited with code {event.returncode} (its last line above says why)")
    return None
