"""One clearance between the scan map's planner and the guard, a path the guard keeps refusing
re-planned, and a robot without progress stuck and recovering (navdeploy.scan_map, navdeploy.gate,
navdeploy.progress): synthetic scans, the gate driven without ROS."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from navcontract.base import DIFF_DRIVE
from navcontract.bundle import read_contract
from navcontract.guard import GuardRule, apply_guard, free_distances, guard_scale
from navcontract.scan import ScanInput, ScanReport, resample_scan
from navcontract.subgoal import LookaheadRule
from navdeploy.gate import TURN_RATE, CommandGate
from navdeploy.node_params import NodeParams
from navdeploy.progress import ProgressChecker, ProgressRule, recovery_command
from navdeploy.scan_map import ScanMapCfg, ScanPlanner, plan_radii
from navdeploy.scan_worker import ScanPlannerWorker
from navdeploy.settings import Limits, resolve_settings
from navdeploy.states import State
from support.gates import make_gate
from support.paths import REPO
from support.recorded_scans import EPISODE_273_GUARD, EPISODE_273_RANGES

GUARD = GuardRule(radius=0.2, margin=0.03, headway=0.5, decel=2.5, slide=False)  # the shipped default's numbers
RADIUS = 0.2
B = 72
R_MAX = 6.0
DENSE = 720
DT = 0.1
WALL_X, MID_Y = 2.025, 0.025  # a column and a row of cell centres: a gap's clearance is then half its width
START = np.array([0.8, MID_Y, 0.0])
GOAL = (4.0, MID_Y)
DEFAULT_BUNDLE = REPO / "ros2_ws" / "src" / "nav_policy" / "nav_policy" / "default_bundle"

Walls = list[tuple[tuple[float, float], tuple[float, float]]]
BOXED = ScanMapCfg(box_margin_max=ScanMapCfg().box_margin)
"""The map's planner without wider boxes: a wall of :func:`wall_with` has no way round on it."""


def cast(pose: np.ndarray, walls: Walls, beams: int = DENSE) -> ScanInput:
    """A 360-degree scan of ``beams`` beams from ``pose`` against wall segments (numpy ray casting)."""
    ang = -math.pi + 2 * math.pi * np.arange(beams) / beams + pose[2]
    d = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    r = np.full(beams, R_MAX)
    for a, b in walls:
        a, b = np.asarray(a, float), np.asarray(b, float)
        e, w = b - a, a - pose[:2]
        den = -d[:, 0] * e[1] + d[:, 1] * e[0]
        ok = np.abs(den) > 1e-12
        safe = np.where(ok, den, 1.0)
        t = np.where(ok, (-w[0] * e[1] + w[1] * e[0]) / safe, np.inf)
        u = np.where(ok, (d[:, 0] * w[1] - d[:, 1] * w[0]) / safe, -1.0)
        r = np.where(ok & (t > 0) & (u >= 0) & (u <= 1), np.minimum(r, t), r)
    return ScanInput(r, -math.pi, 2 * math.pi / beams, 0.05, R_MAX)


def wall_with(*openings: tuple[float, float], reach: float = 4.0) -> Walls:
    """A wall across the way at x = WALL_X from y = -reach to reach (beyond the planning box: no way
    round on the map), open at each ``(centre_y, half_width)``: a robot through an opening's centre
    passes its ends at ``half_width``."""
    walls, y = [], -reach
    for centre, half in sorted(openings):
        walls.append(((WALL_X, y), (WALL_X, centre - half)))
        y = centre + half
    walls.append(((WALL_X, y), (WALL_X, reach)))
    return walls


def beams_of(scan: ScanInput) -> tuple[np.ndarray, np.ndarray]:
    """The contract's beams of ``scan`` (the runtime's rule) and the sectors it saw."""
    report = resample_scan(scan, B, R_MAX, return_report=True)
    return report.ranges, ~report.filled


def guard_lets_through(walls: Walls, track: np.ndarray, rule: GuardRule, speed: float = 1.0) -> bool:
    """A holonomic robot asked for ``speed`` along the polyline ``track`` (yaw 0), its speed scaled by the
    guard on its scan each 0.1 s tick: does it get past the wall within 10 s?"""
    p, k = track[0].astype(np.float64), 1
    for _ in range(100):
        if p[0] > WALL_X + 0.3:
            return True
        while k < len(track) - 1 and np.linalg.norm(track[k] - p) < 1e-6:
            k += 1
        gap = track[k] - p
        u = gap / np.linalg.norm(gap)
        ranges, seen = beams_of(cast(np.array([p[0], p[1], 0.0]), walls))
        scale = float(guard_scale(ranges, np.array([speed * u[0], speed * u[1], 0.0]), rule, R_MAX, seen))
        p = p + u * min(scale * speed * DT, float(np.linalg.norm(gap)))
    return bool(p[0] > WALL_X + 0.3)


def certified(walls: Walls, clearance: float | None) -> np.ndarray | None:
    """The planner's path from START to GOAL on the map of one scan from START (None: no path); its
    box is not widened, so the way round the wall's ends (beyond the box) is not on the map."""
    planner = ScanPlanner(BOXED, RADIUS, clearance=clearance)
    planner.observe(cast(START, walls), START)
    return planner.plan(START[:2], np.array(GOAL))


# --------------------------------------------------------------------------------- one clearance


def test_the_guard_s_passing_clearance_is_radius_and_margin_over_one_less_the_sector_spread() -> None:
    c = GUARD.passing_clearance(B)
    assert c == pytest.approx(0.23 / (1 - math.sin(math.pi / B)))
    assert c == pytest.approx(0.2405, abs=1e-4)
    # A return exactly c away, dead ahead, leaves no free distance; one a hair further does.
    for r, stopped in ((c - 1e-4, True), (c + 1e-3, False)):
        ranges = np.full(B, R_MAX)
        ranges[B // 2] = r
        assert (float(guard_scale(ranges, np.array([0.5, 0.0, 0.0]), GUARD, R_MAX)) == 0.0) == stopped


@pytest.mark.parametrize("slide", [False, True])
def test_a_gap_the_map_certifies_is_one_the_guard_lets_the_robot_drive(slide: bool) -> None:
    """Gaps whose clearance sweeps the guard's passing clearance c: the map certifies a path only where
    the robot following that very path is not stopped by the guard (on its 72 beams of the same world),
    and the two verdicts differ only within half a cell above c, where the map is the cautious one."""
    rule = replace(GUARD, slide=slide)
    c = rule.passing_clearance(B)
    verdicts = {}
    for extra in (-0.03, -0.01, 0.01, 0.03, 0.05):
        walls = wall_with((MID_Y, c + extra))
        path = certified(walls, c)
        track = path if path is not None else np.array([START[:2], GOAL])
        verdicts[extra] = (path is not None, guard_lets_through(walls, track, rule))
    assert all(through for planned, through in verdicts.values() if planned), verdicts
    assert [planned for planned, _ in verdicts.values()] == [False, False, False, True, True], verdicts
    if not slide:  # the guard's own verdict changes at c
        assert [through for _, through in verdicts.values()] == [False, False, True, True, True], verdicts


def test_the_node_s_scan_map_plans_with_the_clearance_of_the_guard_it_applies() -> None:
    """The shipped bundle: the gate's planner keeps C = c + half a cell (+ margin where there is room)
    and the log line states it; with the guard off the planner keeps the robot's radius as it always did."""
    contract = read_contract(DEFAULT_BUNDLE)
    settings, _ = resolve_settings(contract, NodeParams(scan_map_worker=False))
    c = contract.guard.passing_clearance(int(contract.num_beams))
    assert settings.plan_clearance == pytest.approx(c)
    gate = CommandGate.from_settings(Pusher(), settings)
    planner = gate.scan_planner
    assert isinstance(planner, ScanPlanner) and planner.clearance == pytest.approx(c)
    cfg = planner.cfg
    assert planner.plan_radii == pytest.approx((c + 0.025 + cfg.margin, c + 0.025))
    assert f"the guard's passing clearance {c:.4f} m" in settings.scan_map_source
    assert "sector spread" in settings.scan_map_source and "half a cell 0.025 m" in settings.scan_map_source
    off, _ = resolve_settings(contract, NodeParams(scan_map_worker=False, guard=False))
    assert off.plan_clearance is None
    assert plan_radii(off.scan_map, RADIUS, None) == pytest.approx((RADIUS + cfg.margin, RADIUS - cfg.squeeze))
    assert "no guard" in off.scan_map_source


def test_the_worker_raises_a_blocked_return_and_plans_what_the_synchronous_planner_plans() -> None:
    """A return the gate reports blocked goes to the worker before the tick's scan: in lockstep the
    worker holds the synchronous planner's path before and after it, both now round the other way."""
    walls = wall_with((MID_Y, 0.35), (1.6, 0.45))
    c = GUARD.passing_clearance(B)
    sync = ScanPlanner(ScanMapCfg(), RADIUS, clearance=c)
    worker = ScanPlannerWorker(ScanMapCfg(), RADIUS, lockstep=True, clearance=c)
    try:
        scan = cast(START, walls, beams=360)
        for k, (block, plans) in enumerate([(None, 1), ((WALL_X, MID_Y + 0.35), 2), (None, 2)]):
            if block is not None:
                for planner in (sync, worker):
                    planner.block(np.array(block))
            assert sync.step(scan, START, GOAL, DT * k) == worker.step(scan, START, GOAL, DT * k)
            assert np.array_equal(sync.path, worker.path) and sync.plans == worker.plans == plans  # at once
            through_gap = np.abs(sync.path[:, 1] - MID_Y).max() < 0.1
            assert through_gap == (k == 0), k  # the 0.35 m gap, then (0.25 m beside the raised end) round
        assert sync.raised == [[WALL_X, MID_Y + 0.35, ScanMapCfg().block_raise]]
    finally:
        worker.close()


# --------------------------------------------------------------------------------- the gate in a loop


class Pusher:
    """A driver that pushes straight at the goal it is handed (the gate's sub-goal) at ``speed``, and
    keeps the scan report of the contract's beams as the runtime does."""

    def __init__(self, speed: float = 0.5) -> None:
        self.speed = speed
        self.last_scan_report = None

    def reset(self) -> None:
        pass

    def step(self, scan, *, pose, twist, goal):
        self.last_scan_report = resample_scan(scan, B, R_MAX, return_report=True)
        dx, dy = goal[0] - pose[0], goal[1] - pose[1]
        n = max(math.hypot(dx, dy), 1e-9)
        c, s = math.cos(pose[2]), math.sin(pose[2])
        return np.array([self.speed * (c * dx + s * dy) / n, self.speed * (-s * dx + c * dy) / n, 0.0])


def tick_at(gate, pose: np.ndarray, scan: ScanInput, t: float):
    gate.set_scan(scan, t)
    q = (0.0, 0.0, math.sin(pose[2] / 2), math.cos(pose[2] / 2))
    gate.set_odom((float(pose[0]), float(pose[1])), q, (0.0, 0.0, 0.0), t, "odom")
    return gate.tick(t)


class MisjudgedGap(ScanPlanner):
    """The planner with a map that judges the gap at (WALL_X, MID_Y) 6 cm wider than it is (as a map
    whose returns there are off by a few centimetres would); right everywhere else."""

    def _clearance(self, points: np.ndarray, margin: float | None = None):
        frame, clear = super()._clearance(points, margin)
        xs, ys = frame.centres()
        near = np.hypot(xs[None, :] - WALL_X, ys[:, None] - MID_Y) < 0.4
        return frame, np.where(near, clear + 0.06, clear)


def test_a_path_the_guard_keeps_refusing_is_marked_blocked_and_a_new_plan_goes_round() -> None:
    """The map certifies a gap that the guard refuses: the robot pushes toward the sub-goal in the gap
    and the guard holds it. After blocked_time of that, the return it stopped before is raised in the
    map and the status says replanning; the robot backs off, the new path goes through the wide
    opening, and the robot arrives."""
    walls = wall_with((MID_Y, GUARD.passing_clearance(B) - 0.015), (1.6, 0.45))  # 0.2255 m: the guard refuses
    planner = MisjudgedGap(ScanMapCfg(keep=0.05), RADIUS, clearance=GUARD.passing_clearance(B))
    rule = ProgressRule(blocked_time=1.0, progress_time=0.0)
    gate = make_gate(Pusher(), guard=GUARD, max_range=R_MAX, scan_planner=planner, progress=rule)
    gate.set_goal(*GOAL, "odom")
    pose, first_path, log = START.copy(), None, []
    for k in range(300):
        res = tick_at(gate, pose, cast(pose, walls, beams=360), DT * k)
        first_path = planner.path if first_path is None else first_path
        held = res.guard_scale is not None and res.guard_scale < 1 and math.hypot(*res.cmd[:2]) < rule.blocked_speed
        log.append((DT * k, res.state, res.reason, held, planner.path, [list(d) for d in planner.raised]))
        if res.state == State.GOAL_REACHED:
            break
        pose = pose + np.array([res.cmd[0], res.cmd[1], 0.0]) * DT
    assert first_path is not None and np.abs(first_path[:, 1] - MID_Y).max() < 0.1  # first through the narrow gap
    k = next(k for k, entry in enumerate(log) if entry[2].startswith("replanning:"))
    t, _, reason, _, path, raised = log[k]
    run = next(j for j in range(k, -1, -1) if not log[j - 1][3])  # the first of the held ticks before it
    assert t - log[run][0] == pytest.approx(rule.blocked_time) and all(e[3] for e in log[run:k]), reason
    assert "return 0.2" in reason and len(raised) == 1  # the return it stood about c before
    assert np.hypot(raised[0][0] - WALL_X, abs(raised[0][1] - MID_Y) - 0.2255) < 0.03, raised  # an end of the gap
    assert [e[1] for e in log[k + 1 : k + 10]] == [State.RECOVERING] * 9  # backs off, then drives the new path
    new_path = log[k + 10][4]
    assert new_path is not path and np.abs(new_path[:, 1] - 1.6).min() < 0.2  # through the wide opening
    assert res.state == State.GOAL_REACHED, (pose, res.reason)


class Stopper(Pusher):
    """A driver that stops itself short of what lies ahead (as a planner with a wider margin than the
    guard's does): the pusher's command, or zero once the guard would slow that command below 60 %
    of its speed (so the guard never has to cut what it sends)."""

    def step(self, scan, *, pose, twist, goal):
        cmd = super().step(scan, pose=pose, twist=twist, goal=goal)
        report = self.last_scan_report
        scale = float(guard_scale(report.ranges, cmd, GUARD, R_MAX, ~np.asarray(report.filled, dtype=bool)))
        return np.zeros(3) if scale < 0.6 else cmd


def test_a_path_the_driver_stops_short_of_is_marked_blocked_too() -> None:
    """The gap of the test above, a driver that stops itself before it (the guard never cuts its
    command, scale 1): the guard would hold a motion straight toward the sub-goal, so after
    blocked_time the path counts as blocked all the same, the return is raised, and the robot
    arrives through the wide opening."""
    walls = wall_with((MID_Y, GUARD.passing_clearance(B) - 0.015), (1.6, 0.45))
    planner = MisjudgedGap(ScanMapCfg(keep=0.05), RADIUS, clearance=GUARD.passing_clearance(B))
    rule = ProgressRule(blocked_time=1.0, progress_time=0.0)
    gate = make_gate(Stopper(), guard=GUARD, max_range=R_MAX, scan_planner=planner, progress=rule)
    gate.set_goal(*GOAL, "odom")
    pose, reasons, crossed = START.copy(), [], None
    for k in range(300):
        res = tick_at(gate, pose, cast(pose, walls, beams=360), DT * k)
        reasons.append(res.reason)
        if res.state == State.GOAL_REACHED:
            break
        pose = pose + np.array([res.cmd[0], res.cmd[1], 0.0]) * DT
        crossed = float(pose[1]) if crossed is None and pose[0] > WALL_X else crossed
    assert all(r == "driving" or r.startswith("replanning") or r.startswith("recovering") for r in reasons[:-1])
    assert any(r.startswith("replanning:") for r in reasons) and len(planner.raised) >= 1
    assert res.state == State.GOAL_REACHED and crossed is not None and crossed > 1.2, crossed  # the wide opening


@pytest.mark.parametrize("drive", ["holonomic", DIFF_DRIVE])
def test_a_robot_without_progress_is_stuck_recovers_and_after_max_recoveries_stays_stuck(drive: str) -> None:
    """Odometry that never moves (wheels spinning on the spot): stuck within progress_time + one tick
    (zero); then for recovery_time a back-off straight away from the nearest return (the post ahead),
    guarded (a wall behind slows it) and not zero; then the map plans again at once and driving resumes,
    a diff drive first turning in place toward the new sub-goal (its odometry turns with it). After
    max_recoveries recoveries without getting closer, stuck with zero for good; a new goal starts over."""
    limits = Limits(1.0, 1.0, True) if drive == "holonomic" else Limits(1.0, 1.0, False, DIFF_DRIVE, 0.5)
    ranges = np.full(B, R_MAX)
    ranges[B // 2] = 0.26  # a post dead ahead (the nearest return)
    ranges[0] = 0.27  # a wall behind, close enough for the guard to slow a back-off
    scan = ScanInput.training_beams(ranges, B, R_MAX)
    planner = ScanPlanner(ScanMapCfg(replan_period=1e6), RADIUS, clearance=GUARD.passing_clearance(B))
    rule = ProgressRule(blocked_time=0.0, progress_time=2.0, recovery_time=0.5, max_recoveries=3)
    back = round(rule.recovery_time / DT)  # the stuck tick, then back - 1 ticks backing off
    gate = make_gate(Pusher(), limits=limits, guard=GUARD, max_range=R_MAX, scan_planner=planner, progress=rule)
    gate.set_goal(3.0, 1.0, "odom")
    pose = np.zeros(3)
    log, plans, yaws = [], [], []
    for k in range(320):  # a diff drive's turns make each recovery longer
        yaws.append(float(pose[2]))
        log.append((DT * k, res := tick_at(gate, pose, scan, DT * k)))
        plans.append((planner.plans, planner.planned_at))
        if res.state == State.RECOVERING and res.cmd[0] == 0.0:  # a turn in place: the base turns
            pose[2] += res.cmd[2] * DT
    states = [r.state for _, r in log]
    stuck = [k for k, s in enumerate(states) if s == State.STUCK and (k == 0 or states[k - 1] != State.STUCK)]
    assert len(stuck) == 4 and log[stuck[0]][0] <= rule.progress_time + DT + 1e-9, stuck
    for n, k in enumerate(stuck[:3], start=1):
        assert not log[k][1].cmd.any() and f"recovery {n} of 3" in log[k][1].reason
        backing = log[k + 1 : k + back]
        assert all(r.state == State.RECOVERING for _, r in backing), [r.state for _, r in backing]
        for _, r in backing:
            assert r.guard_scale is not None and 0.0 < r.guard_scale < 1.0  # guarded: the wall behind slows it
            assert r.cmd[0] < 0.0 and abs(r.cmd[1]) < 1e-9 and r.cmd[2] == 0.0  # away from the post ahead
            assert r.cmd == pytest.approx(apply_guard(ranges, np.array([-0.1, 0.0, 0.0]), GUARD, R_MAX)[0])
        t_end, after = log[k + back]
        assert plans[k + back][1] == pytest.approx(t_end) and plans[k + back][0] > plans[k + back - 1][0]  # at once
        if drive == "holonomic":
            assert after.state == State.DRIVING and after.reason == f"replanning after recovery {n} of 3"
            continue
        turn = k + back
        while log[turn][1].state == State.RECOVERING:
            r = log[turn][1]
            assert r.cmd[0] == r.cmd[1] == 0.0 and r.cmd[2] != 0.0 and "turning toward the way ahead" in r.reason
            turn += 1
        assert turn > k + back  # it turned, then drives facing the sub-goal
        end = log[turn][1]
        assert end.state == State.DRIVING and end.reason.startswith(f"driving again after recovery {n} of 3")
        sub = end.subgoal
        assert sub is not None
        if end.reason.endswith("turned toward the way ahead"):  # facing the sub-goal
            bearing = math.atan2(sub[1] - pose[1], sub[0] - pose[0])
            assert abs(math.remainder(bearing - yaws[turn], math.tau)) <= math.radians(10.0) + 0.05
        else:  # or after half a turn's time (this scan turns with the robot: its sub-goal keeps moving)
            assert end.reason.endswith("the turn's time spent")
            assert log[turn][0] - t_end == pytest.approx(math.pi / TURN_RATE, abs=DT + 1e-9)
    assert all(s == State.STUCK for s in states[stuck[3] :]) and "3 recoveries" in log[-1][1].reason
    assert not any(r.cmd.any() for _, r in log[stuck[3] :])
    gate.set_goal(3.0, -1.0, "odom")  # a new goal starts over
    assert tick_at(gate, pose, scan, 13.0).state == State.DRIVING


def test_moving_back_and_forth_is_no_progress_but_a_detour_along_the_path_is() -> None:
    rule = ProgressRule(progress_time=5.0, progress_distance=0.2)
    chk = ProgressChecker(rule)
    ticks = [(DT * k, 3.0 + 0.3 * math.sin(k / 5.0)) for k in range(120)]  # dithering round 3 m
    stuck = [chk.update(t, d, None, 0.0) for t, d in ticks]
    first = stuck.index(True)  # 5 s after its least distance, 2.77 m at 2.0 s: the dips after it are no closer
    assert DT * first == pytest.approx(2.0 + rule.progress_time)
    chk.reset()
    # A detour: the goal further away while the robot gets on along its path.
    assert not any(chk.update(DT * k, 3.0 + 0.01 * k, ("map", 1), 0.05 * k) for k in range(100))


def test_unusable_progress_settings_are_refused_by_name() -> None:
    for bad in ({"blocked_speed": 0.0}, {"max_recoveries": 1.5}, {"progress_time": -1.0}, {"recovery_time": math.nan}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ProgressRule(**bad)
    with pytest.raises(ValueError, match="num_beams"):
        GUARD.passing_clearance(2)


class ReadingRecorder(Pusher):
    """A :class:`Pusher` that reads scans as the runtime does (``resample``) and records the goals."""

    def __init__(self) -> None:
        super().__init__(speed=0.5)
        self.goals: list[tuple[float, float]] = []

    def resample(self, scan: ScanInput) -> np.ndarray:
        self.last_scan_report = resample_scan(scan, B, R_MAX, return_report=True)
        return self.last_scan_report.ranges

    def step(self, scan, *, pose, twist, goal):
        self.goals.append(tuple(goal))
        return super().step(scan, pose=pose, twist=twist, goal=goal)


@pytest.mark.parametrize("guard", [GUARD, None])
def test_a_path_s_sub_goal_behind_a_wall_s_end_is_turned_toward_the_path_the_guard_leaves_open(guard) -> None:
    """Following a given path, a robot drifted 0.35 m off it beside a wall's end: the straight line to
    the lookahead sub-goal passes 0.1 m from the wall's end, which the guard refuses. The driver is
    handed a sub-goal at the same distance in the direction of the furthest point of the path before
    it that the guard leaves open; without a guard the lookahead sub-goal as it is."""
    wall: Walls = [((1.6, 0.15), (1.6, 3.0))]
    rec = ReadingRecorder()
    gate = make_gate(rec, guard=guard, max_range=R_MAX, path_rule=LookaheadRule(lookahead=0.7))
    assert gate.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]), "odom")[0]
    pose = np.array([1.0, 0.35, 0.0])
    res = tick_at(gate, pose, cast(pose, wall, B), 1.0)
    assert res.state == State.DRIVING
    handed = np.asarray(rec.goals[-1])
    lookahead = np.array([1.7, 0.0])  # the projection (1.0, 0) plus 0.7 m along the path
    if guard is None:
        assert handed == pytest.approx(lookahead, abs=1e-5)
        return
    assert np.hypot(*(handed - pose[:2])) == pytest.approx(np.hypot(*(lookahead - pose[:2])), abs=1e-6)
    report = rec.last_scan_report

    def reach(point: np.ndarray) -> float:  # how far the guard lets a straight motion toward point go
        u = (point - pose[:2]) / np.hypot(*(point - pose[:2]))
        free, blocks = free_distances(report.ranges, np.array([1.5 * u[0], 1.5 * u[1], 0.0]), GUARD, R_MAX)
        return float(np.where(blocks, free, np.inf).min())

    free, blocked = reach(handed), reach(lookahead)
    assert blocked < 0.5 and free > 0.8, (blocked, free)  # the lookahead's line cut short; the new one open
    assert handed[1] < lookahead[1] and res.subgoal == pytest.approx(tuple(handed))  # turned away from the wall


def _report_270(ranges: np.ndarray) -> ScanReport:
    """The policy's 72 beams of a 270-degree lidar: the 17 sectors behind the robot filled (unseen)."""
    filled = np.zeros(B, dtype=bool)
    filled[list(range(0, 9)) + list(range(64, B))] = True
    return ScanReport(ranges, filled, ~filled, 1.0, 0.75, math.radians(270.0))


@pytest.mark.parametrize("drive", ["holonomic", DIFF_DRIVE])
def test_a_back_off_the_guard_would_hold_in_the_blind_sector_turns_to_where_it_lets_the_robot_out(drive: str) -> None:
    """A post dead ahead 0.26 m off and the lidar's 90-degree blind sector behind: away from the post is
    straight back, into the sector the guard counts as occupied, which it holds at zero. The back-off
    turns to a direction the guard lets out: sideways on a holonomic base (one side's post nearer than
    the other's: away from it); on a diff drive, which may only go ahead or back, ahead, as slowly as
    the guard lets it close in on the post. With the guard's way open the back-off is as before."""
    holonomic = drive == "holonomic"
    ranges = np.full(B, R_MAX)
    ranges[B // 2] = 0.26  # dead ahead
    ranges[B // 2 + 18] = 0.6  # left, farther than the right one
    ranges[B // 2 - 18] = 0.45  # right
    ranges[list(range(0, 9)) + list(range(64, B))] = R_MAX  # the fill: what the blind sector shows
    report = _report_270(ranges)
    seen = ~report.filled
    plain, _ = recovery_command(report, R_MAX, 0.1, holonomic)
    assert plain[0] < 0.0 and float(guard_scale(ranges, plain, GUARD, R_MAX, seen)) == 0.0  # held
    cmd, what = recovery_command(report, R_MAX, 0.1, holonomic, GUARD)
    if holonomic:
        assert float(guard_scale(ranges, cmd, GUARD, R_MAX, seen)) > 0.0 and "which the guard holds" in what
        assert cmd[1] > 0.05 and math.hypot(cmd[0], cmd[1]) == pytest.approx(0.1)  # out to the left
    else:
        assert cmd[0] == pytest.approx(0.1) and cmd[1] == 0.0 and "which the guard holds" in what
        assert 0.0 < float(guard_scale(ranges, cmd, GUARD, R_MAX, seen)) < 0.5
    open_behind = ranges.copy()
    report_360 = ScanReport(open_behind, np.zeros(B, dtype=bool), np.ones(B, dtype=bool), 1.0, 1.0, 2 * math.pi)
    assert np.array_equal(
        recovery_command(report_360, R_MAX, 0.1, holonomic, GUARD)[0],
        recovery_command(report_360, R_MAX, 0.1, holonomic)[0],
    )


def test_a_back_off_that_rule_step_5_would_hold_turns_to_where_the_whole_guard_lets_the_robot_out() -> None:
    """Episode 273: away from the returns is 93 degrees, which steps 0-4 let out whole, but the path of
    a base limited per axis from rest (rule step 5b) bends it toward the blind sector's band, and the
    gate sent zero for 45 s of back-offs. Given the measured twist and the period, the back-off turns
    to a direction the whole guard lets out; without them it keeps the one it holds."""
    ranges = np.array(EPISODE_273_RANGES)
    report = _report_270(ranges)
    seen, rest = ~report.filled, np.zeros(3)
    rule = EPISODE_273_GUARD

    def let_out(cmd: np.ndarray) -> float:
        return float(apply_guard(ranges, cmd, rule, R_MAX, seen, motion=rest, period=0.1)[1])

    old, _ = recovery_command(report, R_MAX, 0.1, True, rule)
    assert math.degrees(math.atan2(old[1], old[0])) == pytest.approx(93.0, abs=1.0)
    assert float(guard_scale(ranges, old, rule, R_MAX, seen)) == 1.0 and let_out(old) == 0.0
    cmd, what = recovery_command(report, R_MAX, 0.1, True, rule, motion=rest, period=0.1)
    assert let_out(cmd) > 0.0 and "which the guard holds" in what, what
    assert math.hypot(cmd[0], cmd[1]) == pytest.approx(0.1)
