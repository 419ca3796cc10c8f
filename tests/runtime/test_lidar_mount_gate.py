"""The lidar's mount (scan rule 0) on the robot side: the node's lidar_* parameters reach the gate,
the policy's beams and the scan map, which casts each reading from where the lidar sits."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from navcontract.scan import LidarMount, ScanInput
from navcontract.subgoal import LookaheadRule
from navdeploy.bench_tick import RANGE_MAX, cast, make_world
from navdeploy.gate import CommandGate
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime
from navdeploy.scan_map import ScanMapCfg, ScanPlanner
from navdeploy.scan_worker import ScanPlannerWorker
from navdeploy.settings import resolve_settings
from support.paths import FIXTURE_BUNDLE

MOUNT = LidarMount(0.18, -0.06, 2.0)  # off the centre and turned by 115 degrees
BEAMS = 360
RULE = LookaheadRule(1.0, 2.0)


def mounted_scan(world, pose: np.ndarray, mount: LidarMount, rng: np.random.Generator) -> ScanInput:
    """What the lidar at ``mount`` on a body at ``pose`` publishes: its own frame, beam 0 at -pi."""
    ranges = cast(world, mount.sensor_pose(pose), BEAMS, rng, 0.0)
    return ScanInput(ranges, -math.pi, 2 * math.pi / BEAMS, 0.05, RANGE_MAX, mount)


def post_gaps(world, points: np.ndarray) -> np.ndarray:
    """Each point's distance to the surface of the nearest post or wall of ``world``."""
    x0, x1, y0, y1 = world.room
    posts = np.min(np.hypot(*(points[:, None, :] - world.posts[None, :, :2]).transpose(2, 0, 1)) - world.posts[:, 2], 1)
    walls = np.min(np.abs(np.stack([points[:, 0] - x0, x1 - points[:, 0], points[:, 1] - y0, y1 - points[:, 1]])), 0)
    return np.minimum(posts, walls)


@pytest.mark.parametrize("honoured", [True, False])
def test_the_map_puts_each_return_where_the_lidar_saw_it(honoured: bool) -> None:
    """Folded with its mount, every mapped return lies on a surface (within a cell); read as if the
    lidar sat at the centre facing forward, most of them lie nowhere near one."""
    world = make_world(np.random.default_rng(5))
    planner = ScanPlanner(ScanMapCfg(), 0.2, RULE)
    pose = np.array([0.5, 0.3, 0.4])
    scan = mounted_scan(world, pose, MOUNT, np.random.default_rng(0))
    if not honoured:
        scan = ScanInput(scan.ranges, scan.angle_min, scan.angle_increment, scan.range_min, scan.range_max)
    planner.observe(scan, pose)
    m = planner.map
    points = m.hit_xy[m.occupied()]
    assert len(points) > 50
    gaps = post_gaps(world, points)
    if honoured:
        assert gaps.max() < m.h
    else:
        assert np.median(gaps) > 0.3


def test_the_worker_folds_a_mounted_scan_as_the_synchronous_planner_does() -> None:
    world = make_world(np.random.default_rng(3))
    sync = ScanPlanner(ScanMapCfg(), 0.2, RULE)
    worker = ScanPlannerWorker(ScanMapCfg(), 0.2, RULE, lockstep=True)
    try:
        pose, rng = np.array([0.0, 0.0, 0.0]), np.random.default_rng(0)
        for k in range(15):
            scan = mounted_scan(world, pose, MOUNT, rng)
            a = sync.step(scan, pose, (10.0, 0.0), 0.1 * k)
            assert worker.step(scan, pose, (10.0, 0.0), 0.1 * k) == a, k
            pose = pose + np.array([0.1, 0.0, 0.02])
        assert sync.path is not None and np.array_equal(sync.path, worker.path)
    finally:
        worker.close()


def scan_msg(ranges: np.ndarray, angle_min: float, frame: str = "laser") -> SimpleNamespace:
    n = len(ranges)
    return SimpleNamespace(
        header=SimpleNamespace(stamp=SimpleNamespace(sec=1, nanosec=0), frame_id=frame),
        angle_min=angle_min,
        angle_increment=2 * math.pi / n,
        angle_max=angle_min + (n - 1) * 2 * math.pi / n,
        range_min=0.05,
        range_max=10.0,
        ranges=[float(r) for r in ranges],
    )


def gate_for(**params) -> CommandGate:
    runtime = PolicyRuntime.load(FIXTURE_BUNDLE)
    settings, _ = resolve_settings(runtime.contract, NodeParams(scan_map=False, **params))
    return CommandGate.from_settings(runtime, settings)


def policy_beams(gate: CommandGate, msg) -> np.ndarray:
    assert gate.scan_message(msg, 1.0) is None
    gate.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, "odom")
    gate.set_goal(3.0, 0.0, "odom")
    gate.tick(1.0)
    return gate.driver.last_scan_report.ranges.copy()


def test_the_node_s_lidar_parameters_turn_the_scan_into_the_body_frame() -> None:
    """A lidar turned by 90 degrees and upside down (its angles clockwise): with the node's lidar_yaw and
    lidar_upside_down the policy gets, bit for bit, the beams of the same readings published in the
    body frame; without them a wall on the left reads as one behind."""
    n = 720
    body = np.full(n, 5.0)
    body_angles = -math.pi + np.arange(n) * 2 * math.pi / n
    body[np.abs(body_angles - math.pi / 2) < 0.3] = 0.6  # a wall 0.6 m to the left
    # The lidar's angle a points at body angle pi/2 - a: its reading at a is the body's at pi/2 - a.
    lidar_angles = -math.pi + np.arange(n) * 2 * math.pi / n
    wanted = np.remainder(math.pi / 2 - lidar_angles + math.pi, 2 * math.pi) - math.pi
    lidar = np.interp(wanted, body_angles, body, period=2 * math.pi)
    mounted = gate_for(lidar_yaw=math.pi / 2, lidar_upside_down=True)
    assert mounted.lidar_mount == LidarMount(0.0, 0.0, math.pi / 2, True)
    plain = gate_for()
    assert plain.lidar_mount is None
    want = policy_beams(plain, scan_msg(body, -math.pi, "base_link"))
    assert np.array_equal(policy_beams(mounted, scan_msg(lidar, -math.pi)), want)
    left = 54  # the beam at +90 degrees
    assert want[left] < 0.7 and policy_beams(gate_for(), scan_msg(lidar, -math.pi))[left] > 4.0


def test_the_settings_state_the_mount() -> None:
    runtime = PolicyRuntime.load(FIXTURE_BUNDLE)
    settings, _ = resolve_settings(runtime.contract, NodeParams(lidar_x=0.12, lidar_yaw=math.pi))
    assert settings.lidar_mount == LidarMount(0.12, 0.0, math.pi)
    assert "lidar at x 0.12 m, y 0 m, yaw 180.0 deg on the body" in settings.lidar_source
    assert "as trained" in resolve_settings(runtime.contract, NodeParams())[0].lidar_source
    with pytest.raises(ValueError, match="lidar_yaw"):
        NodeParams(lidar_yaw=7.0)


def test_self_radius_is_bounded_by_the_robot_s_radius() -> None:
    runtime = PolicyRuntime.load(FIXTURE_BUNDLE)
    radius = float(runtime.contract.robot_radius)
    settings, _ = resolve_settings(runtime.contract, NodeParams(self_radius=radius))
    assert settings.scan_options.self_radius == radius
    with pytest.raises(ValueError, match="parameter 'self_radius' .* beyond the robot's radius"):
        resolve_settings(runtime.contract, NodeParams(self_radius=radius + 0.01))
