"""ROS 2 simulation package of nav_policy: one training world (C MuJoCo) behind /scan, /odom, /clock and /cmd_vel."""
