"""ament_python package nav_policy (the robot side: policy node, launch files, config): builds with colcon and installs with pip.

colcon (a ROS 2 install) runs ``setup.py develop/install``, which honours setup.cfg and puts the
console scripts in lib/nav_policy, where ``ros2 run`` / launch_ros look for them. ``pip install``
(with the PyPI rclpy wheels) builds a wheel instead: pip writes the console scripts to the venv's
bin/ from the entry points. The data files land under <prefix>/share in both cases, so the ament
index marker makes the package findable with AMENT_PREFIX_PATH=<prefix>.

The trained bundles (``nav_policy/default_bundle/``, the holonomic default, and
``nav_policy/<preset>_bundle/`` for each other base preset one is shipped for: policy.onnx,
contract.json, export_check.json, PROVENANCE.json, and evaluation files when there are any) are
package data, so the node finds them beside its own module in every kind of install (editable
included); they are also installed to <prefix>/share/nav_policy/<folder>.
"""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "nav_policy"
HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLES = sorted(
    os.path.basename(p) for p in glob(os.path.join(HERE, PACKAGE, "*_bundle")) if os.path.isdir(p)
)  # default_bundle and <preset>_bundle


def rel(pattern):
    """Paths relative to this file for data_files (symlinks are followed when copying)."""
    return sorted(os.path.relpath(p, HERE) for p in glob(os.path.join(HERE, pattern)))


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: [b + "/*" for b in BUNDLES]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/config", rel("config/*.yaml") + rel("config/*.rviz")),
        ("share/" + PACKAGE + "/launch", rel("launch/*.launch.py")),
        *(
            (
                "share/" + PACKAGE + "/" + b,
                [p for p in rel(PACKAGE + "/" + b + "/*") if os.path.isfile(os.path.join(HERE, p))],
            )
            for b in BUNDLES
        ),
    ],
    install_requires=["setuptools"],
    zip_safe=False,  # the bundles are read from files beside the module
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
