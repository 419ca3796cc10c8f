"""Scan rule 0 (navcontract.scan.LidarMount): a lidar that is not at the body's centre, facing forward,
upright, gives the policy the beams the training lidar at the centre would have given."""

from __future__ import annotations

import math

import numpy as np
import pytest

from navcontract.scan import LidarMount, ScanInput, ScanOptions, resample_scan

BEAMS, MAX_RANGE = 72, 6.0
ANY_GAP = ScanOptions(max_fill_gap=BEAMS)  # a turned 270-degree lidar's blind sector may lie ahead
ROOM = (-5.0, 5.0, -4.5, 4.5)


def posts_world(seed: int) -> np.ndarray:
    """(P, 3) posts (x, y, radius), 70 % of them 0.075 m thin, none within 0.5 m of the origin."""
    rng = np.random.default_rng(seed)
    posts: list[tuple[float, float, float]] = []
    while len(posts) < 40:
        x, y = rng.uniform(-4.0, 4.0, 2)
        r = 0.075 if rng.random() < 0.7 else rng.uniform(0.1, 0.3)
        if math.hypot(x, y) > r + 0.5 and all(math.hypot(x - q[0], y - q[1]) > r + q[2] + 0.3 for q in posts):
            posts.append((x, y, r))
    return np.array(posts)


def cast(posts: np.ndarray, origin: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Distances from ``origin`` along world ``angles`` to the room's walls or the nearest post."""
    d = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    x0, x1, y0, y1 = ROOM
    with np.errstate(divide="ignore", invalid="ignore"):
        tx = np.where(d[:, 0] > 0, (x1 - origin[0]) / d[:, 0], (x0 - origin[0]) / d[:, 0])
        ty = np.where(d[:, 1] > 0, (y1 - origin[1]) / d[:, 1], (y0 - origin[1]) / d[:, 1])
    tx, ty = np.where(d[:, 0] == 0, np.inf, tx), np.where(d[:, 1] == 0, np.inf, ty)  # along a wall: never
    w = posts[:, :2] - origin[:2]
    along = d @ w.T
    disc = posts[:, 2] ** 2 - (np.sum(w * w, axis=1)[None, :] - along**2)
    hit = np.where(disc >= 0, along - np.sqrt(np.maximum(disc, 0.0)), np.inf)
    return np.minimum(np.minimum(tx, ty), np.where(hit > 0, hit, np.inf).min(axis=1))


def mounted_scan(posts: np.ndarray, pose: np.ndarray, mount: LidarMount, beams: int, a0: float) -> ScanInput:
    """What a ``beams``-beam 360-degree lidar at ``mount`` on a body at ``pose`` publishes (its own frame)."""
    sensor = mount.sensor_pose(pose)
    theta = a0 + np.arange(beams) * (2.0 * math.pi / beams)
    r = cast(posts, sensor, sensor[2] + mount.sign * theta)
    return ScanInput(np.where(r < 12.0, r, np.inf), a0, 2.0 * math.pi / beams, 0.05, 12.0, mount)


def centre_truth(posts: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """The training lidar's beams at ``pose``: the sector minimum of a 14,400-beam lidar at the centre."""
    n = 14_400
    r = cast(posts, pose, pose[2] - math.pi + np.arange(n) * (2.0 * math.pi / n))
    return resample_scan(ScanInput(r, -math.pi, 2.0 * math.pi / n, 0.0, 30.0), BEAMS, MAX_RANGE)


@pytest.mark.parametrize("upside_down", [False, True])
@pytest.mark.parametrize("yaw", [0.0, math.pi / 2, -2.0, math.pi])
def test_a_lidar_turned_at_the_centre_reads_as_its_readings_turned(yaw: float, upside_down: bool) -> None:
    """At the centre, a turned or upside-down lidar is the same readings at body angles yaw +- angle:
    bit for bit what a body-frame scan with those angles gives, on any beam count and field of view."""
    rng = np.random.default_rng(7)
    mount = LidarMount(yaw=yaw, upside_down=upside_down)
    for n, fov in ((360, 2 * math.pi), (1081, math.radians(270)), (720, math.radians(270))):
        ranges = rng.uniform(0.2, 8.0, n)
        ranges[rng.random(n) < 0.05] = np.nan
        inc = fov / (n if fov > 6.28 else n - 1)
        a0 = -0.5 * fov if fov < 6.28 else 0.0
        scan = ScanInput(ranges, a0, inc, 0.05, 10.0, mount)
        got = resample_scan(scan, BEAMS, MAX_RANGE, options=ANY_GAP, return_report=True)
        s = -1.0 if upside_down else 1.0
        body = ScanInput(ranges, yaw + s * a0, s * inc, 0.05, 10.0)
        want = resample_scan(body, BEAMS, MAX_RANGE, options=ANY_GAP, return_report=True)
        assert np.array_equal(got.ranges, want.ranges) and np.array_equal(got.filled, want.filled)


def test_the_identity_mount_changes_nothing() -> None:
    rng = np.random.default_rng(3)
    ranges = rng.uniform(0.1, 9.0, 1081)
    plain = ScanInput(ranges, -2.35, math.radians(270) / 1080, 0.05, 10.0)
    mounted = ScanInput(ranges, -2.35, math.radians(270) / 1080, 0.05, 10.0, LidarMount())
    assert np.array_equal(resample_scan(plain, BEAMS, MAX_RANGE), resample_scan(mounted, BEAMS, MAX_RANGE))


@pytest.mark.parametrize(
    "mount",
    [
        LidarMount(0.0, 0.0, math.pi / 2),  # a TurtleBot 4's lidar is turned by 90 degrees
        LidarMount(0.15, 0.05, math.pi / 2),
        LidarMount(0.25, 0.0, 0.0),  # a front-mounted lidar
        LidarMount(-0.2, 0.1, -2.5, upside_down=True),
    ],
)
@pytest.mark.parametrize("seed", [3, 11])
def test_a_lidar_anywhere_on_the_body_gives_the_centre_lidar_s_beams(mount: LidarMount, seed: int) -> None:
    """Among posts, a 1440-beam lidar on the mount resampled with it gives the centre lidar's sector
    minima to a centimetre in most sectors, and no sector unseen; read as if at the centre, it is off
    by decimetres to metres. Where the two differ by more than 3 cm, the mounted one reads nearer:
    what the lidar cannot see from off the centre (behind a post's edge) reads as that edge, and the
    far side of a post it sees from there is nearer than what the centre sees."""
    posts = posts_world(seed)
    pose = np.array([0.3, -0.2, 0.7])
    truth = centre_truth(posts, pose)
    scan = mounted_scan(posts, pose, mount, 1440, 0.0)
    report = resample_scan(scan, BEAMS, MAX_RANGE, return_report=True)
    err = report.ranges - truth
    assert np.median(np.abs(err)) < 0.01 and np.mean(np.abs(err) < 0.03) >= 0.8, np.sort(err)
    assert (err > 0.03).sum() == 0 and not report.filled.any(), np.sort(err)[-5:]
    ignored = ScanInput(scan.ranges, scan.angle_min, scan.angle_increment, scan.range_min, scan.range_max)
    assert np.median(np.abs(resample_scan(ignored, BEAMS, MAX_RANGE) - truth)) > (0.1 if mount.yaw else 0.01)


def test_the_space_a_post_hides_from_a_lidar_off_the_centre_reads_as_the_post_s_edge() -> None:
    """A post 0.35 m ahead of a lidar 0.2 m forward of the centre hides a wedge that the centre would see
    past it: the sectors of that wedge read the post's distance, not free space and not unseen."""
    posts = np.array([[0.55, 0.0, 0.075]])
    pose = np.array([0.0, 0.0, 0.0])
    mount = LidarMount(0.2, 0.0, 0.0)
    report = resample_scan(mounted_scan(posts, pose, mount, 1440, 0.0), BEAMS, MAX_RANGE, return_report=True)
    truth = centre_truth(posts, pose)
    ahead = [35, 36, 37]  # -5, 0 and +5 degrees
    assert not report.filled.any() and np.all(report.ranges[ahead] < 0.5)
    assert np.all(report.ranges <= truth + 0.03)  # never further than the centre sees


def test_off_the_centre_no_return_stays_no_return_and_invalid_readings_keep_their_direction() -> None:
    mount = LidarMount(0.2, -0.1, 1.0)
    ranges = np.full(360, np.inf)
    ranges[:40] = np.nan  # 40 degrees without a valid reading
    report = resample_scan(
        ScanInput(ranges, 0.0, 2 * math.pi / 360, 0.05, 8.0, mount),
        BEAMS,
        MAX_RANGE,
        options=ANY_GAP,
        return_report=True,
    )
    assert np.all(report.ranges == MAX_RANGE)  # free space all round, from wherever the lidar sits
    assert report.covered.all() and report.filled.sum() in (7, 8, 9)  # the blind 40 degrees, turned by 1 rad
    body = np.degrees(np.arctan2(np.sin(1.0 + np.radians(20.0)), np.cos(1.0 + np.radians(20.0))))
    sectors = np.flatnonzero(report.filled)
    centres = -180.0 + 5.0 * sectors
    assert np.all(np.abs(centres - body) <= 25.0)


@pytest.mark.parametrize("bad", [{"x": math.nan}, {"yaw": math.inf}, {"y": "0.1"}, {"x": True}])
def test_a_mount_must_be_finite_numbers(bad: dict) -> None:
    with pytest.raises(ValueError, match="lidar mount"):
        LidarMount(**bad)


def test_the_sensor_pose_composes_with_the_body_pose() -> None:
    m = LidarMount(0.2, 0.1, 0.5)
    x, y, yaw = m.sensor_pose(np.array([1.0, 2.0, math.pi / 2]))
    assert (x, y, yaw) == pytest.approx((1.0 - 0.1, 2.0 + 0.2, math.pi / 2 + 0.5))


def test_the_robot_s_own_parts_within_self_radius_are_dropped_wherever_the_lidar_sits() -> None:
    """Four standoffs 0.12 m from the body's centre, seen by a lidar 3 cm behind it: read as obstacles
    touching the robot, unless self_radius (0.15 m, measured from the centre after rule 0) drops them;
    the sectors they hide (the lidar sees nothing behind them) are then filled from their neighbours."""
    mount = LidarMount(-0.03, 0.0, 0.0)
    n = 1440
    theta = -math.pi + np.arange(n) * 2 * math.pi / n
    ranges = np.full(n, 2.0 + 0.1)  # the body's surroundings: about 2 m of room
    standoffs = [(0.12 * math.cos(a), 0.12 * math.sin(a)) for a in (0.6, 2.5, -2.5, -0.6)]
    for sx, sy in standoffs:  # each a post of 1 cm radius, as the lidar sees it
        dx, dy = sx - mount.x, sy - mount.y
        bearing, dist = math.atan2(dy, dx), math.hypot(dx, dy)
        near = np.abs(np.remainder(theta - bearing + math.pi, 2 * math.pi) - math.pi) < math.asin(0.01 / dist)
        ranges[near] = dist - 0.01
    scan = ScanInput(ranges, -math.pi, 2 * math.pi / n, 0.05, 10.0, mount)
    seen = resample_scan(scan, BEAMS, MAX_RANGE, options=ANY_GAP)
    assert seen.min() < 0.13  # the standoffs, read as obstacles at the robot's rim
    own = ScanOptions(max_fill_gap=BEAMS, self_radius=0.15)
    report = resample_scan(scan, BEAMS, MAX_RANGE, options=own, return_report=True)
    assert report.ranges.min() > 1.9 and report.filled.any() and report.valid_share < 1.0
    with pytest.raises(ValueError, match="self_radius"):
        ScanOptions(self_radius=-0.1)
