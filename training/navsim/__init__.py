"""Simulation side of nav_policy: the batched MuJoCo Warp env and the one-room C MuJoCo world.

Importing the package imports nothing heavy. ``navsim.config`` is the configuration schema (it
imports nothing of the simulator), ``navsim.config_load`` loads it, ``navsim.contract_objects``
turns it into the contract's typed objects; ``navsim.sim_world`` (the ROS 2 sim node's world, C
MuJoCo) needs mujoco, numpy and torch (the world generators), not Warp; the batched environment
lives in ``navsim.env``. The observation terms, the beam layout, the scan rule and the action
scaling come from the contract package (``navcontract``); this package imports it, never the other
way round.
"""
