"""The robot side installs and runs without the training side.

What runs on the robot: the ``navdeploy`` runtime (deploy/) and the ``nav_policy`` ROS package
(ros2_ws/src/nav_policy). Three checks, from cheapest to most real:

1. every import statement in those sources names the standard library, numpy, scipy, pyyaml,
   onnxruntime, ROS 2 client/message packages or the robot side itself;
2. a fresh interpreter that refuses to import torch, mujoco, warp or any training/tool package
   imports every robot module and steps the runtime on the fixture bundle;
3. (slow) a new virtual environment with only the robot's dependencies (pins from
   requirements.txt) installs both and imports ``nav_policy.policy_node``.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROBOT_SOURCES = [
    REPO / "contract" / "navcontract",
    REPO / "deploy" / "navdeploy",
    REPO / "ros2_ws" / "src" / "nav_policy",
]
FORBIDDEN = ("torch", "mujoco", "mujoco_warp", "warp", "rsl_rl", "tensordict", "onnx", "matplotlib")
FORBIDDEN += ("navsim", "navtrain", "navbags", "nav_policy_sim", "rosbags")
ROBOT_THIRD_PARTY = {"numpy", "scipy", "yaml", "onnxruntime", "rclpy", "ament_index_python", "launch", "launch_ros"}
ROBOT_THIRD_PARTY |= {"geometry_msgs", "nav_msgs", "sensor_msgs", "std_msgs", "rcl_interfaces", "builtin_interfaces"}
ROBOT_OWN = {"navcontract", "navdeploy", "nav_policy"}
# The robot's PyPI distributions: the runtime's declared dependencies plus the ROS 2 client wheels.
ROS_WHEELS = (
    "ros-rclpy",
    "ros-rmw-fastrtps-cpp",
    "ros-sensor-msgs",
    "ros-geometry-msgs",
    "ros-nav-msgs",
    "ros-std-msgs",
)


def robot_files() -> list[Path]:
    files = [p for root in ROBOT_SOURCES for p in sorted(root.rglob("*.py")) if "egg-info" not in str(p)]
    assert len(files) >= 10, files
    return files


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_robot_sources_import_only_robot_dependencies() -> None:
    allowed = set(sys.stdlib_module_names) | ROBOT_THIRD_PARTY | ROBOT_OWN | {"setuptools"}
    bad = {}
    for path in robot_files():
        extra = imported_roots(path) - allowed
        if extra:
            bad[str(path.relative_to(REPO))] = sorted(extra)
    assert not bad, f"robot-side modules import outside the robot's dependencies: {bad}"


BLOCKED_PROBE = """
import importlib, pkgutil, sys

FORBIDDEN = {forbidden!r}

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            raise ImportError(f"robot side imported {{name}}")
        return None

sys.meta_path.insert(0, Refuse())
import navcontract, navdeploy, nav_policy
names = []
for pkg in (navcontract, navdeploy, nav_policy):
    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(info.name)
        names.append(info.name)
from navdeploy.runtime import PolicyRuntime
from navcontract.scan import ScanInput
rt = PolicyRuntime.load({bundle!r})
cmd = rt.step(ScanInput.training_beams([3.0] * rt.contract.num_beams, rt.contract.num_beams), pose=(0, 0, 0),
              twist=(0, 0, 0), goal=(2.0, 1.0))
assert len(cmd) == 3
print(",".join(sorted(names)))
"""


def test_every_robot_module_imports_and_steps_with_the_training_side_refused() -> None:
    code = BLOCKED_PROBE.format(forbidden=set(FORBIDDEN), bundle=str(REPO / "tests" / "fixtures" / "bundle"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr[-3000:]
    modules = set(out.stdout.strip().splitlines()[-1].split(","))
    assert {"navcontract.bundle", "navdeploy.runtime", "navdeploy.gate", "nav_policy.policy_node"} <= modules


def robot_pins() -> list[str]:
    """``name==version`` for the runtime's dependencies and the ROS wheels, taken from requirements.txt."""
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    deps = tomllib.loads((REPO / "deploy" / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [d.split(";")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower() for d in deps]
    names = [n for n in names if not n.startswith("nav-policy-")]  # the project's own, installed from source
    missing = [n for n in (*names, *ROS_WHEELS) if n not in pins]
    assert not missing, f"requirements.txt pins no version for {missing}"
    return [f"{n}=={pins[n]}" for n in (*names, *ROS_WHEELS)]


@pytest.mark.slow
def test_robot_package_installs_and_imports_in_a_venv_without_the_training_side(tmp_path: Path) -> None:
    venv = tmp_path / "robot"
    # A venv without pip of its own: this environment's pip installs into it (--python), without
    # compiling bytecode, and builds the project's sources with the setuptools installed there.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def pip(*args: str) -> None:
        command = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-compile", *args]
        out = subprocess.run(command, capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr[-3000:]

    pip(*robot_pins(), "setuptools")
    # Build from copies: setuptools writes build/ folders into the source it installs from.
    sources = [tmp_path / "contract", tmp_path / "deploy", tmp_path / "nav_policy"]
    for src, dst in zip(("contract", "deploy"), sources, strict=False):
        shutil.copytree(REPO / src, dst, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    shutil.copytree(
        REPO / "ros2_ws" / "src" / "nav_policy", sources[2], ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    pip("--no-deps", "--no-build-isolation", *map(str, sources))
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "list"], capture_output=True, text=True, env=env
    ).stdout.lower()
    for heavy in ("torch", "mujoco", "warp-lang", "rsl-rl-lib", "nav-policy-training"):
        assert f"\n{heavy} " not in listed, f"{heavy} is installed in the robot venv"
    probe = textwrap.dedent(
        """
        import sys
        import nav_policy.policy_node
        from navdeploy.runtime import PolicyRuntime
        PolicyRuntime.load(sys.argv[1])
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "mujoco", "warp", "navsim", "navtrain"))
        print("imported", heavy)
        """
    )
    out = subprocess.run(
        [str(py), "-c", probe, str(REPO / "tests" / "fixtures" / "bundle")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "imported []" in out.stdout
