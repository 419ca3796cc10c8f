"""Rosbag2 record / replay (issue 6): fixture bags, the offline reference, live replay into the node.

The fixture bags in tests/fixtures/bags were recorded from the simulator with the trained bundle
tests/fixtures/bundle (``nav-bag-record ...``, see docs/bags.md). The live tests (marked ``ros``)
start real ``policy_node`` / ``sim_node`` processes on a private loopback ROS domain each. That the
offline reference and the node share one controller is tests/test_bag_shared_controller.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from navbags.bagio import (
    CLOCK,
    CMD,
    FAULT,
    GOAL,
    INPUT_TOPICS,
    ODOM,
    SCAN,
    STATUS,
    TOPICS,
    count_by_topic,
    decode,
    json_of,
    read_bag,
    typestore,
    write_bag,
)
from navbags.record import FaultPlan, _sha256, record_episodes
from navbags.reference import NodeParams, compute_reference, load_runtime
from navbags.replay import ambiguities, replay_bag

REPO = Path(__file__).resolve().parents[2]
BAGS = REPO / "tests" / "fixtures" / "bags"
BUNDLE = REPO / "tests" / "fixtures" / "bundle"
FIXTURES = ["nominal_seed0", "nominal_seed3", "faults_seed42"]
RECORDED = NodeParams()  # the fixtures were recorded with the node's defaults (scan map on, planned inline)
RERECORD = "re-record with nav-bag-record (commands in docs/bags.md)"


def _bag(name: str) -> Path:
    path = BAGS / name
    assert (path / "metadata.yaml").is_file(), f"fixture bag {path} missing; {RERECORD}"
    return path


def _tampered(messages, custom, path: Path, nth_cmd: int, field: str, delta: float) -> Path:
    """A copy of a bag at ``path`` whose ``nth_cmd``-th recorded command has ``delta`` added to its
    ``field`` (``"linear.x"``, ``"angular.z"``, ...); everything else as recorded."""
    from geometry_msgs.msg import Twist
    from rclpy.serialization import deserialize_message, serialize_message

    victim = [m.index for m in messages if m.topic == CMD][nth_cmd]
    part, axis = field.split(".")
    rows = []
    for m in messages:
        raw = m.raw
        if m.index == victim:
            t = deserialize_message(raw, Twist)
            vec = getattr(t, part)
            setattr(vec, axis, getattr(vec, axis) + delta)
            raw = serialize_message(t)
        rows.append((m.topic, m.log_time, raw))
    return write_bag(path, rows, custom)


@pytest.fixture(scope="module")
def runtime():
    assert (BUNDLE / "policy.onnx").is_file(), f"bundle fixture missing: {BUNDLE}"
    return load_runtime(BUNDLE)


# ------------------------------------------------------------------------------------ bag files


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_bag_is_valid_rosbag2(name):
    path = _bag(name)
    size = sum(f.stat().st_size for f in path.iterdir())
    assert size < 400_000, f"{name} is {size} bytes; fixtures must stay well under 1 MB"

    meta = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] >= 8 and meta["storage_identifier"] == "mcap"
    assert meta["ros_distro"] == "kilted"
    assert meta["relative_file_paths"] == [f"{name}.mcap"] and (path / f"{name}.mcap").is_file()
    assert (path / f"{name}.mcap").read_bytes()[:8] == b"\x89MCAP0\r\n"  # MCAP magic

    messages, custom = read_bag(path)  # opens with the rosbags reader
    counts = count_by_topic(messages)
    assert meta["message_count"] == len(messages) == sum(counts.values())
    times = [m.log_time for m in messages]
    assert times == sorted(times)
    assert meta["starting_time"]["nanoseconds_since_epoch"] == times[0]
    assert meta["duration"]["nanoseconds"] == times[-1] - times[0]
    (f,) = meta["files"]
    assert f["path"] == f"{name}.mcap" and f["message_count"] == len(messages)
    ts = typestore()
    for entry in meta["topics_with_message_count"]:
        tm = entry["topic_metadata"]
        assert entry["message_count"] == counts.get(tm["name"], 0)
        spec = TOPICS[tm["name"]]
        assert tm["type"] == spec.msgtype and tm["serialization_format"] == "cdr"
        assert tm["type_description_hash"] == ts.hash_rihs01(spec.msgtype)
        (qos,) = tm["offered_qos_profiles"]
        assert qos["reliability"] == ("best_effort" if tm["name"] == SCAN else "reliable")
    for topic in (*INPUT_TOPICS, CMD, STATUS):
        assert counts.get(topic, 0) > 0, f"{name} has no {topic}"
    for m in messages:  # every message decodes with the stock definitions
        decode(m)

    info = json.loads(custom["nav_policy_bags"])
    assert info["bundle_onnx_sha256"] == _sha256(BUNDLE / "policy.onnx"), (
        f"{name} was recorded with another bundle than tests/fixtures/bundle; {RERECORD}"
    )
    assert counts[CLOCK] == counts[CMD] == counts[STATUS] == info["ticks"]


def test_bags_decode_identically_with_rclpy():
    """rosbags' CDR and rclpy's serialisation agree on the values (compare values, not bytes)."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import LaserScan

    messages, _ = read_bag(_bag("faults_seed42"))
    scans = [m for m in messages if m.topic == SCAN]
    nan_seen = False
    for m in scans:
        a = np.asarray(decode(m).ranges, dtype=np.float64)
        b = np.asarray(deserialize_message(m.raw, LaserScan).ranges, dtype=np.float64)
        np.testing.assert_array_equal(a, b)
        nan_seen |= bool(np.isnan(a).any())
    assert nan_seen


# -------------------------------------------------------------------------- offline reference


@pytest.mark.parametrize("name", FIXTURES)
def test_offline_reference_reproduces_the_recording(name, runtime):
    messages, _ = read_bag(_bag(name))
    ref = compute_reference(messages, runtime, RECORDED)
    recorded = np.array(
        [[decode(m).linear.x, decode(m).linear.y, decode(m).angular.z] for m in messages if m.topic == CMD]
    )
    states = [json_of(m)["state"] for m in messages if m.topic == STATUS]
    offline = np.array([t.cmd for t in ref.ticks])
    assert offline.shape == recorded.shape
    assert np.max(np.abs(offline - recorded)) <= 1e-4
    assert [t.state for t in ref.ticks] == states
    assert np.abs(recorded).max() > 0.1  # the robot was really driven


def test_offline_reference_catches_a_tampered_command(runtime, tmp_path):
    """Changing one recorded command by 1e-3 is seen (the comparison is not vacuous)."""
    messages, custom = read_bag(_bag("nominal_seed3"))
    tampered, _ = read_bag(_tampered(messages, custom, tmp_path / "tampered", 17, "angular.z", 1e-3))
    ref = compute_reference(tampered, runtime, RECORDED)
    recorded = np.array(
        [[decode(m).linear.x, decode(m).linear.y, decode(m).angular.z] for m in tampered if m.topic == CMD]
    )
    delta = np.abs(np.array([t.cmd for t in ref.ticks]) - recorded).max(axis=1)
    assert np.argmax(delta) == 17 and delta[17] == pytest.approx(1e-3, rel=1e-6)
    assert np.all(np.delete(delta, 17) <= 1e-4)


def test_ambiguous_ticks_are_detected(runtime, tmp_path):
    """Two odometry messages before one tick: the node could tick between them; the harness says so."""
    messages, custom = read_bag(_bag("nominal_seed3"))
    odoms = [m for m in messages if m.topic == ODOM]
    dup = odoms[10]
    rows = []
    for m in messages:
        rows.append((m.topic, m.log_time, m.raw))
        if m.index == dup.index:
            rows.append((m.topic, m.log_time, m.raw))
    doubled, _ = read_bag(write_bag(tmp_path / "doubled", rows, custom))
    assert ambiguities(messages, compute_reference(messages, runtime, RECORDED)) == []
    found = ambiguities(doubled, compute_reference(doubled, runtime, RECORDED))
    assert len(found) == 1 and ODOM in found[0]


# ------------------------------------------------------------------------------- live replay


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """Each fixture bag replayed once into a fresh policy node (shared by the tests below)."""
    out = {}
    for name in FIXTURES:
        out[name] = replay_bag(_bag(name), BUNDLE, log_dir=tmp_path_factory.mktemp(f"replay_{name}"))
    return out


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_replay_matches_offline_and_recorded(name, replays):
    rep = replays[name]
    print(rep.summary())
    assert not rep.problems, rep.summary()
    assert not rep.ambiguous, rep.summary()
    assert rep.node_cmds.shape == (rep.ticks, 3) and rep.ticks > 50
    assert rep.max_delta_offline <= 1e-5, rep.summary()
    assert rep.max_delta_recorded <= 1e-4, rep.summary()
    assert rep.node_states == rep.offline_states == rep.recorded_states
    assert rep.ok()


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_replay_accounts_for_every_message(name, replays):
    rep = replays[name]
    messages, _ = read_bag(_bag(name))
    assert rep.unaccounted == 0 and set(rep.fates) == {m.index for m in messages}
    for topic in INPUT_TOPICS:
        c = rep.counts[topic]
        assert c["published"] == c["in_bag"], (topic, c)
        assert c.get("superseded", 0) == 0 and c.get("after-last-tick", 0) == 0, (topic, c)
    assert rep.counts[CLOCK]["fired"] == rep.ticks
    assert rep.counts[CMD]["compared"] == rep.counts[STATUS]["compared"] == rep.ticks
    # every scan and odometry message was seen by at least one tick: none silently dropped
    assert rep.counts[SCAN]["seen"] == rep.counts[SCAN]["in_bag"]
    assert rep.counts[ODOM]["seen"] == rep.counts[ODOM]["in_bag"]


@pytest.mark.ros
@pytest.mark.slow
def test_fault_bag_zero_exactly_where_the_safety_rules_say(replays):
    rep = replays["faults_seed42"]
    messages, custom = read_bag(_bag("faults_seed42"))
    faults = [json_of(m) for m in messages if m.topic == FAULT]
    kinds = {f["fault"] for f in faults}
    assert {"scan_dropped", "nan_beams", "odom_delayed", "goal_change"} <= kinds
    zero = {k for k, c in enumerate(rep.node_cmds) if np.all(c == 0.0)}
    assert zero == set(rep.zero_ticks()), (sorted(zero), rep.zero_ticks())
    assert all(np.any(rep.node_cmds[k] != 0.0) for k in range(rep.ticks) if k not in zero)

    # The rules, tick by tick, from the fault log alone (tick time = 1 s + k * 0.1 s, timeout 0.5 s):
    timeout, period = NodeParams().stale_timeout, 0.1
    by_tick: dict[int, set[str]] = {}
    for f in faults:
        by_tick.setdefault(f["tick"], set()).add(f["fault"])
    last_scan = last_odom = 0.0
    pending: list[tuple[int, float]] = []  # odometry held back: (release tick, stamp)
    expect: dict[int, str] = {}
    for k in range(rep.ticks):
        t = 1.0 + k * period
        ev = by_tick.get(k, set())
        if "scan_dropped" not in ev:
            last_scan = t
        due = [p for p in pending if p[0] <= k]
        pending = [p for p in pending if p[0] > k]
        if "odom_delayed" in ev:
            d = next(f["ticks"] for f in faults if f["tick"] == k and f["fault"] == "odom_delayed")
            pending.append((k + d, t))
            if due:
                last_odom = due[-1][1]
        else:
            pending = []
            last_odom = t
        ages = {"stale_scan": t - last_scan, "stale_odom": t - last_odom}
        if any(abs(a - timeout) < 1e-9 for a in ages.values()):
            expect[k] = "boundary"  # age == timeout: decided by the node's float arithmetic
        elif ages["stale_scan"] > timeout:
            expect[k] = "stale_scan"
        elif ages["stale_odom"] > timeout:
            expect[k] = "stale_odom"
        elif "nan_beams" in ev and any(f["tick"] == k and f["every"] == 1 for f in faults):
            expect[k] = "bad_scan"
        else:
            expect[k] = "driving"
    assert list(expect.values()).count("boundary") <= 2
    for k, want in expect.items():
        got = rep.node_states[k]
        assert got == want or (want == "boundary" and got in ("driving", "stale_scan", "stale_odom")), (k, got, want)
    got = {k: s for k, s in enumerate(rep.node_states) if s != "driving"}
    assert {"stale_scan", "stale_odom", "bad_scan"} <= set(got.values())
    # Partial NaN beams keep the robot driving; the goal change moves where it drives.
    nan_some = [f["tick"] for f in faults if f["fault"] == "nan_beams" and f["every"] > 1]
    assert nan_some and all(rep.node_states[k] == "driving" for k in nan_some)
    goal_tick = next(f["tick"] for f in faults if f["fault"] == "goal_change")
    goals = [decode(m) for m in messages if m.topic == GOAL]
    assert len(goals) == 2 and goals[1].pose.position.x != goals[0].pose.position.x
    assert rep.node_states[goal_tick] == "driving"


@pytest.mark.ros
@pytest.mark.slow
def test_time_scaled_replay(tmp_path):
    """Paced by the recorded log times (rate 1: as recorded) gives the same commands."""
    rep = replay_bag(_bag("nominal_seed3"), BUNDLE, rate=1.0, log_dir=tmp_path)
    messages, _ = read_bag(_bag("nominal_seed3"))
    span = (messages[-1].log_time - messages[0].log_time) * 1e-9
    assert rep.ok(), rep.summary()
    assert rep.wall_s >= span


# ------------------------------------------------------------------------------ live recording


@pytest.mark.ros
@pytest.mark.slow
def test_record_cli_then_replay(tmp_path):
    """Record two short seeded episodes with faults through the real sim and policy nodes, replay them."""
    plan = FaultPlan(episode=1, drop_scan=[2], nan_all=[4], odom_delay={6: 1, 7: 1}, goal_shift={9: (0.3, 0.3)})
    bag = tmp_path / "rec"
    res = record_episodes(
        bag, BUNDLE, seed=11, episodes=2, episode_length_s=1.5, faults=plan, log_dir=tmp_path / "rlog"
    )
    assert len(res.episodes) == 2 and [e["seed"] for e in res.episodes] == [11, 12]
    assert {f["fault"] for f in res.faults} >= {"scan_dropped", "nan_beams", "odom_delayed", "goal_change"}
    assert all(f["episode"] == 1 for f in res.faults)
    messages, custom = read_bag(bag)
    counts = count_by_topic(messages)
    assert counts[CLOCK] == counts[CMD] == res.ticks == sum(e["steps"] for e in res.episodes)
    assert counts[SCAN] == res.ticks - 1 and counts["/sim/episode"] == 2

    rep = replay_bag(bag, BUNDLE, log_dir=tmp_path / "plog")
    assert rep.ok(), rep.summary()
    assert "bad_scan" in rep.node_states

    # The harness fails a bag whose recorded command is off by more than the bound.
    tampered = _tampered(messages, custom, tmp_path / "tampered", 3, "linear.x", 5e-4)
    bad = replay_bag(tampered, BUNDLE, log_dir=tmp_path / "tlog")
    assert bad.max_delta_offline <= 1e-5, bad.summary()
    assert bad.max_delta_recorded == pytest.approx(5e-4, rel=1e-6)
    assert not bad.ok()
    shutil.rmtree(tmp_path / "tampered")


@pytest.mark.ros
@pytest.mark.slow
def test_console_scripts_replay_a_fixture_and_run_as_modules(tmp_path):
    """nav-bag-replay (console script) replays a fixture bag and exits 0; the modules run with -m too."""
    import subprocess
    import sys

    from navbags.rosproc import console_script

    out = tmp_path / "report.json"
    proc = subprocess.run(
        [console_script("nav-bag-replay"), str(_bag("nominal_seed3")), "--bundle", str(BUNDLE), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "-> PASS" in proc.stdout
    (report,) = json.loads(out.read_text())
    assert report["pass"] and report["max_delta_offline"] == 0.0 and report["max_delta_recorded"] == 0.0
    for module in ("navbags.record_cli", "navbags.replay_cli", "navbags.latency", "navbags.memory"):
        proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "usage:" in proc.stdout, (module, proc.stderr[-2000:])
    for script in ("nav-bag-record", "nav-benchmark-latency", "nav-benchmark-memory"):
        assert subprocess.run([console_script(script), "--help"], capture_output=True, timeout=60).returncode == 0
