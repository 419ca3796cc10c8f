"""The DWA baseline (navdeploy.dwa): limits, braking at a wall, reaching a goal, the acceleration
window, unseen sectors kept as occupied, and its parameters file; the same for a diff-drive contract
((v, w) samples, no vy). Fast: a tiny kinematic simulation with an exact 2D ray caster,
no MuJoCo and no training."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from navcontract.bundle import read_contract
from navcontract.guard import UNSEEN_CLEARANCE, guard_scale
from navcontract.scan import ScanInput, ScanUnusable
from navdeploy.dwa import DEFAULT_PARAMS_FILE, DwaConfigError, DwaParams, DwaPlanner
from support.bases import V_BACKWARD, diff_drive_contract

BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "bundle"
EPS = 1e-9


@pytest.fixture(scope="module")
def contract():
    return read_contract(BUNDLE)


@pytest.fixture
def planner(contract) -> DwaPlanner:
    return DwaPlanner(contract, DwaParams.from_yaml())


# ----------------------------------------------------------------------------------------------
# A tiny world: segments, an exact ray caster, and exact-enough kinematics.


def room_walls(half: float = 4.0) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    c = [(-half, -half), (half, -half), (half, half), (-half, half)]
    return [(c[i], c[(i + 1) % 4]) for i in range(4)]


def cast(pose, segments, n: int = 180, angle_min: float = 0.0, max_range: float = 6.0) -> ScanInput:
    """A LaserScan-like scan (not the training layout) of the segments from the robot centre."""
    x, y, yaw = pose
    ang = yaw + angle_min + np.arange(n) * (2 * math.pi / n)
    d = np.stack([np.cos(ang), np.sin(ang)], axis=1)  # (n, 2)
    ranges = np.full(n, np.inf)
    for (ax, ay), (bx, by) in segments:
        e = np.array([bx - ax, by - ay])
        w = np.array([ax - x, ay - y])
        den = d[:, 0] * (-e[1]) - d[:, 1] * (-e[0])  # det([d, -e])
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (w[0] * (-e[1]) - w[1] * (-e[0])) / den
            u = (d[:, 0] * w[1] - d[:, 1] * w[0]) / den
        hit = (np.abs(den) > 1e-12) & (t >= 0) & (u >= 0) & (u <= 1)
        ranges = np.where(hit, np.minimum(ranges, t), ranges)
    ranges = np.where(ranges > max_range, np.inf, ranges)
    return ScanInput(ranges, angle_min, 2 * math.pi / n, 0.05, max_range)


def segment_distance(p, segments) -> float:
    best = math.inf
    for a, b in segments:
        a, b = np.asarray(a, float), np.asarray(b, float)
        ab = b - a
        t = np.clip(np.dot(np.asarray(p) - a, ab) / np.dot(ab, ab), 0.0, 1.0)
        best = min(best, float(np.linalg.norm(a + t * ab - np.asarray(p))))
    return best


def integrate(pose, cmd, dt: float, substeps: int = 50):
    """Hold the body-frame command for dt (fine Euler substeps, independent of the planner's arcs)."""
    x, y, yaw = pose
    h = dt / substeps
    for _ in range(substeps):
        c, s = math.cos(yaw), math.sin(yaw)
        x += (c * cmd[0] - s * cmd[1]) * h
        y += (s * cmd[0] + c * cmd[1]) * h
        yaw += cmd[2] * h
    return (x, y, yaw)


def run_closed_loop(planner, segments, start, goal, ticks, twist0=(0.0, 0.0, 0.0)):
    """Drive with twist = previous command (a base that tracks exactly); return poses and commands."""
    pose, twist = tuple(start), np.asarray(twist0, float)
    poses, cmds = [pose], []
    planner.reset()
    for _ in range(ticks):
        cmd = planner.step(cast(pose, segments), pose, twist, goal)
        cmds.append(cmd)
        pose = integrate(pose, cmd, planner.period)
        twist = cmd
        poses.append(pose)
        if math.hypot(goal[0] - pose[0], goal[1] - pose[1]) < planner.contract.goal_tolerance:
            break
    return np.array(poses), np.array(cmds)


def within_limits(cmd, contract) -> bool:
    v, w = contract.scaling.v_max, contract.scaling.omega_max
    return bool(
        cmd.shape == (3,)
        and np.all(np.isfinite(cmd))
        and abs(cmd[0]) <= v + EPS
        and abs(cmd[1]) <= v + EPS
        and abs(cmd[2]) <= w + EPS
        and math.hypot(cmd[0], cmd[1]) <= v + EPS
    )


# ----------------------------------------------------------------------------------------------


def test_commands_stay_within_the_limits_for_random_inputs(planner, contract):
    rng = np.random.default_rng(7)
    used = 0
    for k in range(400):
        if k % 25 == 0:
            planner.reset()
        n = int(rng.integers(1, 400))
        ranges = rng.uniform(-0.5, 8.0, n)
        bad = rng.random(n)
        ranges[bad < 0.1] = np.nan
        ranges[(bad >= 0.1) & (bad < 0.2)] = np.inf
        ranges[(bad >= 0.2) & (bad < 0.25)] = -np.inf
        ranges[(bad >= 0.25) & (bad < 0.3)] = 0.0
        # Full-circle scans of any density and direction (partial arcs are refused by the scan rules).
        n = max(n, 16)
        ranges = np.resize(ranges, n)
        inc = float(rng.choice([1, -1])) * 2 * math.pi / n
        scan = ScanInput(ranges, rng.uniform(-4, 4), inc, rng.uniform(0, 0.2), rng.uniform(1, 12))
        pose = (rng.normal(0, 20), rng.normal(0, 20), rng.uniform(-10, 10))
        twist = rng.normal(0, 3.0, 3)  # often far outside the limits
        goal = (rng.normal(0, 20), rng.normal(0, 20))
        try:
            cmd = planner.step(scan, pose, twist, goal)
        except ScanUnusable:
            continue
        used += 1
        assert within_limits(cmd, contract), (k, cmd)
    assert used > 300


def test_non_finite_odometry_is_refused_not_turned_into_a_command(planner):
    scan = cast((0, 0, 0), room_walls())
    for pose, twist, goal in [
        ((math.nan, 0, 0), (0, 0, 0), (1, 1)),
        ((0, 0, 0), (math.inf, 0, 0), (1, 1)),
        ((0, 0, 0), (0, 0, 0), (1, math.nan)),
    ]:
        with pytest.raises(ValueError):
            planner.step(scan, pose, twist, goal)
    assert planner.prev_command is None


def test_brakes_within_the_window_in_front_of_a_wall(planner):
    """Facing a wall at 0.35 m at 1 m/s, goal behind it: no forward arc is admissible, so the
    command brakes by exactly a_lin * period per tick, reaches zero and never drives forward."""
    wall = [((0.35, -10.0), (0.35, 10.0))]
    a_dt = planner.params.a_lin * planner.period
    pose, twist = (0.0, 0.0, 0.0), np.array([1.0, 0.0, 0.0])
    planner.reset()
    cmd = planner.step(cast(pose, wall), pose, twist, (3.0, 0.0))
    assert planner.last_info["mode"] == "brake"
    assert cmd[0] == pytest.approx(1.0 - a_dt)
    assert abs(cmd[1]) <= EPS and cmd[2] == pytest.approx(0.0)


@pytest.mark.parametrize("gap0, v0", [(0.55, 1.0), (0.8, 1.5), (2.0, 1.5)])
def test_stops_in_front_of_a_wall_it_faces(planner, gap0, v0):
    """Closed loop toward a long wall with the goal behind it: the forward command never rises,
    the centre stays >= radius + margin from the wall, and the robot comes to rest (no creep)."""
    wall = [((gap0, -20.0), (gap0, 20.0))]
    poses, cmds = run_closed_loop(planner, wall, (0.0, 0.0, 0.0), (gap0 + 2.0, 0.0), ticks=50, twist0=(v0, 0, 0))
    gap = gap0 - poses[:, 0]
    assert gap.min() >= planner.safe_distance - 1e-6, gap.min()
    assert np.all(np.diff(cmds[:, 0]) <= EPS), cmds[:, 0]  # never speeds up toward the wall
    assert cmds[0, 0] <= v0 + EPS
    assert np.all(np.abs(cmds[-10:, 0]) <= 1e-6), cmds[-10:]
    assert np.ptp(poses[-10:, 0]) <= 0.01  # at rest in front of the wall (no more than dither)


def test_reaches_a_goal_in_an_empty_room(planner):
    walls = room_walls(4.0)
    start, goal = (-3.0, -2.5, 2.5), (2.8, 2.6)
    poses, cmds = run_closed_loop(planner, walls, start, goal, ticks=200)
    final = poses[-1]
    assert math.hypot(goal[0] - final[0], goal[1] - final[1]) < planner.contract.goal_tolerance
    clearance = min(segment_distance(p[:2], walls) for p in poses)
    assert clearance > planner.robot_radius
    assert len(cmds) * planner.period < 10.0  # ~8.3 m at up to 1.5 m/s


def test_goes_around_a_small_obstacle_without_touching_it(planner):
    """A 0.3 m post on the straight line to the goal. (A wide wall square across the line is a
    local minimum that this memoryless DWA does not escape: it stops in front of it.)"""
    walls = room_walls(4.0)
    box = [
        ((0.0, -0.15), (0.3, -0.15)),
        ((0.3, -0.15), (0.3, 0.15)),
        ((0.3, 0.15), (0.0, 0.15)),
        ((0.0, 0.15), (0.0, -0.15)),
    ]
    segs = walls + box
    start, goal = (-2.5, 0.05, 0.0), (2.5, 0.0)
    poses, _ = run_closed_loop(planner, segs, start, goal, ticks=250)
    assert math.hypot(goal[0] - poses[-1, 0], goal[1] - poses[-1, 1]) < planner.contract.goal_tolerance
    assert min(segment_distance(p[:2], box) for p in poses) > planner.robot_radius


def test_respects_the_acceleration_window(planner):
    """|command_t - command_{t-1}| <= (a_lin, a_lin, a_ang) * period per tick, in closed loop
    through clutter and with scans that change abruptly."""
    rng = np.random.default_rng(3)
    half = np.array([planner.params.a_lin, planner.params.a_lin, planner.params.a_ang]) * planner.period
    segs = room_walls(4.0) + [((1.0, -1.0), (1.0, 1.5)), ((-1.5, 1.0), (0.5, 2.5))]
    _, cmds = run_closed_loop(planner, segs, (-3.0, 0.0, 0.0), (3.0, 3.0), ticks=150)
    assert len(cmds) > 10
    assert np.all(np.abs(np.diff(cmds, axis=0)) <= half + EPS)
    # Random scans and goals, base following the commands.
    planner.reset()
    prev = np.zeros(3)
    for _ in range(200):
        ranges = rng.uniform(0.2, 6.0, 72)
        cmd = planner.step(ScanInput.training_beams(ranges, 72), (0, 0, rng.uniform(-3, 3)), prev, rng.normal(0, 3, 2))
        assert np.all(np.abs(cmd - prev) <= half + EPS), (cmd, prev)
        prev = cmd


def test_first_window_after_reset_is_centred_on_the_measured_twist(planner):
    scan = cast((0, 0, 0), room_walls())
    half = np.array([planner.params.a_lin, planner.params.a_lin, planner.params.a_ang]) * planner.period
    twist = np.array([0.8, -0.3, 0.5])
    planner.reset()
    cmd = planner.step(scan, (0, 0, 0), twist, (3.0, 0.0))
    assert np.all(np.abs(cmd - twist) <= half + EPS)


def test_brakes_inside_the_goal_tolerance(planner):
    scan = cast((0, 0, 0), room_walls())
    planner.reset()
    cmd = planner.step(scan, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.1, 0.0))
    assert planner.last_info["mode"] == "goal_reached"
    assert cmd[0] == pytest.approx(1.0 - planner.params.a_lin * planner.period)


def test_unusable_scan_raises_before_touching_state(planner):
    planner.reset()
    with pytest.raises(ScanUnusable):
        planner.step(ScanInput(np.full(10, np.nan), -math.pi, 0.6), (0, 0, 0), (0, 0, 0), (1, 0))
    assert planner.prev_command is None


def narrowed(scan: ScanInput, fov_deg: float) -> ScanInput:
    """``scan`` as a lidar of ``fov_deg`` degrees centred on forward publishes it: only the readings
    inside its view, from its first one counter-clockwise."""
    ang = np.angle(np.exp(1j * (scan.angle_min + np.arange(len(scan.ranges)) * scan.angle_increment)))
    keep = np.flatnonzero(np.abs(ang) <= math.radians(fov_deg) / 2 + 1e-9)
    order = keep[np.argsort(ang[keep])]
    return ScanInput(scan.ranges[order], float(ang[order[0]]), scan.angle_increment, scan.range_min, scan.range_max)


def blind_speed(cmd: np.ndarray, fov_deg: float) -> float:
    """The command's planar speed when it points into the blind sector (0 otherwise)."""
    bearing = abs(math.degrees(math.atan2(cmd[1], cmd[0])))
    return math.hypot(cmd[0], cmd[1]) if bearing > fov_deg / 2 else 0.0


@pytest.mark.parametrize("blind", ["fov", "no readings"])
def test_never_moves_into_what_the_scan_does_not_see(planner, blind):
    """The goal 3 m behind in an empty room: with a full view the planner backs toward it at full
    speed; with a 270-degree lidar, or a full one whose readings behind are all invalid (the scan
    rule fills them for lack of readings), it never moves into the blind sector at all, and still gets
    to the goal (sideways while it turns)."""
    rule = planner.unseen
    assert planner.contract.guard is None and rule.unseen_clearance == UNSEEN_CLEARANCE  # the fallback rule
    assert rule.radius + rule.margin == pytest.approx(planner.safe_distance)

    def scan_at(pose, fov: float) -> ScanInput:
        full = cast(pose, room_walls(), n=360)
        if fov >= 360.0:
            return full
        if blind == "fov":
            return narrowed(full, fov)
        ang = np.angle(np.exp(1j * (full.angle_min + np.arange(360) * full.angle_increment)))
        ranges = np.where(np.abs(ang) > math.radians(fov) / 2 + 1e-9, np.nan, full.ranges)
        return ScanInput(ranges, full.angle_min, full.angle_increment, full.range_min, full.range_max)

    for fov in (360.0, 270.0):
        planner.reset()
        pose, twist, goal, fastest = (0.0, 0.0, 0.0), np.zeros(3), (-3.0, 0.5), 0.0
        for _ in range(60):
            cmd = planner.step(scan_at(pose, fov), pose, twist, goal)
            fastest = max(fastest, blind_speed(cmd, 270.0))
            pose, twist = integrate(pose, cmd, planner.period), cmd
        assert math.hypot(goal[0] - pose[0], goal[1] - pose[1]) < 0.5, (fov, pose)
        if fov >= 360.0:
            assert fastest > 1.0  # backing straight at the goal: what the blind robot must not do
        else:
            assert fastest <= 1e-9, fastest


def test_already_backing_fast_into_a_blind_sector_it_brakes(planner):
    """Backing at 1.4 m/s with a 270-degree lidar: no sample of the window is admissible (each backs
    fast into the unseen sector), so the planner brakes by its window (the gate's guard then cuts the
    rest at once, tests/runtime/test_controller.py)."""
    planner.reset()
    scan = narrowed(cast((0.0, 0.0, 0.0), room_walls(), n=360), 270.0)
    cmd = planner.step(scan, (0.0, 0.0, 0.0), (-1.4, 0.0, 0.0), (-3.0, 0.0))
    assert planner.last_info["mode"] == "brake" and planner.last_info["n_admissible"] == 0
    assert cmd[0] == pytest.approx(-1.4 + planner.params.a_lin * planner.period)


# ----------------------------------------------------------------------------------------------
# Parameters and construction


def test_default_yaml_loads_and_matches_the_class_defaults():
    assert DwaParams.from_yaml(DEFAULT_PARAMS_FILE) == DwaParams()


def test_yaml_with_an_unknown_key_is_refused_naming_it(tmp_path):
    p = tmp_path / "dwa.yaml"
    p.write_text("a_lin: 2.0\nw_sped: 0.1\n")
    with pytest.raises(DwaConfigError) as err:
        DwaParams.from_yaml(p)
    msg = str(err.value)
    assert "'w_sped'" in msg and "\n" not in msg


@pytest.mark.parametrize(
    "text, word",
    [("n_vx: 2.5\n", "n_vx"), ("a_lin: fast\n", "a_lin"), ("a_lin: -1\n", "a_lin"), ("w_speed: true\n", "w_speed")],
)
def test_yaml_with_bad_values_is_refused_naming_the_key(tmp_path, text, word):
    p = tmp_path / "dwa.yaml"
    p.write_text(text)
    with pytest.raises(DwaConfigError, match=word):
        DwaParams.from_yaml(p)


def test_yaml_scientific_notation_is_a_number(tmp_path):
    p = tmp_path / "dwa.yaml"
    p.write_text("safety_margin: 5e-2\n")
    assert DwaParams.from_yaml(p).safety_margin == pytest.approx(0.05)


def test_horizon_shorter_than_braking_is_refused(contract):
    with pytest.raises(DwaConfigError, match="horizon_s"):
        DwaPlanner(contract, DwaParams(a_lin=1.0, horizon_s=0.8))


def test_built_from_the_contract(planner, contract):
    assert planner.contract is contract
    assert planner.v_max == contract.scaling.v_max and planner.omega_max == contract.scaling.omega_max
    assert planner.period == contract.control_period
    assert planner.robot_radius == pytest.approx(0.2) and planner.radius_source == "contract"


def test_import_needs_numpy_only():
    code = (
        "import sys; import navdeploy.dwa; "
        "bad = [m for m in ('torch', 'mujoco', 'navsim', 'navtrain', 'onnxruntime') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


# ----------------------------------------------------------------------------------------------
# A differential-drive contract: (v, w) samples only, vx within [-v_backward, v_max].


@pytest.fixture
def diff_planner() -> DwaPlanner:
    return DwaPlanner(diff_drive_contract(), DwaParams.from_yaml())


def within_diff_limits(cmds: np.ndarray, planner: DwaPlanner) -> bool:
    cmds = np.asarray(cmds).reshape(-1, 3)
    return bool(
        np.all(np.isfinite(cmds))
        and np.all(cmds[:, 1] == 0.0)
        and np.all(cmds[:, 0] >= -V_BACKWARD - EPS)
        and np.all(cmds[:, 0] <= planner.v_max + EPS)
        and np.all(np.abs(cmds[:, 2]) <= planner.omega_max + EPS)
    )


def test_diff_drive_samples_v_and_w_only(diff_planner):
    p = diff_planner.params
    samples = diff_planner.candidates(np.array([0.4, 0.0, 0.5]))
    assert samples.shape[0] == p.n_vx * p.n_wz + 2 and np.all(samples[:, 1] == 0.0)
    rear = diff_planner.candidates(np.array([-0.45, 0.0, 0.0]))
    assert rear[:, 0].min() == pytest.approx(-V_BACKWARD)  # the window stops at the backward limit
    assert np.array_equal(diff_planner.clamp(np.array([-3.0, 2.0, 9.0])), [-V_BACKWARD, 0.0, 2.0])


def test_diff_drive_reaches_a_goal_behind_left_in_an_open_field_without_moving_sideways(diff_planner):
    start, goal = (0.0, 0.0, 0.0), (-2.0, 1.5)
    poses, cmds = run_closed_loop(diff_planner, [], start, goal, ticks=200)
    assert math.hypot(goal[0] - poses[-1, 0], goal[1] - poses[-1, 1]) < diff_planner.contract.goal_tolerance
    assert within_diff_limits(cmds, diff_planner)
    assert np.abs(cmds[:, 2]).max() > 0.5  # it turned (unicycle arcs), it did not slide


def test_diff_drive_stops_in_front_of_a_wall_it_faces(diff_planner):
    """At 1 m/s toward a long wall 1.2 m ahead, the goal behind it: the robot stays >= radius + margin
    from the wall and comes to rest."""
    wall = [((1.2, -20.0), (1.2, 20.0))]
    poses, cmds = run_closed_loop(diff_planner, wall, (0.0, 0.0, 0.0), (3.2, 0.0), ticks=60, twist0=(1.0, 0, 0))
    assert (1.2 - poses[:, 0]).min() >= diff_planner.safe_distance - 1e-6
    assert within_diff_limits(cmds, diff_planner)
    assert np.all(np.abs(cmds[-10:, 0]) <= 1e-6), cmds[-10:]


def test_diff_drive_commands_stay_within_its_limits_for_random_inputs(diff_planner):
    rng = np.random.default_rng(11)
    for k in range(150):
        if k % 25 == 0:
            diff_planner.reset()
        ranges = rng.uniform(0.1, 8.0, 72)
        twist = rng.normal(0, 2.0, 3)  # a lateral twist (odometry of a skidding base) included
        cmd = diff_planner.step(
            ScanInput.training_beams(ranges, 72), (0, 0, rng.uniform(-3, 3)), twist, rng.normal(0, 3, 2)
        )
        assert within_diff_limits(cmd, diff_planner), cmd


def test_diff_drive_never_backs_into_what_the_scan_does_not_see(diff_planner):
    """The goal 3 m behind with a 270-degree lidar: backing is motion into the blind sector, so the
    planner never backs, and turns to get there."""
    pose, twist, goal, fastest = (0.0, 0.0, 0.0), np.zeros(3), (-3.0, 0.5), 0.0
    diff_planner.reset()
    for _ in range(120):
        scan = narrowed(cast(pose, room_walls(), n=360), 270.0)
        cmd = diff_planner.step(scan, pose, twist, goal)
        assert within_diff_limits(cmd, diff_planner)
        fastest = max(fastest, blind_speed(cmd, 270.0))
        pose, twist = integrate(pose, cmd, diff_planner.period), cmd
        if math.hypot(goal[0] - pose[0], goal[1] - pose[1]) < diff_planner.contract.goal_tolerance:
            break
    assert math.hypot(goal[0] - pose[0], goal[1] - pose[1]) < 0.5, pose
    assert fastest <= 1e-9, fastest


# ----------------------------------------------------------------------------------------------
# One rule with the guard: the planner keeps the guard its command is checked by.

DEFAULT_BUNDLE = (
    Path(__file__).resolve().parents[2] / "ros2_ws" / "src" / "nav_policy" / "nav_policy" / "default_bundle"
)


@pytest.fixture(scope="module")
def guarded_contract():
    contract = read_contract(DEFAULT_BUNDLE)
    assert contract.guard is not None  # the shipped default was trained driving through the guard
    return contract


def post(cx: float, cy: float, r: float = 0.075) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """A square post of half side ``r`` centred at (cx, cy)."""
    c = [(cx - r, cy - r), (cx + r, cy - r), (cx + r, cy + r), (cx - r, cy + r)]
    return [(c[i], c[(i + 1) % 4]) for i in range(4)]


def test_with_a_guard_it_keeps_the_guards_passing_clearance(guarded_contract):
    """The planner's clearance is the guard's passing clearance on the contract's beams, not its own
    radius + safety margin (which asks more than the guard, and refuses gaps the guard lets through)."""
    planner = DwaPlanner(guarded_contract, DwaParams.from_yaml())
    rule = guarded_contract.guard
    assert planner.guard is rule
    assert planner.safe_distance == pytest.approx(rule.passing_clearance(guarded_contract.num_beams))
    assert planner.safe_distance < planner.robot_radius + planner.params.safety_margin


@pytest.mark.parametrize("drive", ["holonomic", "diff_drive"])
def test_with_a_guard_it_asks_only_for_what_the_guard_leaves(guarded_contract, drive):
    """Through a slalom of posts at full speed, either drive: every command the planner gives is one
    the guard, on the very beams the planner read, leaves as it is, and the robot gets through without
    touching."""
    if drive == "diff_drive":
        guarded_contract = diff_drive_contract(guard=guarded_contract.guard)
    planner = DwaPlanner(guarded_contract, DwaParams.from_yaml())
    rule = guarded_contract.guard
    assert rule is not None and planner.guard == rule
    segs = room_walls(4.0)
    for k, x in enumerate(np.arange(-2.0, 2.6, 0.6)):
        segs += post(float(x), 0.35 if k % 2 else -0.35)
    pose, twist, goal = (-3.2, 0.0, 0.0), np.zeros(3), (3.2, 0.0)
    planner.reset()
    scales, clearances = [], []
    for _ in range(300):
        cmd = planner.step(cast(pose, segs, n=720), pose, twist, goal)
        report = planner.last_scan_report
        scales.append(float(guard_scale(report.ranges, cmd, rule, float(guarded_contract.max_range), ~report.filled)))
        pose, twist = integrate(pose, cmd, planner.period), cmd
        clearances.append(segment_distance(pose[:2], segs))
        if math.hypot(goal[0] - pose[0], goal[1] - pose[1]) < guarded_contract.goal_tolerance:
            break
    assert math.hypot(goal[0] - pose[0], goal[1] - pose[1]) < guarded_contract.goal_tolerance, pose
    assert min(scales) >= 1.0 - 1e-3, min(scales)  # float32 rounding of the guard
    assert min(clearances) > planner.robot_radius


def test_the_window_starts_from_the_command_that_went_out(planner):
    """Behind the gate the command that left (after its smoother and guard) may differ from the
    planner's: told that the guard cut it to zero, the next window is centred on zero, not on the
    speed the planner asked for (a planner that kept braking from that speed stood still for ticks)."""
    scan = cast((0, 0, 0), room_walls())
    half = planner.half_window
    planner.reset()
    cmd = planner.step(scan, (0, 0, 0), np.array([1.2, 0.0, 0.0]), (3.0, 0.0))
    assert cmd[0] > 1.0
    planner.command_sent(np.zeros(3))
    nxt = planner.step(scan, (0, 0, 0), np.array([1.1, 0.0, 0.0]), (3.0, 0.0))
    assert np.all(np.abs(nxt) <= half + EPS), nxt


def test_behind_the_gate_it_plans_with_the_gates_guard_and_smoother(guarded_contract):
    """The command gate hands the planner the guard and the acceleration limits it applies: the window
    never asks for a change the smoother would cut, the clearance is the gate's guard's."""
    from navdeploy.gate import CommandGate
    from navdeploy.node_params import NodeParams
    from navdeploy.settings import resolve_settings

    settings, _ = resolve_settings(guarded_contract, NodeParams())
    planner = DwaPlanner(guarded_contract, DwaParams.from_yaml().replace(a_lin=9.0, a_ang=9.0))
    CommandGate.from_settings(planner, settings)
    assert planner.guard is settings.guard
    limits = settings.accel_limits
    assert limits.linear is not None and limits.linear < 9.0
    assert planner.half_window[0] == pytest.approx(limits.linear * planner.period)
    assert planner.half_window[2] == pytest.approx(limits.angular * planner.period)


def test_it_follows_paths_with_its_own_lookahead_and_a_far_sub_goal_lets_it_drive_fast():
    """The sub-goal along the scan map's paths the DWA drives to lies ``v_max * path_lookahead_s``
    ahead (a path on the plan topic keeps the bundle's rule; the node parameter path_lookahead, when
    set, and ``path_lookahead_s`` 0 give the policy's rule back everywhere): a
    diff-drive base in open space, chasing a sub-goal that far ahead, reaches over 90 % of v_max; one
    0.7 m ahead (the Jackal policy's trained lookahead) holds it under 70 %."""
    from navdeploy.node_params import NodeParams
    from navdeploy.settings import resolve_settings
    from support.bases import diff_drive_contract

    contract = diff_drive_contract()

    planner = DwaPlanner(contract, DwaParams.from_yaml())
    assert planner.path_lookahead == pytest.approx(planner.v_max * DwaParams().path_lookahead_s)
    policy_rule = resolve_settings(contract)[0].path_rule
    s, _ = resolve_settings(contract, NodeParams(), planner)
    assert s.map_path_rule.lookahead == pytest.approx(planner.path_lookahead) and "the driver's own" in s.path_source
    assert s.path_rule == policy_rule  # a path on the plan topic: the bundle's rule
    s, _ = resolve_settings(contract, NodeParams(path_lookahead=0.5), planner)
    assert s.path_rule.lookahead == s.map_path_rule.lookahead == 0.5
    no_own = DwaPlanner(contract, DwaParams(path_lookahead_s=0.0))
    assert no_own.path_lookahead is None
    s, _ = resolve_settings(contract, NodeParams(), no_own)
    assert s.path_rule == s.map_path_rule == policy_rule

    def top_speed(ahead: float) -> float:
        planner.reset()
        pose, twist, fastest = np.zeros(3), np.zeros(3), 0.0
        for _ in range(40):
            goal = (pose[0] + ahead, 0.0)  # the sub-goal slides along a straight path
            cmd = planner.step(cast(pose, [], n=720), pose, twist, goal)
            pose, twist = integrate(pose, cmd, planner.period), cmd
            fastest = max(fastest, math.hypot(cmd[0], cmd[1]))
        return fastest

    assert top_speed(planner.path_lookahead) > 0.9 * planner.v_max
    assert top_speed(0.7) < 0.7 * planner.v_max


@pytest.mark.parametrize("guarded", [True, False])
def test_it_never_turns_a_near_post_out_of_a_270_degree_view(guarded_contract, guarded):
    """A diff drive with a 270-degree lidar, a post 2 cm from its shell just inside the right-rear
    edge of the view, the goal behind on the left (the planner wants a counter-clockwise turn, which
    carries the post into the blind sector): its turn is never faster than rule step 0b lets it be
    on the beams it read, with the contract's guard and with its own unseen rule alike; with the step
    off, the same planner turns faster than that."""
    from dataclasses import replace

    from navcontract.guard import sight_turn_caps

    rule = guarded_contract.guard
    centre = 0.2 + 0.02 + 0.075 * math.sqrt(2.0)
    bearing = math.radians(-122.0)
    segs = room_walls(4.0) + post(centre * math.cos(bearing), centre * math.sin(bearing))
    scan = narrowed(cast((0.0, 0.0, 0.0), segs, n=720), 270.0)
    turns = {}
    for keep in (True, False):
        kept = replace(rule, keep_sight=keep)
        contract = diff_drive_contract(guard=kept if guarded else None)
        planner = DwaPlanner(contract, DwaParams.from_yaml())
        if not guarded:
            planner.unseen = replace(planner.unseen, keep_sight=keep)
        planner.reset()
        cmd = planner.step(scan, (0.0, 0.0, 0.0), np.zeros(3), (-2.0, 2.0))
        report = planner.last_scan_report
        up, _ = sight_turn_caps(report.ranges, ~report.filled, planner.guard or planner.unseen)
        turns[keep] = (float(cmd[2]), float(up))
    (held, cap), (free, _) = turns[True], turns[False]
    assert cap < 0.5 and held <= cap + 1e-6, turns
    assert free > cap + 0.1, turns
