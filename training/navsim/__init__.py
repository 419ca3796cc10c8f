"""Simulation side of nav_policy: the batched MuJoCo Warp env and the one-room C MuJoCo world.

Importing the package imports nothing heavy. ``navsim.sim_world`` (the ROS 2 sim node's world,
C MuJoCo) needs mujoco, numpy and torch (the room generator), not Warp; the batched environment
lives in ``navsim.env``. The observation contract, the beam layout and the action scaling come
from the robot side (``navdeploy``); this package imports them, never the other way round.
"""
