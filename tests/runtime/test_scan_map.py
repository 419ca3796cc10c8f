"""The robot's own map and its planner (navdeploy.scan_map): marking and clearing, the window moving
with the robot, plans around what was seen, and a robot that leaves a pocket only with the map."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from navcontract.subgoal import LookaheadRule
from navdeploy.runtime import ScanInput
from navdeploy.scan_map import PathShape, ScanMap, ScanMapCfg, ScanPlanner, arc_lengths, follow_on
from navdeploy.settings import Limits
from navdeploy.states import State
from support.gates import GoalRecorder, make_gate

RADIUS = 0.2
BEAMS = 720
MAX_RANGE = 6.0


def cast(pose: np.ndarray, walls: list[tuple[tuple[float, float], tuple[float, float]]]) -> ScanInput:
    """A 360-degree scan of ``BEAMS`` beams from ``pose`` against wall segments (numpy ray casting)."""
    ang = -math.pi + 2 * math.pi * np.arange(BEAMS) / BEAMS
    d = np.stack([np.cos(ang + pose[2]), np.sin(ang + pose[2])], axis=1)
    r = np.full(BEAMS, MAX_RANGE)
    for a, b in walls:
        a, b = np.asarray(a, float), np.asarray(b, float)
        e = b - a
        w = a - pose[:2]
        den = d[:, 0] * (-e[1]) - d[:, 1] * (-e[0])
        ok = np.abs(den) > 1e-12
        t = np.where(ok, (w[0] * (-e[1]) - w[1] * (-e[0])) / np.where(ok, den, 1), np.inf)
        u = np.where(ok, (d[:, 0] * w[1] - d[:, 1] * w[0]) / np.where(ok, den, 1), -1)
        hit = ok & (t > 0) & (u >= 0) & (u <= 1)
        r = np.where(hit, np.minimum(r, t), r)
    return ScanInput(r, -math.pi, 2 * math.pi / BEAMS, 0.05, MAX_RANGE)


def seg_distance(p: np.ndarray, walls) -> float:
    best = math.inf
    for a, b in walls:
        a, b = np.asarray(a, float), np.asarray(b, float)
        t = np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0, 1)
        best = min(best, float(np.linalg.norm(p - (a + t * (b - a)))))
    return best


WALL = [((2.0, -1.5), (2.0, 1.5))]
POCKET = [((2.0, -1.2), (2.0, 1.2)), ((0.3, 1.2), (2.0, 1.2)), ((0.3, -1.2), (2.0, -1.2))]


def test_a_return_marks_its_cell_and_clears_the_way_to_it() -> None:
    m = ScanMap(ScanMapCfg())
    m.update(np.array([2.02, np.nan]), np.array([0.0, math.pi / 2]), np.array([0.0, 0.0, 0.0]), 0.05, MAX_RANGE)
    f = m.frame
    iy, ix = f.cell(np.array([2.02, 0.0]))
    assert m.occupied()[iy, ix] and np.allclose(m.hit_xy[iy, ix], [2.02, 0.0])
    iy1, ix1 = f.cell(np.array([1.0, 0.0]))
    assert m.logodds[iy1, ix1] < 0  # passed through
    iy2, ix2 = f.cell(np.array([0.0, 1.0]))
    assert m.logodds[iy2, ix2] == 0  # the dropped beam says nothing
    # Seen free often enough, the cell is free again (the obstacle moved away).
    for _ in range(6):
        m.update(np.array([4.0]), np.array([0.0]), np.array([0.0, 0.0, 0.0]), 0.05, MAX_RANGE)
    assert not m.occupied()[iy, ix]


@pytest.mark.parametrize("scans", [1, 4])
def test_a_cell_keeps_the_running_mean_of_its_returns_over_return_filter_scans(scans: int) -> None:
    """Noisy returns in one cell: with ``return_filter`` 1 the cell keeps its last return, with 4 the
    mean of the scans so far (each scan's returns in the cell averaged first), then a running mean
    that weighs a new scan 1/4; a cell cleared and marked again starts from its new return."""
    m = ScanMap(ScanMapCfg(return_filter=scans))
    pose = np.array([0.0, 0.0, 0.0])
    ranges = [1.005, 1.045, 1.015, 1.035, 1.025]  # one cell: [1.00, 1.05) on the window's 5 cm grid
    expected: float | None = None
    for k, r in enumerate(ranges):
        m.update(np.array([r, r + 0.004]), np.array([0.0, 0.0]), pose, 0.05, MAX_RANGE)  # two returns a scan
        cell = m.frame.cell(np.array([1.02, 0.0]))
        this = r + 0.004 if scans == 1 else r + 0.002  # the last return, or the scan's mean
        if scans == 1 or expected is None:
            expected = this
        else:
            expected += (this - expected) / min(k + 1, scans)
        assert m.hit_xy[cell][0] == pytest.approx(expected, abs=1e-5) and m.hit_xy[cell][1] == pytest.approx(0.0)
    while m.occupied()[cell]:  # seen free until cleared
        m.update(np.array([4.0]), np.array([0.0]), pose, 0.05, MAX_RANGE)
    assert m.hit_scans[cell] == 0
    m.update(np.array([1.03]), np.array([0.0]), pose, 0.05, MAX_RANGE)
    assert m.hit_xy[cell][0] == pytest.approx(1.03, abs=1e-5)


def test_return_filter_must_be_a_whole_number_of_scans() -> None:
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="return_filter"):
            ScanMapCfg(return_filter=bad)  # type: ignore[arg-type]


def samples(m: ScanMap, start: np.ndarray, angle: float, reach: float) -> set[tuple[int, int]]:
    """The cells of the rule's samples of one beam: every half cell from ``start`` while short of
    ``reach`` less a cell."""
    d = np.array([math.cos(angle), math.sin(angle)])
    step = m.h / 2
    return {m.frame.cell(start + k * step * d) for k in range(int(reach / step) + 2) if k * step < reach - m.h}


def test_a_scan_marks_and_clears_exactly_the_cells_of_the_rule() -> None:
    """Hand-made beams from a cell centre: each clears the cells of its samples (every half cell up to
    one cell short of its return, or of the range without one), each cell once per scan however many
    beams pass it; its return's cell is marked within mark_range, and never cleared by another beam;
    NaN and readings under range_min change nothing."""
    cfg = ScanMapCfg()
    m = ScanMap(cfg)
    o = np.array([0.025, 0.025])
    ranges = np.array([1.01, 0.51, 2.01, 5.01, np.nan, 0.01, 6.0])
    angles = np.array([0.0, 0.0, 0.0, math.pi / 2, -math.pi / 2, math.pi, 3 * math.pi / 4])
    m.update(ranges, angles, np.array([o[0], o[1], 0.0]), 0.05, 6.0)
    cell = m.frame.cell
    # East: returns at 0.535, 1.035, 2.035 (x), all within mark_range; the longest beam passes the
    # cells of the other two returns, which stay marked.
    marked = {cell(o + np.array([r, 0.0])) for r in (0.51, 1.01, 2.01)}
    cleared = samples(m, o, 0.0, 2.01)
    # North: a return beyond mark_range (4 m) is not marked; the beam clears up to it.
    cleared |= samples(m, o, math.pi / 2, 5.01)
    # North-west: a reading at range_max is no return; cleared up to the range less a cell.
    cleared |= samples(m, o, 3 * math.pi / 4, 6.0)
    cleared -= marked
    assert cell(o + np.array([0.0, 5.01])) not in marked | cleared
    ys, xs = np.nonzero(m.logodds)
    assert set(zip(ys.tolist(), xs.tolist(), strict=True)) == cleared | marked  # west and south: nothing
    assert all(m.logodds[c] == np.float32(cfg.hit) for c in marked)  # once, though beams passed
    assert all(m.logodds[c] == np.float32(-cfg.miss) for c in cleared)  # once (the robot's cell: all beams)
    assert len(cleared) > 200 and len(marked) == 3


def test_the_window_follows_the_robot_and_keeps_what_it_saw() -> None:
    cfg = ScanMapCfg(size=10.0, recentre_margin=3.0)
    m = ScanMap(cfg)
    m.update(np.array([1.0]), np.array([0.0]), np.array([0.0, 0.0, 0.0]), 0.05, MAX_RANGE)
    x0 = m.x0
    m.update(np.array([np.nan]), np.array([0.0]), np.array([3.0, 0.0, 0.0]), 0.05, MAX_RANGE)
    assert m.x0 != x0  # within 3 m of the edge: moved
    iy, ix = m.frame.cell(np.array([1.0, 0.0]))
    assert m.occupied()[iy, ix]


def test_the_plan_goes_round_a_wall_it_has_seen_and_keeps_the_radius() -> None:
    p = ScanPlanner(ScanMapCfg(), RADIUS)
    pose = np.array([0.0, 0.0, 0.0])
    p.observe(cast(pose, WALL), pose)
    path = p.plan(pose[:2], np.array([4.0, 0.0]))
    assert path is not None and np.allclose(path[0], [0, 0]) and np.allclose(path[-1], [4, 0])
    assert np.abs(path[:, 1]).max() > 1.5 + RADIUS - 0.05  # round an end of the wall
    dense = np.concatenate(
        [a + np.linspace(0, 1, 50)[:, None] * (b - a) for a, b in zip(path[:-1], path[1:], strict=True)]
    )
    # Clearance is judged at cell centres: a point of the path is within half a cell's diagonal of
    # one that keeps radius + margin from the returns (and a return lies on the wall).
    slack = p.cfg.resolution * math.sqrt(2) / 2 + 0.01
    assert min(seg_distance(q, WALL) for q in dense) > RADIUS + p.cfg.margin - slack
    sub = p.subgoal(pose, (4.0, 0.0), now=0.0)
    assert sub is not None and abs(sub[1]) > 0.1  # not straight at the goal


def test_no_path_on_the_map_gives_none() -> None:
    p = ScanPlanner(ScanMapCfg(), RADIUS)
    ring = [
        ((math.cos(a), math.sin(a)), (math.cos(b), math.sin(b)))
        for a, b in zip(*[np.linspace(0, 2 * math.pi, 41)[k:] for k in (0, 1)], strict=False)
    ]
    pose = np.array([0.0, 0.0, 0.0])
    p.observe(cast(pose, ring), pose)
    assert p.subgoal(pose, (4.0, 0.0), now=0.0) is None and p.failed


def test_a_way_round_outside_the_planning_box_is_found_in_a_wider_one() -> None:
    """A wall across the way whose ends lie beyond the box (2 m past robot and goal): the box holds no
    path, a box twice as wide does; without widening (box_margin_max = box_margin) there is none."""
    wall = [((2.0, -2.6), (2.0, 3.0))]
    pose = np.array([0.0, 0.0, 0.0])
    goal = np.array([4.0, 0.0])
    for widen, found in ((2.0, False), (8.0, True)):
        p = ScanPlanner(ScanMapCfg(box_margin=2.0, box_margin_max=widen), RADIUS)
        p.observe(cast(pose, wall), pose)
        path = p.plan(pose[:2], goal)
        assert (path is not None) == found
        if path is not None:
            assert np.allclose(path[-1], goal) and path[:, 1].min() < -2.6 - RADIUS + 0.05  # round the lower end
            assert min(seg_distance(q, wall) for q in path) > RADIUS


def test_a_goal_beyond_the_window_is_followed_as_the_window_moves_on() -> None:
    """A goal 1 km down a corridor: each plan ends at the goal clipped into the 30 m window; as the
    window moves on with the robot, a plan that reaches further replaces the path whose end the
    robot has reached (before, the robot stood at the first path's end, 15 m out)."""
    p = ScanPlanner(ScanMapCfg(), RADIUS)
    walls = [((-50.0, 2.0), (2000.0, 2.0)), ((-50.0, -2.0), (2000.0, -2.0))]
    pose, goal = np.array([0.0, 0.0, 0.0]), (1000.0, 0.0)
    for k in range(300):
        p.observe(cast(pose, walls), pose)
        sub = p.subgoal(pose, goal, now=0.1 * k)
        assert sub is not None and sub[0] >= pose[0] - 1e-6  # never back down the corridor
        step = np.asarray(sub) - pose[:2]
        pose[:2] += step / max(float(np.linalg.norm(step)), 1e-9) * min(0.15, float(np.linalg.norm(step)))
    assert pose[0] > 40.0, pose


def drive(use_map: bool, steps: int = 400) -> tuple[np.ndarray, ScanPlanner]:
    """A holonomic disc that drives at 0.5 m/s straight at its target, sliding along walls it touches."""
    planner = ScanPlanner(ScanMapCfg(), RADIUS, LookaheadRule(lookahead=0.3))
    body = RADIUS - 0.05  # a disc a little smaller than the one planned for: this driver cuts corners
    pose = np.array([1.0, 0.0, 0.0])
    goal = (4.0, 0.0)
    for k in range(steps):
        target = goal
        if use_map:
            planner.observe(cast(pose, POCKET), pose)
            target = planner.subgoal(pose, goal, now=0.1 * k) or goal
        step = np.asarray(target) - pose[:2]
        dist = float(np.linalg.norm(step))
        if math.hypot(goal[0] - pose[0], goal[1] - pose[1]) < 0.3:
            break
        move = step / max(dist, 1e-9) * min(0.05, dist)
        for m in (move, np.array([move[0], 0.0]), np.array([0.0, move[1]])):  # blocked: slide along
            nxt = pose[:2] + m
            if seg_distance(nxt, POCKET) > body:
                pose = np.array([nxt[0], nxt[1], 0.0])
                break
    return pose, planner


def test_a_memoryless_driver_leaves_a_pocket_only_with_the_map() -> None:
    stuck, _ = drive(use_map=False)
    assert stuck[0] < 2.0 - RADIUS + 0.06 and abs(stuck[1]) < 0.1  # against the pocket's back wall
    out, planner = drive(use_map=True)
    assert math.hypot(out[0] - 4.0, out[1]) < 0.3, out
    assert planner.plans >= 2  # planned again as the pocket was seen


SLOT = [((1.0, -0.23), (2.5, -0.23)), ((1.0, 0.23), (2.5, 0.23)), ((2.5, -0.23), (2.5, 0.23))]
"""A dead-end slot 3 cm wider than the robot on each side, narrower than the clearance a path keeps
with the guard (0.2655 m at cell centres): a robot inside it has no path out on the map."""


@pytest.mark.parametrize("retreat", [0.0, 3.0])
def test_a_robot_in_a_slot_narrower_than_the_plan_s_clearance_backs_out_along_its_trail(retreat: float) -> None:
    planner = ScanPlanner(ScanMapCfg(retreat=retreat), RADIUS, LookaheadRule(lookahead=0.5), clearance=0.2405)
    goal = (4.0, 0.0)
    for k, x in enumerate(np.arange(0.0, 2.01, 0.05)):  # driven into the slot along its centre line
        pose = np.array([x, 0.0, 0.0])
        planner.observe(cast(pose, SLOT), pose)
        planner.subgoal(pose, goal, now=0.1 * k)
    planner.replan()  # as after the guard refused the path in use: plan from where the robot stands
    sub = planner.subgoal(pose, goal, now=4.1)
    if retreat == 0.0:
        assert sub is None and planner.failed  # nothing but the goal: pressed against the slot's end
        return
    assert sub is not None and planner.retreating and not planner.failed
    assert sub[0] < 2.0 - 0.3 and abs(sub[1]) < 0.05  # behind the robot, on its trail
    path = planner.path
    assert path is not None and np.allclose(path[0], [2.0, 0.0]) and np.allclose(path[-1], goal)
    # The trail back: straight down the slot to where a path leaves it, then round the slot's walls.
    assert 0.5 <= planner.path_trail <= 1.2, planner.path_trail
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(path, axis=0), axis=1))])
    on_trail = path[arc <= planner.path_trail + 1e-9]
    assert np.all(np.abs(on_trail[:, 1]) < 0.05) and np.all(np.diff(on_trail[:, 0]) < 0)  # back down the slot
    assert max(abs(path[:, 1])) > 0.23 + 0.2655  # round a side wall, keeping the clearance
    # The trail's part is not checked against the clearance: the next tick keeps the path.
    path_id = planner.path_id
    pose = np.array([1.9, 0.0, 0.0])
    planner.observe(cast(pose, SLOT), pose)
    planner.subgoal(pose, goal, now=0.1 * 50)
    assert planner.path_id == path_id


def test_the_point_a_robot_backed_out_from_stays_a_dead_end_when_the_map_forgets_the_pocket() -> None:
    """Seen from afar, the thin returns that closed a pocket are cleared again by beams passing beside
    them; the map then shows a way through where the robot found none. The point it backed out from
    stays a dead end for the goal: the next plan keeps the clearance from it, where one without that
    memory goes straight back in."""
    planner = ScanPlanner(ScanMapCfg(), RADIUS, LookaheadRule(lookahead=0.5), clearance=0.2405)
    goal = (4.0, 0.0)
    for k, x in enumerate(np.arange(0.0, 2.01, 0.05)):  # into the slot
        pose = np.array([x, 0.0, 0.0])
        planner.observe(cast(pose, SLOT), pose)
        planner.subgoal(pose, goal, now=0.1 * k)
    planner.replan()
    planner.subgoal(pose, goal, now=4.1)
    assert planner.retreating and planner.dead_ends[-1] == (pytest.approx(2.0), pytest.approx(0.0))
    ends = np.asarray(planner.dead_ends)
    assert np.all(ends[:, 0] >= 1.0) and np.all(ends[:, 1] == 0.0)  # inside the slot, where it drove
    out = np.array([0.0, 0.0, 0.0])
    for _ in range(30):  # backed out; the slot's walls are cleared from the map (scans see nothing there)
        planner.observe(cast(out, []), out)
    assert not planner.map.occupied().any()
    keep = planner.plan_radii[1]
    path = planner.plan(out[:2], np.asarray(goal))
    assert path is not None and np.allclose(path[-1], goal)
    half_diagonal = math.hypot(planner.map.h, planner.map.h) / 2  # judged at cell centres
    for end in ends:
        assert seg_distance(end, list(zip(path[:-1], path[1:], strict=True))) > keep - half_diagonal
    planner.dead_ends.clear()  # the same map without the memory: straight through the dead end
    straight = planner.plan(out[:2], np.asarray(goal))
    assert straight is not None and np.abs(straight[:, 1]).max() < 0.05
    planner.new_goal()
    assert planner.dead_ends == []


def gap_wall(gap: float, half_length: float) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """A wall across the way at x = 2.025 with a gap of ``gap`` metres centred on y = 0.025 (a row
    and a column of cell centres: the clearance in the gap is then half the gap, to the beam spacing)."""
    x, y = 2.025, 0.025
    return [((x, y - half_length), (x, y - gap / 2)), ((x, y + gap / 2), (x, y + half_length))]


def plan_through(walls, cfg: ScanMapCfg | None = None) -> np.ndarray | None:
    p = ScanPlanner(cfg or ScanMapCfg(), RADIUS)
    pose = np.array([0.8, 0.025, 0.0])
    p.observe(cast(pose, walls), pose)
    return p.plan(pose[:2], np.array([4.0, 0.025]))


def test_a_gap_of_the_robot_s_diameter_is_not_planned_through_when_there_is_a_way_round() -> None:
    wide = plan_through(gap_wall(2 * RADIUS + 0.1, 1.5))  # the narrowest passage the worlds have
    assert wide is not None and np.abs(wide[:, 1]).max() < 0.3  # straight through
    tight = plan_through(gap_wall(2 * RADIUS, 1.5))  # the robot touches both sides
    assert tight is not None and np.abs(tight[:, 1]).max() > 1.5  # round an end of the wall


def test_a_gap_the_robot_fits_only_just_is_the_last_resort_and_a_narrower_one_is_closed() -> None:
    cfg = ScanMapCfg(box_margin_max=ScanMapCfg().box_margin)
    # The wall reaches beyond the planning box, which is not widened: no way round on the map.
    last_resort = plan_through(gap_wall(2 * RADIUS, 4.0), cfg)
    assert last_resort is not None and np.abs(last_resort[:, 1]).max() < 0.3
    assert plan_through(gap_wall(2 * (RADIUS - cfg.squeeze) - 0.03, 4.0), cfg) is None
    strict = replace(cfg, squeeze=-cfg.margin)  # without the last resort
    assert plan_through(gap_wall(2 * RADIUS, 4.0), strict) is None


def square(cx: float, cy: float, half: float) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    corners = [(cx - half, cy - half), (cx + half, cy - half), (cx + half, cy + half), (cx - half, cy + half)]
    return [(corners[k], corners[(k + 1) % 4]) for k in range(4)]


def test_a_return_that_blocked_the_path_is_kept_when_later_scans_clear_its_cell() -> None:
    """A post seen in a gap blocks the path through it and the robot is sent round the wall; when
    later scans no longer show the post (seen again from afar, beams pass beside a thin return and
    clear its cell), the planner keeps the return that blocked the path and does not send the robot
    back to the gap. Without that memory the same map routes straight through the gap."""
    p = ScanPlanner(ScanMapCfg(), RADIUS)
    pose = np.array([0.8, 0.025, 0.0])
    goal = (4.0, 0.025)
    wall = gap_wall(0.8, 1.5)
    p.step(cast(pose, wall), pose, goal, now=0.0)
    assert p.path is not None and np.abs(p.path[:, 1]).max() < 0.1 and p.kept == []  # through the gap
    assert p.switch_reason == "no path in use"
    post = square(2.025, 0.025, 0.05)
    p.step(cast(pose, wall + post), pose, goal, now=0.1)
    assert p.path is not None and np.abs(p.path[:, 1]).max() > 1.5  # blocked: round an end of the wall
    assert p.switch_reason == "blocked on the map"
    assert len(p.kept) == 1 and seg_distance(np.asarray(p.kept[0]), post) < 0.02  # the post's return
    for k in range(2, 40):  # 4 s of scans without the post: its cells are cleared, plans once a second
        p.step(cast(pose, wall), pose, goal, now=0.1 * k)
    assert not p.map.occupied()[p.map.frame.cell(np.array([2.025, 0.025]))]
    assert p.path is not None and np.abs(p.path[:, 1]).max() > 1.5  # still round the wall
    p.kept.clear()  # the same map without the memory: back through the gap
    p.replan()
    p.step(None, pose, goal, now=4.0)
    assert p.path is not None and np.abs(p.path[:, 1]).max() < 0.1
    assert p.switch_reason == "asked to plan again"  # replan(), as after a refusal or a recovery
    p.new_goal()
    assert p.kept == [] and p.switch_reason == ""


@pytest.mark.parametrize("forgetting", [True, False])
def test_memories_that_leave_no_path_are_forgotten_and_the_map_plans_on_what_it_shows(
    forgetting: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gap in a wall is the only way (the wall reaches beyond every planning box). A return seen
    in the gap blocks the path and is kept, and then no path is left: the planner drops its
    memories and plans on what the map shows. When later scans show the gap open again (what stood
    there moved away), the path goes through it. A planner that kept its memories (the rule undone)
    would leave the robot without a path for as long as the goal stands."""
    if not forgetting:
        monkeypatch.setattr(ScanPlanner, "forget", lambda self: None)
    cfg = ScanMapCfg(box_margin_max=ScanMapCfg().box_margin)
    p = ScanPlanner(cfg, RADIUS)
    pose = np.array([0.8, 0.025, 0.0])
    goal = (4.0, 0.025)
    wall = gap_wall(0.6, 4.0)
    p.step(cast(pose, wall), pose, goal, now=0.0)
    assert p.path is not None and np.abs(p.path[:, 1]).max() < 0.1  # through the gap
    post = square(2.025, 0.025, 0.05)
    p.step(cast(pose, wall + post), pose, goal, now=0.1)
    assert p.path is None and p.failed  # blocked, and no way round
    assert p.kept == [] if forgetting else len(p.kept) == 1
    for k in range(2, 40):  # the post is gone: 4 s of scans of the open gap, plans once a second
        p.step(cast(pose, wall), pose, goal, now=0.1 * k)
    assert not p.map.occupied()[p.map.frame.cell(np.array([2.025, 0.025]))]
    if forgetting:
        assert p.forgotten == 1 and p.path is not None and np.abs(p.path[:, 1]).max() < 0.1  # through the gap
    else:
        assert p.path is None and p.failed


def test_a_squeezed_path_gives_way_to_one_with_the_full_clearance_as_soon_as_there_is_one() -> None:
    """The map first shows only a gap the robot fits just (the last resort); when later scans show
    it wider, the next plan keeps radius + margin and replaces the squeezed path, though it is no
    shorter (a squeezed path kept for its length wedged the robot in passages under its diameter)."""
    p = ScanPlanner(ScanMapCfg(), RADIUS)
    pose = np.array([0.8, 0.025, 0.0])
    goal = (4.0, 0.025)
    p.step(cast(pose, gap_wall(2 * RADIUS, 4.0)), pose, goal, now=0.0)
    assert p.path is not None and p.path_radius < RADIUS  # squeezed
    wider = gap_wall(2 * RADIUS + 0.1, 4.0)
    for k in range(1, 31):  # 3 s of scans: the old returns in the gap are cleared, plans once a second
        p.step(cast(pose, wider), pose, goal, now=0.1 * k)
    assert p.path is not None and p.path_radius == pytest.approx(RADIUS + p.cfg.margin)
    assert np.abs(p.path[:, 1] - 0.025).max() < 0.05  # through the same gap, now with room


@pytest.mark.parametrize("clearance", [None, 0.2405])
def test_a_squeezed_path_gives_way_to_a_long_one_with_the_full_clearance_only_without_a_guard(
    clearance: float | None,
) -> None:
    """The path in use goes through a gap at the squeezed clearance; the next plan finds none there
    (the gap mapped a little narrower: not narrow enough to block the path in use) and goes 8 m round
    with the full clearance. With the guard's clearance (the squeezed path keeps more than the robot's
    radius) the robot keeps the gap: a gap mapped at about the squeezed clearance, now open, now
    closed, flipped the route once a second. Without a guard the way round replaces it; so does one
    no longer than the squeezed path with a guard."""
    p = ScanPlanner(ScanMapCfg(), RADIUS, clearance=clearance)
    full, least = p.plan_radii
    pose = np.array([0.8, 0.025, 0.0])
    goal = (4.0, 0.025)
    p.observe(cast(pose, []), pose)  # an open map: nothing blocks a path (the plans are given below)
    gap = np.array([[0.8, 0.025], [4.0, 0.025]])
    round_the_end = np.array([[0.8, 0.025], [2.0, 4.3], [4.0, 0.025]])
    same_length = np.array([[0.8, 0.025], [2.4, 0.2], [4.0, 0.025]])

    def given(path: np.ndarray, radius: float):
        def plan(start: np.ndarray, goal: np.ndarray) -> np.ndarray:
            p.planned_radius = radius
            return path

        return plan

    p.plan = given(gap, least)  # type: ignore[method-assign]
    p.update_path(pose[:2], np.array(goal), now=0.0)
    assert p.path is gap and p.path_radius == least
    p.plan = given(round_the_end, full)  # type: ignore[method-assign]
    p.update_path(pose[:2], np.array(goal), now=1.0)
    assert (p.path is gap) == (clearance is not None)
    if clearance is not None:
        p.plan = given(same_length, full)  # type: ignore[method-assign]
        p.update_path(pose[:2], np.array(goal), now=2.0)
        assert p.path is same_length and p.path_radius == full


CORNER = [((1.0, -2.0), (1.0, 0.5)), ((-0.5, 0.95), (2.5, 0.95))]  # a wall's end under a ceiling


@pytest.mark.parametrize("line_of_sight", [True, False])
def test_a_sub_goal_round_a_corner_is_pulled_back_to_where_the_robot_reaches_it_straight(line_of_sight: bool) -> None:
    p = ScanPlanner(ScanMapCfg(line_of_sight=line_of_sight), RADIUS, LookaheadRule(lookahead=0.7))
    pose = np.array([0.55, 0.55, 0.0])  # before the passage over the wall's end, the goal behind the wall
    p.observe(cast(pose, CORNER), pose)
    sub = p.subgoal(pose, (1.6, -0.5), now=0.0)
    assert sub is not None and p.path is not None
    line = pose[:2] + np.linspace(0, 1, 200)[:, None] * (np.asarray(sub) - pose[:2])
    closest = min(seg_distance(q, CORNER) for q in line)
    if line_of_sight:
        assert closest > RADIUS - 0.01  # the straight line keeps the robot clear of the corner
    else:
        assert closest < RADIUS - 0.05  # the plain lookahead cuts the corner


@pytest.mark.parametrize(
    ("offset", "block_margin", "replanned"),
    [(0.205, ScanMapCfg().block_margin, False), (0.205, 0.0, True), (0.165, ScanMapCfg().block_margin, True)],
)
def test_a_return_blocks_the_path_only_when_it_comes_block_margin_inside_its_clearance(
    offset: float, block_margin: float, replanned: bool
) -> None:
    """A path planned in the open keeps radius + margin (0.215 m); a post seen later at ``offset``
    from it, within one replanning period, replaces it only when ``block_margin`` inside that (the
    lidar's noise on a return near a tight path would otherwise flip the route every scan)."""
    p = ScanPlanner(ScanMapCfg(block_margin=block_margin), RADIUS)
    pose = np.array([0.8, 0.025, 0.0])
    p.step(cast(pose, []), pose, (4.0, 0.025), now=0.0)
    first = p.path
    assert first is not None and np.abs(first[:, 1] - 0.025).max() < 1e-9  # straight
    post = [((3.0, 0.025 + offset), (3.0, 0.025 + offset + 0.04))]
    p.step(cast(pose, post), pose, (4.0, 0.025), now=0.1)
    assert (p.path is not first) == replanned and p.plans == 1 + replanned


def test_the_map_names_where_it_changed_since_it_was_last_asked() -> None:
    m = ScanMap(ScanMapCfg(size=10.0, recentre_margin=3.0))
    here = np.array([0.0, 0.0, 0.0])
    m.update(np.array([2.02]), np.array([0.0]), here, 0.05, MAX_RANGE)
    assert m.take_changes() is None  # nothing was asked before: not known
    m.update(np.array([2.02, 1.0]), np.array([0.0, math.pi / 2]), here, 0.05, MAX_RANGE)
    changed = m.take_changes()
    assert changed is not None and len(changed) == 2  # the return seen again (noise moves it) and a new one
    assert np.allclose(sorted(map(tuple, changed)), [(0.0, 1.0), (2.02, 0.0)], atol=1e-6)
    assert len(m.take_changes()) == 0  # taken: forgotten
    iy, ix = m.frame.cell(np.array([2.02, 0.0]))
    scans = 0
    while m.occupied()[iy, ix] and scans < 20:  # a return further on, until the first one's cell is free
        m.update(np.array([4.0]), np.array([0.0]), here, 0.05, MAX_RANGE)
        scans += 1
    changed = m.take_changes()
    centre = (m.frame.x0 + (ix + 0.5) * m.h, m.frame.y0 + (iy + 0.5) * m.h)
    assert changed is not None and 1 < scans < 20 and len(changed) == scans + 1  # each scan's return, the freed cell
    assert np.allclose(changed[changed[:, 0] != 4.0], [centre]) and (changed[:, 0] == 4.0).sum() == scans
    m.update(np.array([1.0]), np.array([0.0]), np.array([4.0, 0.0, 0.0]), 0.05, MAX_RANGE)  # the window moves
    assert m.take_changes() is None


def test_a_return_seen_after_the_path_was_found_open_blocks_it_at_once() -> None:
    """The path found open is checked again only where the map changed: a tick without a change
    builds no clearance grid, and a post seen inside the path's clearance re-plans at the next tick."""
    p = ScanPlanner(ScanMapCfg(line_of_sight=False), RADIUS)  # the grids built are the blocked check's
    pose = np.array([0.8, 0.025, 0.0])
    p.step(cast(pose, []), pose, (4.0, 0.025), now=0.0)
    p.step(cast(pose, []), pose, (4.0, 0.025), now=0.1)  # checked whole: open
    first = p.path
    grids = []
    build = p._clearance
    p._clearance = lambda *a, **k: grids.append(1) or build(*a, **k)  # type: ignore[method-assign]
    p.step(None, pose, (4.0, 0.025), now=0.2)
    assert p.path is first and not grids
    post = [((3.0, 0.025 + 0.165), (3.0, 0.025 + 0.165 + 0.04))]
    p.step(cast(pose, post), pose, (4.0, 0.025), now=0.3)
    assert p.path is not first and p.plans == 2 and grids


def test_checking_only_where_the_map_changed_decides_as_checking_the_whole_path() -> None:
    """A robot driven along its map's path through a field of thin posts, seen by a noisy lidar: the
    planner that checks the path again only where the map changed plans exactly as one that checks
    the whole path ahead at every tick."""
    from navdeploy import bench_tick

    rng = np.random.default_rng(4)
    world = bench_tick.make_world(rng, posts=60)
    cfg = ScanMapCfg()
    fast, whole = ScanPlanner(cfg, RADIUS), ScanPlanner(cfg, RADIUS)
    whole.map.take_changes = lambda: None  # type: ignore[method-assign]  # never known: the whole path
    pose, goal = np.array([0.0, 0.0, 0.0]), (10.0, 0.0)
    checked = 0
    for k in range(200):
        ranges = bench_tick.cast(world, pose, BEAMS, rng, 0.01)
        scan = ScanInput(ranges, -math.pi, 2 * math.pi / BEAMS, 0.05, bench_tick.RANGE_MAX)
        a = fast.step(scan, pose, goal, now=0.1 * k)
        b = whole.step(scan, pose, goal, now=0.1 * k)
        assert a == b and fast.path_id == whole.path_id and fast.plans == whole.plans, f"tick {k}"
        checked += fast.path is not None
        if a is None:
            break
        step = np.asarray(a) - pose[:2]
        pose = pose + np.array([*(0.08 * step / max(float(np.hypot(*step)), 1e-9)), 0.0])
    assert checked > 150 and fast.path_id > 3  # it drove on paths that changed


@pytest.mark.parametrize("use_map", [True, False])
def test_the_controller_hands_the_policy_the_map_sub_goal(use_map: bool) -> None:
    rt = GoalRecorder()
    c = make_gate(
        rt, limits=Limits(1.0, 1.0, True), scan_planner=ScanPlanner(ScanMapCfg(), RADIUS) if use_map else None
    )
    pose = np.array([0.0, 0.0, 0.0])
    c.set_scan(cast(pose, WALL), 1.0)
    c.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, "odom")
    assert c.set_goal(4.0, 0.0, "odom")[0]
    r = c.tick(1.05)
    assert r.state == State.DRIVING
    if use_map:
        assert rt.goals[-1] != (4.0, 0.0) and abs(rt.goals[-1][1]) > 0.1 and r.subgoal == rt.goals[-1]
        assert not r.path_in_use  # no global path: the sub-goal is the map's
    else:
        assert rt.goals[-1] == (4.0, 0.0) and r.subgoal is None


class FixedSubgoal:
    """A scan planner whose every tick gives the same sub-goal (what the gate does with it is tested)."""

    def __init__(self, sub: tuple[float, float]) -> None:
        self.sub, self.remaining, self.retreating, self.path = sub, 1.0, False, None

    def step(self, scan, pose, goal, now):
        return self.sub

    def new_goal(self) -> None:
        pass

    def reset(self) -> None:
        pass


@pytest.mark.parametrize(
    "sub, handed",
    [
        ((1.5, 0.0), (1.5, 0.0)),  # far enough: as it is
        ((0.0, 0.2), (0.0, 0.5)),  # within the tolerance (0.3 m): out to 0.3 + 0.2 m along the line to it
        ((0.0, 0.0), (0.5, 0.0)),  # where the robot stands: toward the goal
    ],
)
def test_a_sub_goal_is_never_within_the_goal_tolerance_of_the_robot(sub, handed) -> None:
    """A driver takes a goal within its tolerance for reached (the DWA brakes for good): a sub-goal the
    line-of-sight check pulled back next to the robot stalled the DWA in thin-post clutter."""
    rt = GoalRecorder()
    c = make_gate(rt, limits=Limits(1.0, 1.0, True), scan_planner=FixedSubgoal(sub))
    c.set_scan(cast(np.zeros(3), WALL), 1.0)
    c.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, "odom")
    assert c.goal_tolerance == pytest.approx(0.3)
    assert c.set_goal(4.0, 0.0, "odom")[0]
    r = c.tick(1.05)
    assert r.state == State.DRIVING and rt.goals[-1] == pytest.approx(handed) and r.subgoal == pytest.approx(handed)
    c.set_goal(0.2, 0.0, "odom")  # the goal itself within the tolerance: reached, whatever the sub-goal
    assert c.tick(1.1).state == State.GOAL_REACHED


def test_unusable_settings_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="squeeze"):
        ScanMapCfg(squeeze=-0.1)
    with pytest.raises(ValueError, match="margin"):
        ScanMapCfg(margin=-0.05)
    with pytest.raises(ValueError, match="line_of_sight"):
        ScanMapCfg(line_of_sight=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="resolution"):
        ScanMapCfg(resolution=float("nan"))
    with pytest.raises(ValueError, match="recentre_margin"):
        ScanMapCfg(size=10.0, recentre_margin=6.0)
    with pytest.raises(ValueError, match="box_margin_max 1.0 m must be >= box_margin"):
        ScanMapCfg(box_margin_max=1.0)


def test_a_robot_at_the_path_s_end_gets_its_end_as_the_sub_goal() -> None:
    """Progress comes back in float32 and can lie a hair beyond the path's float64 length; the
    line-of-sight check then has no point left to test and must hand back the path's end."""
    start = np.array([0.8, 0.025])
    f32 = np.float32
    # A straight run whose float32 length rounds up past its float64 length.
    x = next(v for v in 2.3 + 0.001 * np.arange(1000) if float(f32(f32(v) - f32(start[0]))) > v - start[0] + 1e-8)
    p = ScanPlanner(ScanMapCfg(), RADIUS)
    pose = np.array([start[0], start[1], 0.0])
    p.step(cast(pose, []), pose, (x, start[1]), now=0.0)
    assert p.path is not None and len(p.path) == 2  # straight in the open
    end = p.path[-1]
    sub = p.step(None, np.array([end[0], end[1], 0.0]), (x, start[1]), now=0.1)
    assert sub is not None and np.allclose(sub, end, atol=1e-5)


def test_a_kept_path_shape_follows_the_path_exactly_as_one_made_each_tick() -> None:
    """The tick keeps a path's segments and arc lengths (:class:`PathShape`) while it follows it: the
    sub-goal, progress and remaining distance are those of the lookahead rule made afresh, tick by
    tick, and a new path (another array) gets a shape of its own."""
    rng = np.random.default_rng(4)
    path = np.cumsum(rng.normal(0.1, 0.05, (60, 2)), axis=0)
    rule = LookaheadRule()
    shape = PathShape.of(None, path)
    assert PathShape.of(shape, path) is shape and np.array_equal(shape.arc, arc_lengths(path))
    kept, fresh = 0.0, 0.0
    for k in range(0, 55, 3):
        p = path[k] + rng.normal(0.0, 0.05, 2)
        sub_kept, kept, left_kept = follow_on(path, kept, rule, p, shape)
        sub_fresh, fresh, left_fresh = follow_on(path, fresh, rule, p)
        assert np.array_equal(sub_kept, sub_fresh) and kept == fresh and left_kept == left_fresh
    assert kept > 3.0  # it went along the path
    other = path + 1.0
    new = PathShape.of(shape, other)
    assert new is not shape and new.path is other
    assert np.allclose(new.batch[0], other.astype(np.float32))


def test_the_line_of_sight_check_answers_as_checking_every_point_of_the_path_does() -> None:
    """``visible`` asks about the sub-goal alone first (sampled as among all the points) and about the
    rest only when the robot does not see it: on random clearance grids and paths it returns what
    checking every point at once returns (the sub-goal when it or none is seen, else the first seen)."""
    from navdeploy.grid_search import GridFrame, sees
    from navdeploy.scan_map import SightRule, points_at, visible

    rng = np.random.default_rng(11)
    frame = GridFrame(-1.0, -1.0, 0.05, 0.05, (80, 80))
    xs, ys = frame.centres()
    rule = SightRule(0.22, 0.05, 0.6)
    pulled = 0
    for _ in range(60):
        posts = rng.uniform(-0.5, 2.5, (6, 2))
        clear = np.min(np.hypot(xs[None, :, None] - posts[:, 0], ys[:, None, None] - posts[:, 1]), axis=-1)
        bend = rng.uniform(-0.6, 0.6)
        path = np.array([[0.0, 0.0], [0.5, bend], [1.0, 0.0], [1.5, -bend]])
        p = path[0] + rng.normal(0.0, 0.05, 2)
        arc = arc_lengths(path)
        progress = float(rng.uniform(0.0, 0.5))
        s_end = min(progress + 0.7, float(arc[-1]))
        sub = points_at(path, arc, np.array([s_end]))[0]
        got = visible(path, progress, 0.7, p, sub, rule, lambda pts, margin, grid=(frame, clear): grid, arc)
        pts = points_at(path, arc, np.arange(s_end, progress - 1e-9, -rule.step))
        ok = sees(p, pts, clear, frame, rule.radius, certify=False)  # every point at once
        want = pts[int(np.argmax(ok))] if ok.any() and not ok[0] else sub
        assert got == (float(want[0]), float(want[1]))
        pulled += ok.any() and not ok[0]
    assert pulled >= 5  # the corners cut often enough to test the second question
