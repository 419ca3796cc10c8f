"""ament_python package nav_policy (the robot side: policy node, launch files, config): builds with colcon and installs with pip.

colcon (a ROS 2 install) runs ``setup.py develop/install``, which honours setup.cfg and puts the
console scripts in lib/nav_policy, where ``ros2 run`` / launch_ros look for them. ``pip install``
(with the PyPI rclpy wheels) builds a wheel instead: pip writes the console scripts to the venv's
bin/ from the entry points. The data files land under <prefix>/share in both cases, so the ament
index marker makes the package findable with AMENT_PREFIX_PATH=<prefix>.
"""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "nav_policy"
HERE = os.path.dirname(os.path.abspath(__file__))


def rel(pattern):
    """Paths relative to this file for data_files (symlinks are followed when copying)."""
    return sorted(os.path.relpath(p, HERE) for p in glob(os.path.join(HERE, pattern)))


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/config", rel("config/*.yaml") + rel("config/*.rviz")),
        ("share/" + PACKAGE + "/launch", rel("launch/*.launch.py")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="nav_policy maintainers",
    maintainer_email="nav-policy@example.com",
    description="Lidar navigation policy node (numpy + onnxruntime, no torch)",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "policy_node = nav_policy.policy_node:main",
        ],
    },
)
