"""The two ament_python packages, their launch files, and the node graphs they start (real rclpy).

``nav_policy`` is the robot package (policy node, robot.launch.py and sim.launch.py, policy.yaml);
``nav_policy_sim`` the simulation package (sim node, sim.yaml), which depends on nav_policy and the
training side. ``ros2 launch`` does not exist on these machines (no launch / launch_ros on PyPI), so
each launch file's ``generate_launch_description()`` runs against a recording stand-in of the launch
API (tests/support/ros.py), with both packages laid out as an install prefix built from their
wheels. From the recording we check that every executable is a console entry point of the package
the launch file names, every parameter file is the installed copy and parses, every parameter is
one the node declares, and every remapped topic is one the node uses; then we start that very node
graph as processes (the command lines launch_ros would run) and check that it works: robot.launch.py
with remapped topics, and sim.launch.py without arguments as the closed loop with the trained bundle
installed with the package (share/nav_policy/default_bundle, the launch files' default).
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

import support.ros as h
from nav_policy.paths import BUNDLE_ENV, default_bundle_dir, resolve_bundle
from navdeploy.runtime import PolicyRuntime
from navsim.outcomes import Outcome
from support.paths import FIXTURE_BUNDLE

LAUNCH_FILES = ("sim.launch.py", "robot.launch.py")  # both in nav_policy/launch
CLOSED_LOOP_SEED = 0  # sim.launch.py's default seed: rooms 0..4 of the sim node's generator
CLOSED_LOOP_EPISODES = 5
# What each package's nodes are (console scripts) and which config files it installs.
NODES = {"nav_policy": {"policy_node"}, "nav_policy_sim": {"sim_node"}}
CONFIGS = {"nav_policy": {"policy.yaml", "nav_policy.rviz"}, "nav_policy_sim": {"sim.yaml"}}
# rosdep keys for the Python libraries the packages' code imports (pip installs the rest).
PY_KEYS = {"python3-numpy", "python3-yaml"}
ROS_IMPORTS = ("rclpy", "launch", "launch_ros", "ament_index_python", "nav_policy")


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> Path:
    """Both packages' data files laid out as one pip/colcon install prefix (built from their wheels)."""
    return h.install_share_prefix(tmp_path_factory.mktemp("ros_install"))


@pytest.fixture(scope="module")
def robot_install(install: Path, tmp_path_factory) -> Path:
    """The same prefix without nav_policy_sim: what a robot installs."""
    prefix = tmp_path_factory.mktemp("robot_install") / "prefix"
    shutil.copytree(install, prefix, ignore=shutil.ignore_patterns("nav_policy_sim"))
    assert not list(prefix.rglob("*nav_policy_sim*"))
    return prefix


def _entry_points(install: Path, package: str) -> str:
    return (install.parent / "entry_points" / f"{package}.txt").read_text()


# --------------------------------------------------------------------------- packages


def _imported_ros_packages(package: str) -> set[str]:
    src = h.PACKAGES[package]
    files = [*(src / package).glob("*.py"), *(src / "launch").glob("*.py")]
    text = "\n".join(p.read_text() for p in files)
    used = set(re.findall(r"^\s*(?:from|import) (\w+)\.(?:msg|srv)\b", text, re.M))
    used |= {m for m in re.findall(r"^\s*(?:from|import) (\w+)", text, re.M) if m in ROS_IMPORTS}
    return used - {package}


@pytest.mark.parametrize("package", sorted(h.PACKAGES))
def test_package_xml_declares_exactly_what_the_package_imports(package: str) -> None:
    root = ET.parse(h.PACKAGES[package] / "package.xml").getroot()
    assert root.tag == "package" and root.get("format") == "3"
    assert root.findtext("name") == package
    assert root.find("export/build_type").text == "ament_python"
    assert root.findtext("buildtool_depend") == "ament_python"
    deps = {e.text for e in root if e.tag in ("depend", "exec_depend")}
    used = _imported_ros_packages(package)
    assert used <= deps, f"{package}: imported but not declared in package.xml: {sorted(used - deps)}"
    assert PY_KEYS <= deps
    # Nothing beyond what the code uses: the robot package declares no simulator dependency.
    assert deps - used - PY_KEYS == set(), f"{package}: declared but not used: {sorted(deps - used - PY_KEYS)}"
    if package == "nav_policy":
        assert "nav_policy_sim" not in deps and "rosgraph_msgs" not in deps
        assert not any(k in d for d in deps for k in ("torch", "mujoco", "warp")), deps
    else:
        assert {"nav_policy", "rclpy", "rosgraph_msgs"} <= deps  # the sim node uses nav_policy.ros_common


def test_install_layout_marker_share_and_entry_points(install: Path) -> None:
    assert not (h.REPO / "launch").exists(), "launch files live in the ROS package, not a top-level launch/"
    for package, src in h.PACKAGES.items():
        assert (install / "share/ament_index/resource_index/packages" / package).is_file()
        share = install / "share" / package
        assert (share / "package.xml").read_text() == (src / "package.xml").read_text()
        assert {f.name for f in (share / "config").iterdir()} == CONFIGS[package]
        for name in CONFIGS[package]:
            assert (share / "config" / name).read_text() == (src / "config" / name).read_text()
        eps = _entry_points(install, package)
        assert set(re.findall(r"^(\w+) = ", eps, re.M)) == NODES[package], eps
        for node in NODES[package]:
            assert f"{node} = {package}.{node}:main" in eps
            h.entry_point_script(node, package)  # and installed in this environment, from that package
        # colcon installs the scripts where ros2 run / launch_ros look for them
        cfg = (src / "setup.cfg").read_text()
        assert f"install_scripts=$base/lib/{package}" in cfg and f"script_dir=$base/lib/{package}" in cfg
    bundle_src = default_bundle_dir()
    assert bundle_src == h.PKG_SRC / "nav_policy" / "default_bundle"
    installed = install / "share/nav_policy/default_bundle"
    assert (
        {f.name for f in installed.iterdir()}
        == {f.name for f in bundle_src.iterdir()}
        >= {
            "policy.onnx",
            "contract.json",
            "PROVENANCE.json",
        }
    )
    for f in bundle_src.iterdir():
        assert (installed / f.name).read_bytes() == f.read_bytes(), f"default bundle {f.name}: share copy differs"
    launch = install / "share/nav_policy/launch"
    assert {f.name for f in launch.iterdir()} == set(LAUNCH_FILES)
    for name in LAUNCH_FILES:
        src = h.PKG_SRC / "launch" / name
        assert src.is_file() and not src.is_symlink(), f"{src} must be a real file"
        assert (launch / name).read_text() == src.read_text(), f"{name}: share copy differs"
    assert not (install / "share/nav_policy_sim/launch").exists()


# --------------------------------------------------------------------------- launch recordings


def _topic_params(files: list[Path]) -> dict[str, str]:
    out = {}
    for f in files:
        for section in yaml.safe_load(f.read_text()).values():
            out.update({k: v for k, v in section["ros__parameters"].items() if k.endswith("_topic")})
    return out


@pytest.mark.parametrize("name", LAUNCH_FILES)
def test_launch_file_nodes_are_entry_points_with_parsable_params_and_known_topics(install: Path, name: str) -> None:
    bundle = str(h.FIXTURE_BUNDLE)
    rec = h.record_launch(install / "share/nav_policy/launch" / name, {"bundle": bundle}, ament_prefix=install)
    assert rec.nodes, f"{name} starts no node"
    for node in rec.nodes:
        assert node.package in NODES and node.executable in NODES[node.package], (node.package, node.executable)
        eps = _entry_points(install, node.package)
        assert re.search(rf"^{node.executable} = {node.package}\.", eps, re.M), f"{node.executable} is no entry point"
        h.entry_point_script(node.executable, node.package)  # and installed in this environment
        assert node.param_files, f"{node.name}: no parameter file"
        for f in node.param_files:
            assert f.is_file(), f"{name}: parameter file {f} does not exist"
            assert f.is_relative_to(install / "share" / node.package), f"{f} is not {node.package}'s installed copy"
            data = yaml.safe_load(f.read_text())
            assert isinstance(data, dict) and data, f"{f}: empty"
            for key, section in data.items():
                assert key in ("/**", node.name) and isinstance(section.get("ros__parameters"), dict), f"{f}: {key}"
        assert node.params.get("bundle_path", bundle) == bundle
        topics = set(_topic_params(node.param_files).values()) | {"/clock"}
        for src, _ in node.remappings:
            assert src in topics, f"{name}: remapping of '{src}', which {node.executable} does not use ({topics})"
    if name == "robot.launch.py":
        (node,) = rec.nodes
        assert node.package == "nav_policy"
        assert {s for s, _ in node.remappings} == {"/scan", "/odom", "/goal_pose", "/cmd_vel", "/plan"}
        assert {"scan", "odom", "goal", "cmd_vel", "plan", "params_file", "bundle"} <= set(rec.arguments)
    else:
        assert {(n.package, n.executable) for n in rec.nodes} == {
            ("nav_policy_sim", "sim_node"),
            ("nav_policy", "policy_node"),
        }
        assert {"bundle", "seed", "use_sim_time"} <= set(rec.arguments)
        policy = next(n for n in rec.nodes if n.executable == "policy_node")
        sim = next(n for n in rec.nodes if n.executable == "sim_node")
        assert policy.params["use_sim_time"] is True and sim.params["seed"] == 0
        rec2 = h.record_launch(
            install / "share/nav_policy/launch" / name, {"seed": "7", "use_sim_time": "false"}, ament_prefix=install
        )
        assert next(n for n in rec2.nodes if n.executable == "sim_node").params["seed"] == 7
        assert next(n for n in rec2.nodes if n.executable == "policy_node").params["use_sim_time"] is False


@pytest.mark.parametrize("name", LAUNCH_FILES)
def test_without_arguments_the_launch_files_run_the_installed_default_bundle(
    install: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ros2 launch nav_policy sim.launch.py`` needs no argument: without ``bundle`` the launch sets no
    bundle_path, so the node takes its params file's (none in the installed policy.yaml), else
    $NAV_POLICY_BUNDLE, else the trained bundle installed with the package, and says which in its
    startup line; the ``bundle`` argument overrides them all."""
    path = install / "share/nav_policy/launch" / name
    monkeypatch.delenv(BUNDLE_ENV, raising=False)

    def policy_params(rec: h.RecordedLaunch) -> dict:
        return next(n for n in rec.nodes if n.executable == "policy_node").params

    rec = h.record_launch(path, {}, ament_prefix=install)
    assert "bundle_path" not in policy_params(rec)
    files = next(n for n in rec.nodes if n.executable == "policy_node").param_files
    assert all(yaml.safe_load(f.read_text())["/**"]["ros__parameters"]["bundle_path"] == "" for f in files)
    assert resolve_bundle("") == (default_bundle_dir(), "the installed default bundle")
    rt = PolicyRuntime.load(default_bundle_dir())
    installed = PolicyRuntime.load(install / "share/nav_policy/default_bundle")
    assert rt.contract.fingerprint == installed.contract.fingerprint
    assert resolve_bundle("", {BUNDLE_ENV: "/from/env"}) == (Path("/from/env"), f"${BUNDLE_ENV}")
    given = str(h.FIXTURE_BUNDLE)
    assert policy_params(h.record_launch(path, {"bundle": given}, ament_prefix=install))["bundle_path"] == given


def test_robot_install_runs_robot_launch_and_refuses_sim_launch_saying_why(robot_install: Path) -> None:
    """Without nav_policy_sim (a robot), robot.launch.py works and sim.launch.py stops with one clear
    line, at launch time (an OpaqueFunction), so ros2 launch prints launch's one error line, exit 1."""
    launch = robot_install / "share/nav_policy/launch"
    (node,) = h.record_launch(launch / "robot.launch.py", {}, ament_prefix=robot_install).nodes
    assert (node.package, node.executable) == ("nav_policy", "policy_node")
    with pytest.raises(h.LaunchFailed) as failed:
        h.record_launch(launch / "sim.launch.py", {}, ament_prefix=robot_install)
    line = _one_line(failed.value)
    assert "needs the nav_policy_sim package" in line and "robot.launch.py" in line


def _one_line(failed: h.LaunchFailed) -> str:
    assert failed.return_code == 1 and "\n" not in failed.line, failed.line
    assert failed.line.startswith("[ERROR] [launch]: Caught exception in launch")
    return failed.line


def test_undeclared_launch_argument_is_ignored_as_by_ros2_launch(install: Path) -> None:
    rec = h.record_launch(install / "share/nav_policy/launch/robot.launch.py", {"sacn": "/x"}, ament_prefix=install)
    assert rec.ignored == ["sacn"]
    (node,) = rec.nodes
    assert ("/scan", "/scan") in node.remappings  # the typo changed nothing


def test_bool_launch_argument_is_coerced_as_launch_does(install: Path) -> None:
    """A bool launch argument reads as launch coerces a bool ParameterValue (Iron and later): 1 / 0, else
    a YAML boolean, else it is refused in one line naming the argument and what it accepts."""
    path = install / "share/nav_policy/launch/sim.launch.py"
    for text, want in (("true", True), ("False", False), ("TRUE", True), ("yes", True), ("1", True), ("0", False)):
        rec = h.record_launch(path, {"use_sim_time": text}, ament_prefix=install)
        assert next(n for n in rec.nodes if n.executable == "policy_node").params["use_sim_time"] is want, text
        assert h._coerce(text, bool) is want  # the stand-in's ParameterValue coercion agrees
    for text in ("maybe", "2", "", "tRuE"):
        with pytest.raises(h.LaunchFailed) as failed:
            h.record_launch(path, {"lockstep": text}, ament_prefix=install)
        assert f"launch argument lockstep:={text!r}" in _one_line(failed.value) and "true or false" in failed.value.line
    with pytest.raises(ValueError, match="Cannot convert value 'maybe'"):
        h._coerce("maybe", bool)


WRONG_ARGUMENTS = [
    ("sim.launch.py", "num_episodes", "abc", "a whole number >= 0 (0: endless)"),
    ("sim.launch.py", "num_episodes", "-1", "a whole number >= 0"),
    ("sim.launch.py", "seed", "1.5", "a whole number >= 0"),
    ("sim.launch.py", "lockstep", "maybe", "true or false (also 1 / 0)"),
    ("sim.launch.py", "real_time_factor", "fast", "a number in [0, 1e+06]"),
    ("sim.launch.py", "real_time_factor", "nan", "a number in [0, 1e+06]"),
    ("sim.launch.py", "lockstep_timeout", "0", "a number in (0, 60]"),
    ("sim.launch.py", "controller", "foo", "one of policy | dwa"),
    ("sim.launch.py", "bundle", "/nonexistent", "no such folder"),
    ("sim.launch.py", "sim_params_file", "/nonexistent.yaml", "no such file"),
    ("sim.launch.py", "enable_stamped_cmd_vel", "perhaps", "true or false"),
    ("sim.launch.py", "robot_base", "rover", "a preset (holonomic_disc | "),
    ("robot.launch.py", "controller", "foo", "one of policy | dwa"),
    ("robot.launch.py", "bundle", "/nonexistent", "no such folder"),
    ("robot.launch.py", "use_sim_time", "maybe", "true or false"),
    ("robot.launch.py", "params_file", "/nonexistent.yaml", "no such file"),
    ("robot.launch.py", "scan", "1lidar", "a ROS topic name"),
    ("robot.launch.py", "cmd_vel", "/base/", "a ROS topic name"),
    ("robot.launch.py", "plan", "", "a ROS topic name"),
    ("robot.launch.py", "robot_base", "rover", "a preset (holonomic_disc | "),
    ("robot.launch.py", "robot_base", "/nonexistent.yaml", "does not exist"),
]


@pytest.mark.parametrize(("name", "arg", "value", "accepts"), WRONG_ARGUMENTS)
def test_a_wrong_launch_argument_is_named_in_one_line_before_any_node(
    install: Path, name: str, arg: str, value: str, accepts: str
) -> None:
    with pytest.raises(h.LaunchFailed) as failed:
        h.record_launch(install / "share/nav_policy/launch" / name, {arg: value}, ament_prefix=install)
    line = _one_line(failed.value)
    assert f"launch argument {arg}:={value!r}" in line and accepts in line, line


def test_a_bundle_folder_without_a_policy_is_refused(install: Path, tmp_path: Path) -> None:
    with pytest.raises(h.LaunchFailed) as failed:
        h.record_launch(
            install / "share/nav_policy/launch/robot.launch.py", {"bundle": str(tmp_path)}, ament_prefix=install
        )
    assert "holds no policy.onnx" in _one_line(failed.value)


def test_launch_arguments_reach_the_nodes_typed(install: Path) -> None:
    """What the checked arguments become: typed parameters (a whole number, a float, bools) and remaps."""
    rec = h.record_launch(
        install / "share/nav_policy/launch/sim.launch.py",
        {"seed": "7", "num_episodes": "3", "real_time_factor": "0", "lockstep": "1", "enable_stamped_cmd_vel": "true"},
        ament_prefix=install,
    )
    sim = next(n for n in rec.nodes if n.executable == "sim_node")
    policy = next(n for n in rec.nodes if n.executable == "policy_node")
    assert sim.params["seed"] == 7 and sim.params["num_episodes"] == 3 and sim.params["lockstep"] is True
    assert sim.params["real_time_factor"] == 0.0 and isinstance(sim.params["real_time_factor"], float)
    assert sim.params["enable_stamped_cmd_vel"] is True and policy.params["enable_stamped_cmd_vel"] is True
    assert policy.params["controller"] == "policy"
    robot = h.record_launch(
        install / "share/nav_policy/launch/robot.launch.py",
        {"controller": "dwa", "plan": "/planner/plan", "enable_stamped_cmd_vel": "0"},
        ament_prefix=install,
    )
    (node,) = robot.nodes
    assert node.params["controller"] == "dwa" and node.params["enable_stamped_cmd_vel"] is False
    assert ("/plan", "/planner/plan") in node.remappings
    plain = h.record_launch(install / "share/nav_policy/launch/robot.launch.py", {}, ament_prefix=install)
    assert not {"enable_stamped_cmd_vel", "robot_base"} & set(plain.nodes[0].params)  # not given: the params file's
    based = h.record_launch(
        install / "share/nav_policy/launch/robot.launch.py", {"robot_base": "jackal"}, ament_prefix=install
    )
    assert based.nodes[0].params["robot_base"] == "jackal"


def test_sim_launch_simulates_the_given_base_else_the_bundles(install: Path) -> None:
    """robot_base:= goes to both nodes (the policy node checks its bundle against it); without it the
    sim takes the given bundle folder's base, and with neither the sim config's ("")."""
    path = install / "share/nav_policy/launch/sim.launch.py"

    def params(args: dict[str, str]) -> tuple[dict, dict]:
        rec = h.record_launch(path, args, ament_prefix=install)
        sim = next(n for n in rec.nodes if n.executable == "sim_node")
        return sim.params, next(n for n in rec.nodes if n.executable == "policy_node").params

    sim, policy = params({"robot_base": "jackal"})
    assert sim["robot_base"] == "jackal" and policy["robot_base"] == "jackal"
    sim, policy = params({"bundle": str(FIXTURE_BUNDLE)})
    assert sim["robot_base"] == str(FIXTURE_BUNDLE) and "robot_base" not in policy
    sim, policy = params({})
    assert sim["robot_base"] == "" and "robot_base" not in policy


def test_sim_launch_ends_with_its_nodes(install: Path) -> None:
    """The sim node's episodes done, or either node dead: the whole launch shuts down; a failure gives a
    non-zero launch exit code (launch's OnProcessExit + Shutdown, as LaunchService runs them). Only the
    first exit counts: the other node, stopped by the shutdown, ends quietly whatever its code."""
    path = install / "share/nav_policy/launch/sim.launch.py"
    rec = h.record_launch(path, {}, ament_prefix=install)
    assert {id(hd.target_action) for hd in rec.exit_handlers} == {id(n.action) for n in rec.nodes}
    done = rec.process_exited("sim_node", 0)
    assert done.shutdown and done.return_code == 0 and "sim_node exited" in done.reason
    assert rec.process_exited("policy_node", 0) == h.LaunchReaction(False, 0, "")  # stopped by the shutdown

    rec = h.record_launch(path, {}, ament_prefix=install)
    died = rec.process_exited("policy_node", 2)
    assert died.shutdown and died.return_code == 1 and "policy_node exited with code 2" in died.reason
    assert "\n" not in died.reason
    assert rec.process_exited("sim_node", -2) == h.LaunchReaction(False, 0, "")  # no second "Caught exception"

    assert h.record_launch(path, {}, ament_prefix=install).process_exited("sim_node", -9).return_code == 1
    robot = h.record_launch(install / "share/nav_policy/launch/robot.launch.py", {}, ament_prefix=install)
    assert robot.process_exited("policy_node", 0) == h.LaunchReaction(False, 0, "")  # ends by itself
    failed = robot.process_exited("policy_node", 2)
    assert failed.shutdown and failed.return_code == 1 and "policy_node exited with code 2" in failed.reason


def test_rviz_config_shows_raw_scan_policy_scan_goal_and_command(install: Path) -> None:
    text = (install / "share/nav_policy/config/nav_policy.rviz").read_text()
    cfg = yaml.safe_load(text)
    topics = {d["Topic"]["Value"]: d["Class"] for d in cfg["Visualization Manager"]["Displays"] if "Topic" in d}
    params = yaml.safe_load((h.PKG_SRC / "config/policy.yaml").read_text())["/**"]["ros__parameters"]
    assert topics[params["scan_topic"]] == "rviz_default_plugins/LaserScan"
    assert topics[params["policy_scan_topic"]] == "rviz_default_plugins/LaserScan"
    assert topics[params["goal_topic"]] == "rviz_default_plugins/Pose"
    assert topics[params["cmd_arrow_topic"]] == "rviz_default_plugins/Pose"


# --------------------------------------------------------------------------- running graphs


def _declared_parameters(tn: h.RosSide, node_name: str, procs) -> set[str]:
    from rcl_interfaces.srv import ListParameters

    client = tn.node.create_client(ListParameters, f"/{node_name}/list_parameters")
    tn.spin_until(client.service_is_ready, 30, f"/{node_name}/list_parameters", procs)
    fut = client.call_async(ListParameters.Request())
    tn.spin_until(fut.done, 10, f"{node_name} parameter list", procs)
    tn.node.destroy_client(client)
    return set(fut.result().result.names)


def _check_params_declared(tn, rec_node: h.RecordedNode, procs) -> None:
    declared = _declared_parameters(tn, rec_node.name, procs)
    given = set(rec_node.params)
    for f in rec_node.param_files:
        for section in yaml.safe_load(f.read_text()).values():
            given |= set(section["ros__parameters"])
    assert given <= declared, f"{rec_node.name}: parameters not declared by the node: {sorted(given - declared)}"


@pytest.mark.ros
@pytest.mark.slow
def test_robot_launch_graph_runs_with_remapped_topics(install: Path, tmp_path: Path) -> None:
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import LaserScan

    from nav_policy.ros_common import GOAL_QOS, SENSOR_QOS

    bundle = h.write_goal_seeking_bundle(tmp_path / "bundle")
    remap = {"scan": "/robot1/lidar", "odom": "/robot1/odom", "goal": "/robot1/goal", "cmd_vel": "/robot1/cmd"}
    rec = h.record_launch(
        install / "share/nav_policy/launch/robot.launch.py", {"bundle": str(bundle), **remap}, ament_prefix=install
    )
    (node,) = rec.nodes
    lease = h.DomainLease()
    try:
        with h.node_processes() as procs:
            procs.append(h.NodeProc(h.node_command(node, tmp_path), lease.domain_id, tmp_path / "policy.log"))
            tn = h.RosSide(lease.domain_id, "nav_policy_test")
            try:
                n = tn.node
                scan_pub = n.create_publisher(LaserScan, remap["scan"], SENSOR_QOS)
                odom_pub = n.create_publisher(Odometry, remap["odom"], 10)
                goal_pub = n.create_publisher(PoseStamped, remap["goal"], GOAL_QOS)
                cmds = []
                n.create_subscription(Twist, remap["cmd_vel"], lambda m: cmds.append(m.linear.x), 10)
                tn.spin_until(
                    lambda: scan_pub.get_subscription_count() and odom_pub.get_subscription_count() and cmds,
                    30,
                    "the policy node on the remapped topics",
                    procs,
                )
                _check_params_declared(tn, node, procs)
                tn.spin_until(lambda: node.name in n.get_node_names(), 10, "the node in the graph", procs)
                names = {t for t, _ in n.get_subscriber_names_and_types_by_node(node.name, "/")}
                assert {remap["scan"], remap["odom"], remap["goal"]} <= names, names
                assert not names & {"/scan", "/odom", "/goal_pose"}
                goal = PoseStamped()
                goal.header.frame_id = "odom"
                goal.pose.position.x = 2.0
                tn.spin_until(lambda: goal_pub.get_subscription_count() > 0, 10, "goal subscriber", procs)
                goal_pub.publish(goal)

                def moving() -> bool:
                    now = n.get_clock().now().to_msg()
                    s = LaserScan(angle_min=-3.14159265, angle_increment=0.0872664626, range_min=0.1, range_max=6.0)
                    s.header.stamp, s.header.frame_id, s.ranges = now, "base_link", [3.0] * 72
                    o = Odometry()
                    o.header.stamp, o.header.frame_id = now, "odom"
                    o.pose.pose.orientation.w = 1.0
                    scan_pub.publish(s)
                    odom_pub.publish(o)
                    return bool(cmds) and cmds[-1] > 1.0

                tn.spin_until(moving, 20, "a forward command on the remapped cmd_vel", procs)
                # SIGTERM: the node's last word is a zero command, and it exits cleanly
                n_before = len(cmds)
                procs[0].popen.send_signal(15)
                tn.spin_until(lambda: procs[0].popen.poll() is not None, 10, "the node to exit on SIGTERM")
                tn.spin_until(lambda: len(cmds) > n_before and cmds[-1] == 0.0, 5, "the final zero command")
                assert procs[0].popen.returncode == 0, procs[0].output()[-2000:]
            finally:
                tn.close()
    finally:
        lease.release()


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("controller", ["policy", "dwa"])
def test_sim_launch_closed_loop_reaches_goals(
    install: Path, tmp_path: Path, controller: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sim node + policy node from sim.launch.py with its default bundle (the trained one installed
    with the package), five rooms; the dynamic-window baseline (controller:=dwa) drives the same
    loop from the same bundle's contract."""
    from std_msgs.msg import String

    from nav_policy.ros_common import EVENT_QOS

    monkeypatch.delenv(BUNDLE_ENV, raising=False)
    args = {
        "num_episodes": str(CLOSED_LOOP_EPISODES),
        "lockstep": "true",
        "controller": controller,
    }
    rec = h.record_launch(install / "share/nav_policy/launch/sim.launch.py", args, ament_prefix=install)
    policy_node = next(n for n in rec.nodes if n.executable == "policy_node")
    assert policy_node.params["controller"] == controller
    assert "bundle_path" not in policy_node.params  # the node resolves the installed default itself
    lease = h.DomainLease()
    try:
        with h.node_processes() as procs:
            tn = h.RosSide(lease.domain_id, "nav_policy_test")
            try:
                episodes = []
                tn.node.create_subscription(
                    String, "/sim/episode", lambda m: episodes.append(json.loads(m.data)), EVENT_QOS
                )
                # The sim node starts alone and its parameters are checked while it waits for a
                # policy node: in lockstep it finishes its episodes, and exits, within seconds of
                # the policy node connecting. The policy node stays up until it is stopped.
                for node in sorted(rec.nodes, key=lambda nd: nd.executable != "sim_node"):
                    cmd = h.node_command(node, tmp_path)
                    procs.append(h.NodeProc(cmd, lease.domain_id, tmp_path / f"{node.name}.log"))
                    _check_params_declared(tn, node, procs)
                sim = procs[0]
                tn.spin_until(
                    lambda: len(episodes) >= CLOSED_LOOP_EPISODES,
                    240,
                    "five episodes",
                    [p for p in procs if p is not sim],
                )
                assert sim.popen.wait(30) == 0, sim.output()[-3000:]
            finally:
                tn.close()
            full = "\n".join(p.output() for p in procs)
            logs = "\n".join(p.output()[-2500:] for p in procs)
    finally:
        lease.release()
    assert "(the installed default bundle; fingerprint" in full, logs
    assert "clock_stalled" not in full  # the sim's normal end is clock_ended (if the node saw it), no fault
    outcomes = [e["outcome"] for e in episodes]
    print("closed loop:", json.dumps(episodes, indent=None))
    assert [e["seed"] for e in episodes] == list(range(CLOSED_LOOP_SEED, CLOSED_LOOP_SEED + CLOSED_LOOP_EPISODES))
    reached = outcomes.count(Outcome.SUCCESS)
    assert Outcome.COLLISION not in outcomes, f"collision in the closed loop: {episodes}\n{logs}"
    assert reached >= 4, f"goal reached in {reached}/5: {episodes}\n{logs}"
    assert all(e["sim_time_s"] <= 30.0 for e in episodes)


@pytest.mark.ros
@pytest.mark.slow
def test_sim_launch_with_a_bundle_that_does_not_load_shuts_down_failed(install: Path, tmp_path: Path) -> None:
    """A bundle folder whose policy.onnx is no ONNX file (the launch's check sees a policy.onnx): the
    policy node dies at startup with its one line; the launch then stops the sim node, which exits
    0 without a traceback, and exits 1 with one line; the sim node's own exit says nothing more. The
    processes are real; what launch does on each exit is the launch file's handler, run as
    LaunchService runs it."""
    broken = tmp_path / "broken_bundle"
    broken.mkdir()
    (broken / "policy.onnx").write_bytes(b"not an onnx file")
    rec = h.record_launch(
        install / "share/nav_policy/launch/sim.launch.py",
        {"bundle": str(broken), "lockstep": "true"},
        ament_prefix=install,
    )
    lease = h.DomainLease()
    try:
        with h.node_processes() as procs:
            by_name = {}
            for node in rec.nodes:
                proc = h.NodeProc(h.node_command(node, tmp_path), lease.domain_id, tmp_path / f"{node.name}.log")
                procs.append(proc)
                by_name[node.name] = proc
            code = by_name["policy_node"].popen.wait(60)
            out = by_name["policy_node"].output()
            assert code == 2 and f"cannot load bundle '{broken}'" in out and "Traceback" not in out, out[-2000:]
            assert len([ln for ln in out.splitlines() if "startup failed" in ln]) == 1
            reaction = rec.process_exited("policy_node", code)
            assert reaction.shutdown and reaction.return_code == 1 and "\n" not in reaction.reason
            sim = by_name["sim_node"]
            assert sim.alive()  # launch's Shutdown is what stops it: SIGINT, wherever it is (importing or running)
            sim.popen.send_signal(2)
            sim_code = sim.popen.wait(30)
            assert sim_code == 0 and "Traceback" not in sim.output(), sim.output()[-3000:]
            assert rec.process_exited("sim_node", sim_code) == h.LaunchReaction(False, 0, "")
    finally:
        lease.release()
