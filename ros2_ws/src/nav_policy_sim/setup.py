"""ament_python package nav_policy_sim: the simulation node (needs the training side: torch, mujoco).

Builds with colcon (console scripts in lib/nav_policy_sim, where launch_ros looks) and installs with
pip (console scripts in the venv's bin/). The robot never installs this package.
"""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "nav_policy_sim"
HERE = os.path.dirname(os.path.abspath(__file__))


def rel(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob(os.path.join(HERE, pattern)))


setup(
    name=PACKAGE,
    version="0.2.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/config", rel("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="nav_policy maintainers",
    maintainer_email="nav-policy@example.com",
    description="MuJoCo simulation node that closes the loop with the nav_policy node",
    license="Apache-2.0",
    entry_points={"console_scripts": ["sim_node = nav_policy_sim.sim_node:main"]},
)
