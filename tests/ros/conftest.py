"""Tests of the ROS nodes that are driven by a trained policy or the simulator: the simulator and training fixtures of :mod:`support.simenv`."""

from support.simenv import exported_bundle, make_env, obstacle_free_env, train_config, trained_checkpoint  # noqa: F401  (pytest fixtures)
