"""The policy node alone, against a real robot's topics.

    ros2 launch nav_policy robot.launch.py scan:=/lidar/scan        # the installed default bundle
    ros2 launch nav_policy robot.launch.py bundle:=/opt/bundle scan:=/lidar/scan odom:=/wheel/odom
    ros2 launch nav_policy robot.launch.py params_file:=/my/policy.yaml cmd_vel:=/base/cmd_vel

Remapping arguments rename the node's topics (/scan, /odom, /goal_pose, /cmd_vel); params_file
replaces the installed config/policy.yaml (limits, stale timeout, frames, ...). The bundle defaults
to $NAV_POLICY_BUNDLE, else the trained bundle installed with the package.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import EnvironmentVariable, LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    share = get_package_share_directory("nav_policy")
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "bundle",
                default_value=EnvironmentVariable(
                    "NAV_POLICY_BUNDLE", default_value=os.path.join(share, "default_bundle")
                ),
                description="policy bundle folder (policy.onnx + contract.json); default $NAV_POLICY_BUNDLE, "
                "else the trained bundle installed with nav_policy (share/nav_policy/default_bundle)",
            ),
            DeclareLaunchArgument(
                "params_file",
                default_value=os.path.join(share, "config", "policy.yaml"),
                description="policy node parameters (ROS 2 params YAML)",
            ),
            DeclareLaunchArgument(
                "controller", default_value="policy", description="policy | dwa (dynamic-window baseline)"
            ),
            DeclareLaunchArgument("use_sim_time", default_value="false"),
            DeclareLaunchArgument("scan", default_value="/scan", description="LaserScan topic"),
            DeclareLaunchArgument("odom", default_value="/odom", description="Odometry topic"),
            DeclareLaunchArgument("goal", default_value="/goal_pose", description="PoseStamped goal topic"),
            DeclareLaunchArgument("cmd_vel", default_value="/cmd_vel", description="Twist command topic"),
            DeclareLaunchArgument(
                "plan", default_value="/plan", description="nav_msgs/Path global plan topic (path following)"
            ),
            Node(
                package="nav_policy",
                executable="policy_node",
                name="policy_node",
                output="screen",
                parameters=[
                    LaunchConfiguration("params_file"),
                    {
                        "bundle_path": ParameterValue(LaunchConfiguration("bundle"), value_type=str),
                        "controller": ParameterValue(LaunchConfiguration("controller"), value_type=str),
                        "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool),
                    },
                ],
                remappings=[
                    ("/scan", LaunchConfiguration("scan")),
                    ("/odom", LaunchConfiguration("odom")),
                    ("/goal_pose", LaunchConfiguration("goal")),
                    ("/cmd_vel", LaunchConfiguration("cmd_vel")),
                    ("/plan", LaunchConfiguration("plan")),
                ],
            ),
        ]
    )
