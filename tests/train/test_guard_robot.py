"""The collision guard on the robot side: the contract's ``guard`` section, the safety controller
and the node drive through the very guard the policy was trained with (navcontract.guard).

The contract carries the section (round trip, one-line refusals, optional: a bundle without it
loads with ``guard`` None); the controller scales the command it sends (clamped, then smoothed) by
the guard on the ranges the runtime built the observation from, the guard being the last stage,
and leaves it alone with ``guard`` false or without the section; the exporter writes the section
from ``env.guard`` and ``env.smoother`` (slow: a trained checkpoint); the live node slows its
/cmd_vel before a wall (ros).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import support.ros as h
from navcontract.bundle import CONTRACT_FILE, BundleError, make_contract, parse_contract
from navcontract.guard import (
    DEFAULT_MARGIN,
    GUARD_SECTION,
    GuardRule,
    apply_guard,
    default_guard,
    guard_scale,
    reaction_time,
)
from navdeploy.gate import CommandGate
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime, ScanInput
from navdeploy.settings import UNGUARDED, resolve_settings
from navdeploy.smoother import AccelLimits
from navdeploy.states import State
from support.paths import FIXTURE_BUNDLE

RULE = GuardRule(radius=0.2, margin=0.05, headway=0.4, decel=2.0, slide=False)
GUARD_LINE = (
    "guard radius 0.2 m, margin 0.05 m, headway 0.4 s, decel 2 m/s^2, slide off, unseen clearance 0.1 m "
    "(unseen sectors are occupied: no motion into them"
)
GUARD_TAIL = "), keep sight on, reaction 0 s, momentum on, steering off, last stage (trained without a smoother; bundle contract)"
BEARING = math.radians(30.0)  # of the goal: the goal-seeking policy drives at 45 deg (both axes clip) and turns
MAX_RANGE = 6.0


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("guard_bundles")
    return {
        "guard": h.write_goal_seeking_bundle(root / "guard", guard=RULE, turn=1.0),
        "none": h.write_goal_seeking_bundle(root / "none", turn=1.0),
    }


def fixture_contract_data() -> dict:
    return json.loads((FIXTURE_BUNDLE / CONTRACT_FILE).read_text())


# ------------------------------------------------------------------------------------- contract
def test_the_section_round_trips_outside_the_fingerprint_and_format(bundles: dict[str, Path]) -> None:
    guarded = PolicyRuntime.load(bundles["guard"]).contract
    plain = PolicyRuntime.load(bundles["none"]).contract
    assert guarded.guard == RULE and guarded.raw[GUARD_SECTION] == RULE.to_dict()
    assert GUARD_SECTION not in plain.raw and plain.guard is None
    assert guarded.fingerprint == plain.fingerprint and guarded.raw["format_version"] == 1
    data = fixture_contract_data()  # a bundle exported before the section: loads, no guard
    assert GUARD_SECTION not in data and parse_contract(data).guard is None
    assert parse_contract({**data, GUARD_SECTION: RULE.to_dict()}).guard == RULE


def test_make_contract_writes_the_section_only_when_given() -> None:
    c = PolicyRuntime.load(FIXTURE_BUNDLE).contract
    args = (c.spec, c.scaling, c.control_period, c.goal_tolerance, 1e-8)
    assert make_contract(*args, robot_radius=0.2, guard=RULE)[GUARD_SECTION] == RULE.to_dict()
    assert GUARD_SECTION not in make_contract(*args, robot_radius=0.2)


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"headway": 0.0}, "contract guard headway must be finite and > 0, got 0.0"),
        ({"decel": -2.0}, "contract guard decel must be finite and > 0, got -2.0"),
        ({"radius": 0}, "contract guard radius must be finite and > 0, got 0.0"),
        ({"margin": -0.01}, "contract guard margin must be finite and >= 0, got -0.01"),
        ({"headway": math.nan}, "contract guard headway must be finite and > 0, got nan"),
        ({"decel": True}, "contract guard.decel must be a number, got True"),
        ({"margin": "0.03"}, "contract guard.margin must be a number, got '0.03'"),
        (
            {"brake": 1.0},
            "contract unknown guard key(s): brake (known: after_smoother, axis_brake, decel, headway, keep_sight, margin, momentum, radius, "
            "reaction, slide, stage, steer, sweep_lag, unseen_clearance)",
        ),
        ({"unseen_clearance": -0.1}, "contract guard unseen_clearance must be finite and >= 0, got -0.1"),
        ({"reaction": -0.3}, "contract guard reaction must be finite and >= 0, got -0.3"),
        ({"reaction": "0.3"}, "contract guard.reaction must be a number, got '0.3'"),
        (
            {"stage": "before_smoother"},
            "contract guard.stage must be 'last' (clamp, velocity smoother, then the guard), got 'before_smoother'",
        ),
        ({"radius": 0.25}, "contract guard.radius = 0.25, robot.radius = 0.2"),
    ],
)
def test_a_bad_section_is_refused_in_one_line(edit: dict, message: str) -> None:
    data = fixture_contract_data()
    with pytest.raises(BundleError) as info:
        parse_contract({**data, GUARD_SECTION: {**RULE.to_dict(), **edit}})
    assert str(info.value) == message


def test_a_section_that_is_not_a_mapping_or_lacks_a_key_is_refused() -> None:
    data = fixture_contract_data()
    with pytest.raises(BundleError, match=r"^contract guard must be a mapping, got list$"):
        parse_contract({**data, GUARD_SECTION: [0.2, 0.05, 0.4, 2.0]})
    section = RULE.to_dict()
    del section["headway"]
    with pytest.raises(BundleError, match=r"^contract guard has no headway$"):
        parse_contract({**data, GUARD_SECTION: section})


# ------------------------------------------------------------------------------------- controller
def wall_scan(direction: float, distance: float, half_width: float = math.radians(20.0)) -> np.ndarray:
    """72 training-beam ranges: a wall ``distance`` m away across ``direction`` +- ``half_width``, 4 m elsewhere."""
    theta = -math.pi + np.arange(72) * (2.0 * math.pi / 72)
    off = np.abs(np.angle(np.exp(1j * (theta - direction))))
    return np.where(off <= half_width, distance, 4.0)


def controller(bundle: Path, **params) -> tuple[CommandGate, list[str]]:
    runtime = PolicyRuntime.load(bundle)
    params.setdefault("scan_map", False)  # the guard alone: the goal stays the policy's goal
    settings, warnings = resolve_settings(runtime.contract, NodeParams(**params))
    return CommandGate.from_settings(runtime, settings), warnings


def drive(c: CommandGate, ranges: np.ndarray, t: float = 1.0):
    """One tick at ``t`` with the robot at the origin facing +x and the goal at BEARING."""
    c.set_scan(ScanInput.training_beams(ranges, 72, MAX_RANGE), t)
    c.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), t, "odom")
    if c.goal is None:
        c.set_goal(3.0 * math.cos(BEARING), 3.0 * math.sin(BEARING), "odom")
    return c.tick(t)


def test_the_command_is_the_clamped_policy_command_through_the_guard(bundles: dict[str, Path]) -> None:
    ranges = wall_scan(math.radians(45.0), 0.7)
    plain, _ = controller(bundles["guard"], guard=False)
    policy = drive(plain, ranges)
    assert policy.state == State.DRIVING and policy.guard_scale is None
    assert np.allclose(policy.cmd, [1.5 / math.sqrt(2), 1.5 / math.sqrt(2), 1.0], atol=1e-5)
    c, warnings = controller(bundles["guard"])
    assert c.guard == RULE and not warnings
    res = drive(c, ranges)
    assert res.state == State.DRIVING
    assert np.array_equal(c.driver.last_scan_report.ranges, ranges)  # what the policy observed
    expected, scale = apply_guard(ranges, policy.cmd, RULE, MAX_RANGE)
    assert 0.0 < float(scale) < 0.9 and res.guard_scale == pytest.approx(float(scale), abs=1e-7)
    assert np.allclose(res.cmd, expected, atol=1e-6)
    assert res.cmd[2] == policy.cmd[2]  # the yaw rate is never touched
    assert res.cmd[0] / policy.cmd[0] == pytest.approx(res.cmd[1] / policy.cmd[1])  # same direction


def test_nothing_changes_without_an_obstacle_in_the_way(bundles: dict[str, Path]) -> None:
    ranges = wall_scan(math.radians(-135.0), 0.7)  # a wall behind the robot
    c, _ = controller(bundles["guard"])
    plain, _ = controller(bundles["guard"], guard=False)
    res, policy = drive(c, ranges), drive(plain, ranges)
    assert res.guard_scale == 1.0 and np.array_equal(res.cmd, policy.cmd)


def test_guard_off_or_no_section_is_the_unguarded_command(bundles: dict[str, Path]) -> None:
    ranges = wall_scan(math.radians(45.0), 0.7)
    off, warnings = controller(bundles["guard"], guard=False)
    assert off.guard is None
    assert warnings == ["guard off, but the policy was trained driving through it: nothing slows it near obstacles"]
    none, warnings = controller(bundles["none"])
    assert none.guard is None and warnings == [UNGUARDED]
    unguarded = np.array([1.5 / math.sqrt(2), 1.5 / math.sqrt(2), 1.0])
    for c in (off, none):
        res = drive(c, ranges)
        assert res.state == State.DRIVING and res.guard_scale is None
        assert np.allclose(res.cmd, unguarded, atol=1e-5)


def test_settings_say_which_guard_is_used_and_check_the_parameter(bundles: dict[str, Path]) -> None:
    contract = PolicyRuntime.load(bundles["guard"]).contract
    s, _ = resolve_settings(contract)
    assert s.guard == RULE and s.max_range == MAX_RANGE
    assert s.guard_source == GUARD_LINE + GUARD_TAIL
    section = {k: v for k, v in contract.raw[GUARD_SECTION].items() if k != "unseen_clearance"}
    older = parse_contract({**contract.raw, GUARD_SECTION: section})  # a section from before the key: the default
    assert older.guard == RULE and resolve_settings(older)[0].guard_source == (
        GUARD_LINE + ", the default: the bundle's guard section does not state it" + GUARD_TAIL
    )
    no_sight = {k: v for k, v in contract.raw[GUARD_SECTION].items() if k != "keep_sight"}
    before = parse_contract({**contract.raw, GUARD_SECTION: no_sight})  # rule step 0b applies all the same
    assert before.guard == RULE and before.guard.keep_sight
    assert ", keep sight on (the default), reaction" in resolve_settings(before)[0].guard_source
    no_momentum = {k: v for k, v in contract.raw[GUARD_SECTION].items() if k != "momentum"}
    oldest = parse_contract({**contract.raw, GUARD_SECTION: no_momentum})  # rule step 5 applies all the same
    assert (
        oldest.guard == RULE
        and "momentum on (the default), steering off, last stage" in resolve_settings(oldest)[0].guard_source
    )
    assert (
        resolve_settings(contract, NodeParams(guard=False))[0].guard_source == "guard off (node parameter guard false)"
    )
    s, _ = resolve_settings(PolicyRuntime.load(bundles["none"]).contract)
    assert s.guard_source.startswith("guard none (the bundle has no guard section")
    with pytest.raises(ValueError, match=r"^parameter 'guard' must be true or false, got 'yes'$"):
        resolve_settings(contract, NodeParams(guard="yes"))


def test_the_guard_comes_after_the_velocity_smoother(bundles: dict[str, Path]) -> None:
    """Each tick the smoother steps from the command last sent toward the policy's, and the guard
    checks that step on the tick's scan: what is sent is the guard's cut of it, and the smoother
    moves on from there; the ramp ends at the guarded policy command."""
    ranges = wall_scan(math.radians(45.0), 0.7)
    policy = drive(controller(bundles["guard"], guard=False)[0], ranges).cmd
    target = drive(controller(bundles["guard"])[0], ranges).cmd
    c, _ = controller(bundles["guard"], max_accel_linear=2.5, max_accel_angular=3.2)
    assert c.smoother is not None and c.smoother.limits == AccelLimits(2.5, 3.2)
    step = np.array([2.5, 2.5, 3.2]) * 0.1
    prev, cut = np.zeros(3), False
    for k in range(12):
        expected, scale = apply_guard(ranges, prev + np.clip(policy - prev, -step, step), RULE, MAX_RANGE)
        res = drive(c, ranges, t=1.0 + 0.1 * k)
        assert np.allclose(res.cmd, expected, atol=1e-9) and res.guard_scale == pytest.approx(float(scale))
        assert np.array_equal(c.smoother.last, res.cmd)  # the memory is what was sent
        cut |= float(scale) < 1.0
        prev = res.cmd
    assert cut and np.allclose(prev, target, atol=1e-9)


def test_a_runtime_without_a_scan_report_stops_instead_of_driving_unguarded() -> None:
    class Blind:
        def reset(self) -> None:
            pass

        def step(self, scan, pose, twist, goal) -> np.ndarray:
            return np.array([1.0, 0.0, 0.0])

    contract = PolicyRuntime.load(FIXTURE_BUNDLE).contract
    settings, _ = resolve_settings(contract)
    c = CommandGate.from_settings(Blind(), settings)
    c.guard, c.max_range = RULE, MAX_RANGE
    res = drive(c, wall_scan(0.0, 0.7))
    assert res.state == State.ERROR and not res.cmd.any() and "last_scan_report" in res.reason


# ------------------------------------------------------------------------------------- exporter
@pytest.fixture(scope="module")
def ckpt(trained_checkpoint: Path) -> dict:
    return torch.load(trained_checkpoint, map_location="cpu", weights_only=True)


def export_with(ckpt: dict, tmp_path: Path, edit) -> dict:
    """The contract of ``ckpt`` exported with its stored config edited by ``edit`` (plain data),
    checked on observations drawn around its normaliser (no rollout)."""
    from navtrain.export import export_bundle

    stored = json.loads(json.dumps(ckpt["infos"]["nav_config"]))
    edit(stored)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "edited.pt"
    torch.save({**ckpt, "infos": {**ckpt["infos"], "nav_config": stored}}, path)
    mean = ckpt["actor_state_dict"]["obs_normalizer._mean"]
    std = ckpt["actor_state_dict"]["obs_normalizer._std"]
    obs = mean + std * torch.randn(1024, mean.shape[-1], generator=torch.Generator().manual_seed(0))
    out = export_bundle(path, tmp_path / "bundle", observations=obs).parent
    assert PolicyRuntime.load(out).contract.raw == json.loads((out / CONTRACT_FILE).read_text())
    return json.loads((out / CONTRACT_FILE).read_text())


@pytest.mark.slow
def test_the_exporter_writes_the_section_from_env_guard(ckpt: dict, tmp_path: Path) -> None:
    from navsim.config_load import config_from_data
    from navsim.contract_objects import guard_rule

    def on(stored: dict) -> None:
        stored["env"]["guard"] = {"enabled": True, "margin": 0.05, "headway": 0.4, "decel": 2.0}
        stored["env"]["robot"]["radius"] = 0.2

    contract = export_with(ckpt, tmp_path / "on", on)
    # The reaction time the contract's own robot_response implies: what training derived too.
    response = parse_contract(contract).response
    tau = None if response.actuator_tau is None else response.actuator_tau[1]
    reaction = reaction_time(contract["control_period"], response.latency_budget, tau)
    assert contract[GUARD_SECTION]["reaction"] == pytest.approx(reaction)
    # The checkpoint trained with env.smoother on (conf/nav.yaml).
    trained = replace(RULE, after_smoother=True, reaction=contract[GUARD_SECTION]["reaction"])
    assert contract[GUARD_SECTION]["stage"] == "last" and contract[GUARD_SECTION]["unseen_clearance"] == 0.1
    assert GuardRule.from_dict(contract[GUARD_SECTION]) == trained
    assert parse_contract(contract).guard == trained and contract["robot"]["radius"] == RULE.radius
    implied = json.loads(json.dumps(contract))
    del implied[GUARD_SECTION]["reaction"]  # a section written before the key: the contract's number
    assert parse_contract(implied).guard == trained

    def unsmoothed(stored: dict) -> None:
        on(stored)
        stored["env"]["smoother"] = {"enabled": False}

    assert parse_contract(export_with(ckpt, tmp_path / "unsmoothed", unsmoothed)).guard == replace(
        RULE, reaction=trained.reaction
    )

    off = export_with(ckpt, tmp_path / "off", lambda stored: stored["env"]["guard"].update(enabled=False))
    assert GUARD_SECTION not in off and parse_contract(off).guard is None

    def older(stored: dict) -> None:  # a config stored before env.guard existed
        stored["env"].pop("guard")

    contract = export_with(ckpt, tmp_path / "older", older)
    stored = json.loads(json.dumps(ckpt["infos"]["nav_config"]))
    older(stored)
    rule = guard_rule(config_from_data(stored))  # the rebuilt config decides, nothing else
    assert parse_contract(contract).guard == rule


# ------------------------------------------------------------------------------------- the node
@pytest.mark.ros
@pytest.mark.slow
def test_the_node_slows_its_cmd_vel_before_a_wall(tmp_path: Path) -> None:
    """A goal 5 m ahead: the goal-seeking policy commands 1.5 m/s; with a wall 0.6 m ahead the node
    publishes that command scaled by the guard of the scan it received."""
    h.require_ros()
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import String

    from nav_policy.ros_common import CMD_QOS, GOAL_QOS, SENSOR_QOS

    bundle = h.write_goal_seeking_bundle(tmp_path / "bundle", guard=RULE)
    ranges = wall_scan(0.0, 0.6)
    scale = float(guard_scale(ranges, np.array([1.5, 0.0, 0.0]), RULE, MAX_RANGE))
    assert 0.2 < scale < 0.8
    lease = h.DomainLease()
    # The guard alone: no scan map (it would plan round the wall and move the goal).
    cmd = [str(h.entry_point_script("policy_node")), *h.ros_args({"bundle_path": str(bundle), "scan_map": False})]
    proc = h.NodeProc(cmd, lease.domain_id, tmp_path / "policy_node.log")
    tn = h.RosSide(lease.domain_id, "guard_node_test")
    try:
        n = tn.node
        scan_pub = n.create_publisher(LaserScan, "/scan", SENSOR_QOS)
        odom_pub = n.create_publisher(Odometry, "/odom", 10)
        goal_pub = n.create_publisher(PoseStamped, "/goal_pose", GOAL_QOS)
        cmds: list[tuple[float, float, float]] = []
        status: list[dict] = []
        n.create_subscription(Twist, "/cmd_vel", lambda m: cmds.append((m.linear.x, m.linear.y, m.angular.z)), CMD_QOS)
        n.create_subscription(String, "/nav_policy/status", lambda m: status.append(json.loads(m.data)), 50)
        pubs = (scan_pub, odom_pub, goal_pub)
        tn.spin_until(lambda: all(p.get_subscription_count() > 0 for p in pubs) and status, 60, "the node", [proc])
        assert GUARD_LINE + GUARD_TAIL in proc.output()
        goal = PoseStamped()
        goal.header.frame_id, goal.pose.position.x, goal.pose.orientation.w = "odom", 5.0, 1.0
        goal_pub.publish(goal)
        deadline = time.monotonic() + 20.0
        while not (status and status[-1]["state"] == "driving" and status[-1]["guard_scale"] is not None):
            assert proc.alive() and time.monotonic() < deadline, f"no driving status: {status[-2:]}\n{proc.output()}"
            stamp = n.get_clock().now().to_msg()
            s = LaserScan(angle_min=-math.pi, angle_increment=2 * math.pi / 72, range_min=0.05, range_max=MAX_RANGE)
            s.header.frame_id, s.header.stamp, s.ranges = "base_link", stamp, [float(r) for r in ranges]
            o = Odometry()
            o.header.frame_id, o.header.stamp, o.child_frame_id = "odom", stamp, "base_link"
            o.pose.pose.orientation.w = 1.0
            scan_pub.publish(s)
            odom_pub.publish(o)
            tn.spin_for(0.05)
        tn.spin_for(0.1)  # the /cmd_vel of that tick
        st = status[-1]
        assert st["guard_scale"] == pytest.approx(scale, abs=1e-4)
        assert st["cmd"][0] == pytest.approx(1.5 * scale, abs=1e-4) and cmds
        vx, vy, wz = cmds[-1]
        assert vx == pytest.approx(1.5 * scale, abs=1e-4) and vx < 1.5 - 0.1
        assert vy == pytest.approx(0.0, abs=1e-6) and wz == pytest.approx(0.0, abs=1e-6)
    finally:
        tn.close()
        proc.stop()
        lease.release()


def test_a_smoother_slower_than_the_guards_braking_does_not_delay_its_stop(bundles: dict[str, Path]) -> None:
    """The guard is the last stage: a smoother limit below its braking deceleration cannot hold a cut
    back, so it is no reason for a warning. At 1.5 m/s with a 0.5 m/s^2 smoother, a wall 0.24 m
    ahead is a zero on that very tick (the smoother alone would send 1.45 m/s)."""
    contract = PolicyRuntime.load(bundles["guard"]).contract
    _, warnings = resolve_settings(contract, NodeParams(max_accel_linear=0.5 * RULE.decel))
    assert not warnings
    c, _ = controller(bundles["guard"], max_accel_linear=0.5 * RULE.decel)
    c.smoother.sent(np.array([1.5, 0.0, 0.0]), 0.9)
    c.set_goal(5.0, 0.0, "odom")
    res = drive(c, wall_scan(0.0, 0.24))
    assert res.state == State.DRIVING and res.guard_scale == 0.0 and not res.cmd[:2].any()
    assert not c.smoother.last[:2].any()


def test_a_bundle_trained_without_the_guard_gets_the_default_one(fixture_bundle: Path) -> None:
    """The fixture bundle has no guard section but states its radius: the node guards it with
    navcontract.guard.default_guard; driven at a wall it is slowed like any guarded command, and
    only the parameter turns that off (no warning: the policy never had a guard)."""
    runtime = PolicyRuntime.load(fixture_bundle)
    contract = runtime.contract
    assert contract.guard is None and contract.base is not None
    s, warnings = resolve_settings(contract)
    assert s.guard == default_guard(contract.base.radius, contract.control_period) and not warnings
    assert s.guard.margin == DEFAULT_MARGIN and s.guard.slide and s.guard.reaction == contract.control_period
    assert s.guard_source.startswith("guard default (the bundle has no guard section")

    class Charging:
        """The bundle's runtime reading the scan (its report is what the guard checks), then
        charging straight ahead at full speed whatever the policy says."""

        def reset(self) -> None:
            runtime.reset()

        def step(self, scan, **inputs):
            runtime.step(scan, **inputs)
            self.last_scan_report = runtime.last_scan_report
            return np.array([1.5, 0.0, 0.0])

    gate = CommandGate.from_settings(Charging(), replace(s, scan_map=None))
    gate.set_scan(ScanInput.training_beams(wall_scan(0.0, 0.5), 72, MAX_RANGE), 0.0)
    gate.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.0, "odom")
    gate.set_goal(3.0, 0.0, "odom")
    res = gate.tick(0.0)
    assert res.state == State.DRIVING and res.guard_scale is not None and 0.0 < res.guard_scale < 0.5
    assert np.allclose(res.cmd, [1.5 * res.guard_scale, 0.0, 0.0])
    off, warnings = resolve_settings(contract, NodeParams(guard=False))
    assert off.guard is None and not warnings
    assert off.guard_source == "guard off (node parameter guard false; the policy was trained without one)"
