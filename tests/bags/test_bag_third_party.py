"""Replaying a bag someone else recorded (issue 10 item 6): no /clock, no /cmd_vel, topics of its own.

Each test writes its bag itself with the plain ``rosbags`` writer (``support.bag_shapes``: default
sqlite3 storage, stock message definitions, no QoS, no custom data), shaped like a robot's recording: a 1081-beam 270 degree
``LaserScan`` on ``/lidar/scan`` at about 15 Hz with jittered stamps, ``nav_msgs/Odometry`` on
``/wheel/odom`` at 50 Hz in frame ``wheel_odom`` with its own stamps, receive times a few ms after the
stamps, and a topic the node does not read. The replay (docs/bags.md, "Third-party bags") ticks on a
0.1 s grid of the header stamps, publishes the newest scan / odometry before each tick, takes the goal
from ``--goal`` (or the bag), and compares every command with the offline reference only.

Tolerance: none. The comparison is exact (max |node - offline| == 0), as for the fixture bags: node
and reference run the same command gate and ONNX model on the same float32 ranges and float64 poses.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from nav_policy.paths import default_bundle_dir
from navbags.bagio import CLOCK, GOAL, ODOM, SCAN, read_bag, typestore
from navbags.reference import NodeParams, compute_reference, load_runtime
from navbags.replay import ReplayAborted, replay_bag
from navbags.rosproc import console_script
from navbags.timeline import THIRD_PARTY, InputMap, load_timeline
from support.bag_shapes import (
    SHAPE_SECONDS,
    SHAPE_TICKS,
    SHAPES,
    T0_NS,
    Lidar,
    RobotBag,
    write_robot_bag,
    write_shape_bag,
)

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "tests" / "fixtures" / "bundle"
TICKS = 32  # 0.1 s grid points from the one before the first odometry stamp (T0) to the one after the last
MAPPED = ["--scan-topic", "/lidar/scan", "--odom-topic", "/wheel/odom"]

# A node whose stale-input watchdog fires on everything: what the comparison must catch.
NODE_ALWAYS_STALE = """
import sys

import navdeploy.gate

navdeploy.gate.CommandGate._age_problem = lambda self, item, now: "stale (changed rule)"

from nav_policy.policy_node import main

sys.exit(main())
"""


@pytest.fixture(scope="module")
def robot_bag(tmp_path_factory) -> Path:
    return write_robot_bag(tmp_path_factory.mktemp("third_party") / "robot_bag")


@pytest.fixture(scope="module")
def runtime():
    return load_runtime(BUNDLE)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*args], capture_output=True, text=True, timeout=180)


def _one_line_refusal(proc: subprocess.CompletedProcess, tool: str = "nav-bag-replay") -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{tool}: "), proc.stderr
    return lines[0]


# ------------------------------------------------------------------------------- offline: the plan


def test_the_bag_is_third_party(robot_bag):
    messages, custom = read_bag(robot_bag)
    topics = {m.topic for m in messages}
    assert topics == {"/lidar/scan", "/wheel/odom", "/diagnostics_text"} and not custom
    assert not (robot_bag / "robot_bag.mcap").exists()  # the plain writer's default storage (sqlite3)
    scan = typestore().deserialize_cdr(
        next(m for m in messages if m.topic == "/lidar/scan").raw, "sensor_msgs/msg/LaserScan"
    )
    assert len(scan.ranges) == 1081 and math.isclose(
        scan.angle_max - scan.angle_min, 1.5 * math.pi, rel_tol=1e-6
    )  # float32


def test_ticks_on_the_header_stamps_newest_input_before_each_tick(robot_bag, runtime):
    tl = load_timeline(robot_bag, runtime.contract, inputs=InputMap("/lidar/scan", "/wheel/odom", goal_xy=(2.0, 1.2)))
    assert tl.kind == THIRD_PARTY and not tl.compare_recorded and "header stamps" in tl.description
    assert tl.params.odom_frame == "wheel_odom"  # the bag's odometry frame becomes the node's
    clocks = [m for m in tl.messages if m.topic == CLOCK]
    times = [typestore().deserialize_cdr(m.raw, m.msgtype).clock for m in clocks]
    ns = [c.sec * 1_000_000_000 + c.nanosec for c in times]
    assert len(ns) == TICKS and np.all(np.diff(ns) == 100_000_000) and ns[0] == T0_NS - 100_000_000
    assert tl.messages[0].topic == GOAL and tl.messages[1].topic == CLOCK  # the first tick comes before any input
    # at most one message per input topic between two ticks, each the newest placed there
    between: dict[str, int] = {}
    for m in tl.messages:
        if m.topic == CLOCK:
            between.clear()
        else:
            between[m.topic] = between.get(m.topic, 0) + 1
            assert between[m.topic] == 1, m
    goal = [m for m, o in zip(tl.messages, tl.origin, strict=True) if m.topic == GOAL]
    assert len(goal) == 1 and tl.origin[tl.messages.index(goal[0])] is None  # made from --goal
    g = typestore().deserialize_cdr(goal[0].raw, goal[0].msgtype)
    assert (g.pose.position.x, g.pose.position.y, g.header.frame_id) == (2.0, 1.2, "wheel_odom")
    # publishing only the newest message of each topic per tick changes nothing for the gate
    ref = compute_reference(tl.messages, runtime, tl.params)
    full = compute_reference(tl.full_messages, runtime, tl.params)
    assert len(ref.ticks) == len(full.ticks) == TICKS
    assert all(a.state == b.state and np.array_equal(a.cmd, b.cmd) for a, b in zip(ref.ticks, full.ticks, strict=True))
    states = [t.state for t in ref.ticks]
    # tick 0 before any input, tick 1 at T0 with the first odometry only (the first scan comes at +13 ms)
    assert states[:2] == ["waiting_input"] * 2 and states.count("driving") == TICKS - 2
    # every bag message is accounted for: published, superseded before publishing, or ignored
    published = {o for o in tl.origin if o is not None}
    messages, _ = read_bag(robot_bag)
    assert published.isdisjoint(tl.skipped) and published | set(tl.skipped) == {m.index for m in messages}


def test_the_lidar_mount_options_become_the_node_s_and_the_reference_s_parameters(robot_bag):
    """``--lidar-x/-y/-yaw/--lidar-upside-down``: the node is started with them and the offline
    reference ticks with them (both read the timeline's parameters)."""
    from navbags import replay_cli

    args = replay_cli._parser().parse_args(
        [
            str(robot_bag),
            "--bundle",
            str(BUNDLE),
            *MAPPED,
            "--goal",
            "2.0,1.2",
            "--lidar-x",
            "0.1",
            "--lidar-yaw",
            "1.5",
        ]
        + ["--lidar-upside-down"]
    )
    _, _, (tl,) = replay_cli._load(args)
    p = tl.params
    assert (p.lidar_x, p.lidar_y, p.lidar_yaw, p.lidar_upside_down) == (0.1, 0.0, 1.5, True)
    passed = p.ros_params()
    assert passed["lidar_x"] == 0.1 and passed["lidar_yaw"] == 1.5 and passed["lidar_upside_down"] is True
    assert "lidar_y" not in passed  # a parameter at its default is not passed


def test_zero_stamps_tick_on_receive_times(tmp_path, runtime):
    bag = write_robot_bag(tmp_path / "unstamped", RobotBag(zero_stamps=True))
    tl = load_timeline(bag, runtime.contract, inputs=InputMap("/lidar/scan", "/wheel/odom", goal_xy=(2.0, 1.2)))
    assert "receive times (all stamps zero)" in tl.description
    ref = compute_reference(tl.messages, runtime, tl.params)
    rx = [m.log_time for m in read_bag(bag)[0] if m.topic in ("/wheel/odom", "/lidar/scan")]
    first, last = (min(rx) // 100_000_000) * 100_000_000, -(-max(rx) // 100_000_000) * 100_000_000
    assert min(rx) % 100_000_000 and ref.ticks[0].t_ns == first  # the grid point before the first receive time
    assert [t.t_ns for t in ref.ticks] == list(range(first, last + 1, 100_000_000))
    # unstamped messages are taken at the previous tick's time: fresh, never at ROS time 0 (stale)
    states = [t.state for t in ref.ticks]
    assert states[0] == "waiting_input" and set(states[1:]) == {"driving"}


def test_goal_from_the_bag_topic(tmp_path, runtime):
    bag = write_robot_bag(tmp_path / "with_goal", RobotBag(goal_topic="/move_base_simple/goal"))
    tl = load_timeline(
        bag, runtime.contract, inputs=InputMap("/lidar/scan", "/wheel/odom", goal="/move_base_simple/goal")
    )
    goals = [(m, o) for m, o in zip(tl.messages, tl.origin, strict=True) if m.topic == GOAL]
    assert len(goals) == 1 and goals[0][1] is not None  # the bag's own goal, published at its stamp
    states = [t.state for t in compute_reference(tl.messages, runtime, tl.params).ticks]
    assert states[:4] == ["waiting_input", "waiting_input", "no_goal", "no_goal"] and states[4] == "driving"


# ------------------------------------------------------------------- refusals: one line, before work


@pytest.mark.slow
def test_refuses_in_one_line_naming_what_is_missing(robot_bag):
    line = _one_line_refusal(_run(console_script("nav-bag-replay"), str(robot_bag), "--bundle", str(BUNDLE)))
    assert "no scan topic: /scan is not in the bag" in line and "/lidar/scan" in line and "--scan-topic" in line
    assert "no odometry topic: /odom" in line and "/wheel/odom" in line and "--odom-topic" in line
    assert "no goal" in line and "--goal" in line

    line = _one_line_refusal(
        _run(sys.executable, "-m", "navbags.replay_cli", str(robot_bag), "--bundle", str(BUNDLE), *MAPPED)
    )
    assert "no goal" in line and "scan" not in line.split("cannot be replayed")[1]

    line = _one_line_refusal(
        _run(
            console_script("nav-bag-replay"),
            str(robot_bag),
            "--bundle",
            str(BUNDLE),
            "--scan-topic",
            "/wheel/odom",
            "--odom-topic",
            "/wheel/odom",
            "--goal",
            "1,1",
        )
    )
    assert "scan topic /wheel/odom is nav_msgs/msg/Odometry, not sensor_msgs/msg/LaserScan" in line


# ------------------------------------------------------------------------ live: the per-tick comparison


@pytest.mark.ros
@pytest.mark.slow
def test_third_party_bag_replays_with_an_exact_per_tick_comparison(robot_bag, tmp_path):
    report = tmp_path / "report.json"
    proc = _run(
        console_script("nav-bag-replay"),
        str(robot_bag),
        "--bundle",
        str(BUNDLE),
        *MAPPED,
        "--goal",
        "2.0,1.2",
        "--json",
        str(report),
        "--log-dir",
        str(tmp_path / "log"),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "-> PASS" in proc.stdout and "max |node - recorded| : n/a" in proc.stdout
    (r,) = json.loads(report.read_text())
    assert r["pass"] and r["kind"] == THIRD_PARTY and r["ticks"] == TICKS
    assert r["max_delta_offline"] == 0.0 and r["max_delta_recorded"] is None
    assert r["synthesized"][CLOCK]["fired"] == TICKS
    scan, odom = r["counts"]["/lidar/scan"], r["counts"]["/wheel/odom"]
    assert scan["seen"] + scan["superseded"] == scan["in_bag"] and scan["published"] == scan["seen"]
    assert odom["seen"] == TICKS - 1 and odom["superseded"] == odom["in_bag"] - (TICKS - 1)  # none before tick 0
    assert r["counts"]["/diagnostics_text"] == {"in_bag": 1, "ignored": 1}

    # In process: the node's commands themselves, bit for bit, and not trivially zero.
    rep = replay_bag(
        robot_bag,
        BUNDLE,
        inputs=InputMap("/lidar/scan", "/wheel/odom", goal_xy=(2.0, 1.2)),
        log_dir=tmp_path / "log2",
    )
    assert rep.ok() and rep.node_cmds.shape == (TICKS, 3), rep.summary()
    assert np.array_equal(rep.node_cmds, rep.offline_cmds) and rep.node_states == rep.offline_states
    assert rep.node_states.count("driving") == TICKS - 2 and np.ptp(rep.node_cmds[2:, 2]) > 0.05
    assert np.abs(rep.node_cmds[2:]).max() > 0.3


@pytest.mark.ros
@pytest.mark.slow
def test_third_party_replay_fails_when_the_node_differs(robot_bag, tmp_path):
    script = tmp_path / "policy_node_always_stale.py"
    script.write_text(textwrap.dedent(NODE_ALWAYS_STALE))
    rep = replay_bag(
        robot_bag,
        BUNDLE,
        inputs=InputMap("/lidar/scan", "/wheel/odom", goal_xy=(2.0, 1.2)),
        log_dir=tmp_path,
        node_command=[sys.executable, str(script)],
    )
    assert rep.ticks == TICKS and not rep.problems, rep.summary()
    assert set(rep.node_states) == {"waiting_input", "stale_scan"}
    assert rep.max_delta_offline > 0.3 and not rep.ok()


@pytest.mark.ros
@pytest.mark.slow
def test_a_replay_of_zero_ticks_fails_and_says_so(tmp_path):
    """A nav_policy bag whose only /clock lies before the node's first deadline: nothing is compared."""
    from navbags.bagio import write_bag

    messages, custom = read_bag(REPO / "tests" / "fixtures" / "bags" / "nominal_seed3")
    clock = typestore().types["rosgraph_msgs/msg/Clock"]
    Time = typestore().types["builtin_interfaces/msg/Time"]
    early = bytes(typestore().serialize_cdr(clock(clock=Time(sec=0, nanosec=50_000_000)), "rosgraph_msgs/msg/Clock"))
    first = [m for m in messages if m.topic in (GOAL, SCAN, ODOM)][:3]
    rows = [(m.topic, m.log_time, m.raw) for m in first] + [(CLOCK, first[-1].log_time + 1, early)]
    bag = write_bag(tmp_path / "no_tick", rows, custom)
    out = tmp_path / "r.json"
    proc = _run(console_script("nav-bag-replay"), str(bag), "--bundle", str(BUNDLE), "--json", str(out))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "NO TICK COMPARED" in proc.stdout and "-> FAIL (no tick compared)" in proc.stdout
    assert "max |node - offline|  =" not in proc.stdout and "states equal" not in proc.stdout
    (r,) = json.loads(out.read_text())
    assert r["ticks"] == 0 and r["max_delta_offline"] is None and not r["pass"]
    assert any("no control tick was compared" in p for p in r["problems"])


@pytest.mark.ros
@pytest.mark.slow
def test_clock_watchdog_zeros_of_a_slow_replay_are_counted_not_compared(robot_bag, tmp_path):
    """Paced at rate 1 (0.1 s wall between clocks) with the node's /clock watchdog at 20 ms, the node
    publishes clock_stalled zeros between ticks: they are no control ticks and must not shift them."""
    rep = replay_bag(
        robot_bag,
        BUNDLE,
        params=NodeParams(clock_timeout=0.02),
        inputs=InputMap("/lidar/scan", "/wheel/odom", goal_xy=(2.0, 1.2)),
        rate=1.0,
        log_dir=tmp_path,
    )
    assert rep.synthesized["/cmd_vel (clock watchdog)"]["zero"] > 0, rep.summary()
    assert rep.ok() and rep.ticks == TICKS and rep.max_delta_offline == 0.0, rep.summary()
    assert "clock_stalled" not in rep.node_states


def test_tick_grid_follows_the_control_period_parameter(robot_bag, runtime):
    inputs = InputMap("/lidar/scan", "/wheel/odom", goal_xy=(2.0, 1.2))
    tl = load_timeline(robot_bag, runtime.contract, NodeParams(control_period=0.25), inputs)
    ref = compute_reference(tl.messages, runtime, tl.params)
    steps = np.diff([t.t_ns for t in ref.ticks])
    assert len(ref.ticks) == 14 and np.all(steps == 250_000_000) and "every 0.25 s" in tl.description
    assert all(t.t_ns % 250_000_000 == 0 for t in ref.ticks)  # the node's timer grid n * period


# --------------------------------------------------------- bags of other robots, every time (issue 28)

SHAPE_RUNS = 1  # replays per shape here; scripts/replay_shapes.py runs each 20 times (docs/results.md)


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_robot_bags_of_five_shapes_replay_every_time(shape, tmp_path):
    """The five shapes of issue 28 (``support.bag_shapes.SHAPES``: the node's topic names, their own goal,
    no /clock, no commands) through the console script as a user runs it, with the installed default
    bundle and no options, several times in a row: each run compares all 51 ticks exactly. The first
    message is the replay's own /clock; it reaches the node every time (docs/bags.md, "Delivery")."""
    bag = write_shape_bag(tmp_path, shape)
    for run in range(SHAPE_RUNS):
        report = tmp_path / f"run{run}.json"
        proc = _run(
            console_script("nav-bag-replay"),
            str(bag),
            "--bundle",
            str(default_bundle_dir()),
            "--json",
            str(report),
            "--log-dir",
            str(tmp_path / f"log{run}"),
        )
        assert proc.returncode == 0, f"run {run + 1}: " + proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "Traceback" not in proc.stdout + proc.stderr
        (r,) = json.loads(report.read_text())
        assert r["pass"] and r["ticks"] == SHAPE_TICKS and r["max_delta_offline"] == 0.0, r
        assert r["synthesized"][CLOCK]["fired"] == SHAPE_TICKS and r["counts"]["/goal_pose"]["seen"] == 1
        driving = SHAPE_TICKS - len(r["zero_ticks"])
        assert driving == 0 if shape == "goal_in_another_frame" else driving >= 40, r["zero_ticks"]


@pytest.mark.ros
@pytest.mark.slow
def test_a_bag_of_a_lidar_turned_upside_down_off_the_centre_replays_with_its_mount(tmp_path):
    """A robot whose lidar sits 0.1 m forward of the centre, turned by 90 degrees and upside down:
    ``--lidar-*`` reach the node and the offline reference alike (every tick exactly the same), and the
    robot drives toward its goal in the room it sees the right way round."""
    from navcontract.scan import LidarMount

    lidar = Lidar(720, -math.pi, 2 * math.pi / 720, mount=LidarMount(0.1, 0.0, math.pi / 2, upside_down=True))
    bag = write_robot_bag(tmp_path / "turned", RobotBag(SHAPE_SECONDS, lidar, goal_topic="/goal_pose"))
    report = tmp_path / "report.json"
    options = ["--lidar-x", "0.1", "--lidar-yaw", str(math.pi / 2), "--lidar-upside-down"]
    proc = _run(
        console_script("nav-bag-replay"), str(bag), "--bundle", str(BUNDLE), *MAPPED, *options, "--json", str(report)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (r,) = json.loads(report.read_text())
    assert r["pass"] and r["ticks"] == SHAPE_TICKS and r["max_delta_offline"] == 0.0, r
    assert SHAPE_TICKS - len(r["zero_ticks"]) >= 40, r["zero_ticks"]


@pytest.mark.ros
@pytest.mark.slow
def test_a_node_that_dies_or_never_connects_aborts_in_one_line(robot_bag, tmp_path, monkeypatch):
    inputs = InputMap("/lidar/scan", "/wheel/odom", goal_xy=(2.0, 1.2))
    dies = [sys.executable, "-c", "import sys; print('startup failed: no bundle'); sys.exit(3)"]
    with pytest.raises(ReplayAborted) as aborted:
        replay_bag(robot_bag, BUNDLE, inputs=inputs, log_dir=tmp_path / "dies", node_command=dies)
    text = str(aborted.value)
    assert "\n" not in text and "exited (3)" in text and "startup failed: no bundle" in text, text
    assert str(tmp_path / "dies" / "policy_node.log") in text

    monkeypatch.setattr("navbags.replay.CONNECT_TIMEOUT", 2.0)
    silent = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(ReplayAborted) as aborted:
        replay_bag(robot_bag, BUNDLE, inputs=inputs, log_dir=tmp_path / "silent", node_command=silent, timeout=1.0)
    text = str(aborted.value)
    assert (
        "\n" not in text and "timed out after 2 s waiting for the policy node: missing a subscriber of /clock" in text
    )
    assert "a publisher of /cmd_vel" in text, text
