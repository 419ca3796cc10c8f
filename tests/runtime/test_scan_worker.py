"""The scan map on its worker process (navdeploy.scan_worker): the worker plans what the synchronous
planner plans, the tick never waits for a plan, failures surface, and the worker stops with the gate
and with its parent."""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from navcontract.scan import ScanInput
from navcontract.subgoal import LookaheadRule
from navdeploy.bench_tick import RANGE_MAX, World, cast, make_world
from navdeploy.gate import CommandGate
from navdeploy.runtime import ScanUnusable
from navdeploy.scan_map import ScanMapCfg, ScanPlanner
from navdeploy.scan_worker import ScanPlannerWorker
from navdeploy.settings import GateSettings, Limits
from navdeploy.states import State
from support.gates import GoalRecorder

RADIUS = 0.2
BEAMS = 360
RULE = LookaheadRule(1.0, 2.0)
GOAL = (10.0, 0.0)


def scan_at(world: World, pose: np.ndarray, rng: np.random.Generator) -> ScanInput:
    return ScanInput(cast(world, pose, BEAMS, rng, 0.01), -math.pi, 2 * math.pi / BEAMS, 0.05, RANGE_MAX)


def toward(pose: np.ndarray, target: tuple[float, float], step: float = 0.1) -> np.ndarray:
    d = np.asarray(target) - pose[:2]
    n = float(np.linalg.norm(d))
    return np.array([*(pose[:2] + d / max(n, 1e-9) * min(step, n)), pose[2] + 0.03])


def wait_for(condition, timeout: float = 30.0, every: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(every)


def tick(worker: ScanPlannerWorker, scan, pose: np.ndarray, goal, now: float):
    """What the gate does with its worker in a tick: step, then hand the scan over."""
    sub = worker.step(scan, pose, goal, now)
    worker.dispatch()
    return sub


def test_the_worker_plans_what_the_synchronous_planner_plans() -> None:
    """Fed the same scans, poses and times, the worker in lockstep holds the synchronous planner's
    path at every tick and hands out the same sub-goal, through its replans."""
    rng_world = np.random.default_rng(3)
    world = make_world(rng_world)
    sync = ScanPlanner(ScanMapCfg(), RADIUS, RULE)
    worker = ScanPlannerWorker(ScanMapCfg(), RADIUS, RULE, lockstep=True)
    try:
        pose = np.array([0.0, 0.0, 0.0])
        rng = np.random.default_rng(0)
        paths = set()
        for k in range(60):
            scan = scan_at(world, pose, rng)
            a = sync.step(scan, pose, GOAL, 0.1 * k)
            b = worker.step(scan, pose, GOAL, 0.1 * k)
            assert a == b, k
            assert (sync.path is None) == (worker.path is None)
            if sync.path is not None:
                assert np.array_equal(sync.path, worker.path), k
                paths.add(sync.path.tobytes())
            assert (worker.plans, worker.failed, worker.remaining) == (sync.plans, sync.failed, sync.remaining)
            pose = toward(pose, a if a is not None else GOAL)
        assert sync.plans >= 5 and len(paths) >= 2  # it planned again and changed its path on the way
        sync.new_goal()
        worker.new_goal()
        scan = scan_at(world, pose, rng)
        assert worker.step(scan, pose, (0.0, 0.0), 6.0) == sync.step(scan, pose, (0.0, 0.0), 6.0)
        assert np.array_equal(sync.path, worker.path)  # the map kept across the new goal, on both
    finally:
        worker.close()


class HeldPlanner(ScanPlanner):
    """A planner whose every search after the first waits until the file ``release`` exists."""

    def __init__(self, cfg: ScanMapCfg, radius: float, rule: LookaheadRule, release: str) -> None:
        super().__init__(cfg, radius, rule)
        self.release, self.searches = Path(release), 0

    def plan(self, start: np.ndarray, goal: np.ndarray):
        self.searches += 1
        deadline = time.monotonic() + 60.0
        while self.searches > 1 and not self.release.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().plan(start, goal)


def test_the_tick_never_waits_for_a_plan_and_uses_the_previous_one(tmp_path: Path) -> None:
    release = tmp_path / "release"
    worker = ScanPlannerWorker(ScanMapCfg(), RADIUS, RULE, planner=functools.partial(HeldPlanner, release=str(release)))
    try:
        world = make_world(np.random.default_rng(5))
        rng = np.random.default_rng(1)
        pose = np.array([0.0, 0.0, 0.0])
        sub = tick(worker, scan_at(world, pose, rng), pose, GOAL, 0.0)
        assert sub is None  # no plan has come back yet: the goal itself
        wait_for(lambda: tick(worker, None, pose, GOAL, 0.05) is not None)
        first, plans = worker.path, worker.plans
        assert first is not None and plans == 1
        # A second scan, a period later: the worker's next search is held until the file appears.
        for k in range(1, 40):
            t = 1.0 + 0.1 * k
            sub = tick(worker, scan_at(world, pose, rng), pose, GOAL, t)
            assert sub is not None and worker.path is first and worker.plans == plans  # the previous plan
        release.touch()
        wait_for(lambda: (tick(worker, None, pose, GOAL, 5.0), worker.plans)[1] > plans)
    finally:
        worker.close()


class HeldFromStartPlanner(ScanPlanner):
    """A planner whose every search waits until the file ``release`` exists."""

    def __init__(self, cfg: ScanMapCfg, radius: float, rule: LookaheadRule, release: str) -> None:
        super().__init__(cfg, radius, rule)
        self.release = Path(release)

    def plan(self, start: np.ndarray, goal: np.ndarray):
        deadline = time.monotonic() + 60.0
        while not self.release.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().plan(start, goal)


def test_a_late_plan_is_followed_from_where_the_robot_got_to_not_from_where_it_began(tmp_path: Path) -> None:
    """A plan comes back after the robot drove 5 m on (a slow robot computer, a simulation run faster
    than real time): its first sub-goal lies ahead of the robot, not behind it where the path began
    (the lookahead rule's window alone would reach 2 m along it)."""
    release = tmp_path / "release"
    worker = ScanPlannerWorker(
        ScanMapCfg(), RADIUS, RULE, planner=functools.partial(HeldFromStartPlanner, release=str(release))
    )
    try:
        world = World((-3.0, 12.0, -3.0, 3.0), np.array([[11.0, 2.5, 0.1]]))  # one post in a corner
        rng = np.random.default_rng(2)
        pose = np.array([0.0, 0.0, 0.0])
        assert tick(worker, scan_at(world, pose, rng), pose, GOAL, 0.0) is None
        for k in range(1, 51):  # 5 m along the way without a plan: the tick drives to the goal itself
            pose = np.array([0.1 * k, 0.0, 0.0])
            assert tick(worker, None, pose, GOAL, 0.1 * k) is None
        release.touch()
        wait_for(lambda: tick(worker, None, pose, GOAL, 5.1) is not None)
        assert worker.path is not None and float(np.hypot(*worker.path[0])) < 0.1  # planned from the start
        sub = tick(worker, None, pose, GOAL, 5.2)
        assert sub is not None
        assert sub[0] > pose[0] + 0.5 * RULE.lookahead, (sub, pose)
        assert worker.progress == pytest.approx(5.0, abs=0.2)
    finally:
        worker.close()


class FailingPlanner(ScanPlanner):
    def update_path(self, p: np.ndarray, goal: np.ndarray, now: float) -> None:
        raise ValueError("planning broke")


def test_unusable_worker_settings_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="duty"):
        ScanPlannerWorker(ScanMapCfg(), RADIUS, duty=0.0)
    with pytest.raises(ValueError, match="radius"):
        ScanPlannerWorker(ScanMapCfg(), 0.0)


def test_a_failure_in_the_worker_raises_once_from_the_next_step() -> None:
    worker = ScanPlannerWorker(ScanMapCfg(), RADIUS, RULE, planner=FailingPlanner, lockstep=True)
    try:
        world = make_world(np.random.default_rng(5))
        pose = np.array([0.0, 0.0, 0.0])
        scan = scan_at(world, pose, np.random.default_rng(0))
        with pytest.raises(RuntimeError, match="planning broke"):
            worker.step(scan, pose, GOAL, 0.0)
        assert worker.step(None, pose, GOAL, 0.1) is None  # reported once
    finally:
        worker.close()


def test_a_worker_that_ended_is_reported_once_and_started_again() -> None:
    worker = ScanPlannerWorker(ScanMapCfg(), RADIUS, RULE, lockstep=True)
    try:
        world = make_world(np.random.default_rng(5))
        pose = np.array([0.0, 0.0, 0.0])
        rng = np.random.default_rng(0)
        assert worker.step(scan_at(world, pose, rng), pose, GOAL, 0.0) is not None
        proc = worker._run.proc
        proc.kill()
        proc.wait()
        with pytest.raises(RuntimeError, match="ended"):
            wait_for(lambda: worker.step(None, pose, GOAL, 0.1) and False)
        assert worker.step(scan_at(world, pose, rng), pose, GOAL, 0.2) is not None  # a new worker, a new map
        assert worker.running and worker._run.proc.pid != proc.pid and worker.restarts == 1
    finally:
        worker.close()


def gate_with_worker() -> CommandGate:
    settings = GateSettings(
        control_period=0.1,
        goal_tolerance=0.3,
        limits=Limits(1.0, 1.0),
        stale_timeout=0.5,
        odom_frame="odom",
        goal_frames={},
        scan_options=None,
        clock_timeout=1.0,
        scan_map=ScanMapCfg(),
        robot_radius=RADIUS,
        scan_map_worker=True,
    )
    gate = CommandGate.from_settings(GoalRecorder(), settings)
    gate.scan_errors = (ScanUnusable,)
    return gate


def test_the_gate_hands_scans_to_its_worker_and_stops_it_on_close() -> None:
    gate = gate_with_worker()
    planner = gate.scan_planner
    assert isinstance(planner, ScanPlannerWorker) and not planner.running  # started by start(), or the first scan
    gate.start()
    assert planner.running
    proc = planner._run.proc
    world = make_world(np.random.default_rng(5))
    rng = np.random.default_rng(0)
    assert gate.set_goal(*GOAL, "odom")[0]
    subgoals = []
    for k in range(200):
        t = 1.0 + 0.1 * k
        gate.set_scan(scan_at(world, np.zeros(3), rng), t)
        gate.set_odom((0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), t, "odom")
        r = gate.tick(t)
        assert r.state == State.DRIVING
        subgoals.append(r.subgoal)
        if r.subgoal is not None:
            break
        time.sleep(0.05)
    assert subgoals[0] is None and subgoals[-1] is not None  # the first ticks drive to the goal itself
    assert gate.driver.goals[-1] == subgoals[-1]
    gate.close()
    assert proc.poll() is not None and not planner.running


def test_the_worker_ends_with_its_parent(tmp_path: Path) -> None:
    """A parent that dies without closing (killed) takes its worker with it."""
    code = (
        "import os, sys, time\n"
        "from navdeploy.scan_map import ScanMapCfg\n"
        "from navdeploy.scan_worker import ScanPlannerWorker\n"
        "w = ScanPlannerWorker(ScanMapCfg(), 0.2)\n"
        "w.start()\n"
        "print(w._run.proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert _alive(pid)
    finally:
        parent.kill()
        parent.wait()
    wait_for(lambda: not _alive(pid), timeout=30.0, every=0.1)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z" and os.path.exists(f"/proc/{pid}")
