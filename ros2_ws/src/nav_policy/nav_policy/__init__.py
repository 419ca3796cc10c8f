"""nav_policy ROS 2 package: the policy node (deploy runtime, no torch) and the MuJoCo sim node."""
