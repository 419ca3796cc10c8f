"""Rosbag2 recording and replay for the nav_policy node (issue 6).

- :mod:`navbags.bagio`: the topics a nav_policy bag holds, and reading / writing real rosbag2 bags
  (MCAP storage) with the pure-Python ``rosbags`` library.
- :mod:`navbags.reference`: the offline reference: the bag's inputs, event by event, through the
  deploy runtime and the node's documented safety rules (numpy + onnxruntime + rosbags, no ROS).
- :mod:`navbags.rosproc`: loopback-only DDS settings, private domain ids, node processes with a
  SIGTERM -> SIGKILL fallback.
- :mod:`navbags.record`: runs the sim node and the policy node in lockstep through a relay that can
  inject faults, and records what the policy node saw and said.
- :mod:`navbags.replay`: plays a bag's inputs into a live policy node, tick by tick, and compares
  every command with the recorded one and with the offline reference.
"""
