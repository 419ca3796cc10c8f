"""Rosbag2 recording and replay for the nav_policy node (distribution nav-policy-bags, bags/).

Command-line tools (console scripts, or ``python -m``): ``nav-bag-record`` (:mod:`navbags.record_cli`),
``nav-bag-replay`` (:mod:`navbags.replay_cli`), ``nav-benchmark-latency`` (:mod:`navbags.latency`).

- :mod:`navbags.bagio`: the topics a nav_policy bag holds, and reading / writing real rosbag2 bags
  (MCAP storage) with the pure-Python ``rosbags`` library.
- :mod:`navbags.reference`: the offline reference: the bag's inputs, event by event, through the
  node's own command gate (``navdeploy.gate``) and the deploy runtime (numpy +
  onnxruntime + rosbags, no ROS).
- :mod:`navbags.rosproc`: loopback-only DDS settings, private domain ids, node processes with a
  SIGTERM -> SIGKILL fallback (also what the ROS tests use).
- :mod:`navbags.record`: runs the sim node and the policy node in lockstep through a relay that can
  inject faults, and records what the policy node saw and said.
- :mod:`navbags.timeline`: what a replay publishes: a nav_policy bag as recorded, or a third-party
  bag (no ``/clock``, its own topic names) mapped onto the node's inputs on a tick grid of its stamps.
- :mod:`navbags.replay`: plays a bag's inputs into a live policy node, tick by tick, and compares
  every command with the recorded one and with the offline reference.

Both tools refuse an unusable bag, bundle or output folder with one line (``BagError``), exit 2.
"""
