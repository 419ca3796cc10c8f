"""Simulation and training side of nav_policy.

Importing the package imports nothing heavy: ``navsim.robot`` and ``navsim.rooms`` need only numpy
and mujoco (the ROS 2 sim node uses them); the batched environment lives in ``navsim.env``.
"""
