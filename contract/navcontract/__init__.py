"""The contract of a nav_policy bundle: what training and the robot must agree on.

Defined once and imported by both sides: the observation terms and spec (``terms``, ``spec``), the
beam layout and scan rule (``scan``), the action scaling (``action``), the collision guard
(``guard``), the path-following rule (``subgoal``), the base's trained response (``response``), and
the bundle that carries them (``bundle``: ``policy.onnx`` + ``contract.json``). Every rule is
written once for numpy and torch (``xp``). This package imports numpy only (onnxruntime to read a
bundle's metadata); it never imports torch or the training code, and reads no training-config key.
"""
