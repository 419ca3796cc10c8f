"""The robot's own map and its planner (navdeploy.scan_map): marking and clearing, the window moving
with the robot, plans around what was seen, and a robot that leaves a pocket only with the map."""

from __future__ import annotations

import math

import numpy as np
import pytest

from navdeploy.controller import Limits, PolicyController, State
from navdeploy.runtime import ScanInput, ScanUnusable
from navdeploy.scan_map import ScanMap, ScanMapCfg, ScanPlanner
from navdeploy.subgoal import LookaheadRule

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
    assert min(seg_distance(q, WALL) for q in dense) > RADIUS - p.cfg.tolerance - 1e-6
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


class RecordingRuntime:
    """Stands in for the policy runtime: records the goal the controller hands it."""

    def __init__(self) -> None:
        self.goals: list[tuple[float, float]] = []

    def reset(self) -> None:
        pass

    def step(self, scan, *, pose, twist, goal):
        self.goals.append(tuple(goal))
        return np.array([0.1, 0.0, 0.0])


@pytest.mark.parametrize("use_map", [True, False])
def test_the_controller_hands_the_policy_the_map_sub_goal(use_map: bool) -> None:
    rt = RecordingRuntime()
    c = PolicyController(
        runtime=rt,
        limits=Limits(1.0, 1.0, True),
        goal_tolerance=0.3,
        stale_timeout=0.5,
        scan_errors=(ScanUnusable,),
        scan_planner=ScanPlanner(ScanMapCfg(), RADIUS) if use_map else None,
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


def test_unusable_settings_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        ScanMapCfg(tolerance=-0.1)
    with pytest.raises(ValueError, match="resolution"):
        ScanMapCfg(resolution=float("nan"))
    with pytest.raises(ValueError, match="recentre_margin"):
        ScanMapCfg(size=10.0, recentre_margin=6.0)
