"""Training side of nav_policy: PPO (rsl_rl) on the navsim worlds, evaluation, export to a bundle.

Command-line entry points are the ``*_cli`` modules and the modules whose ``main`` a console script
names (``training/pyproject.toml``); the rest is library.
"""
