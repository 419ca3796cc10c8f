"""The path-following rule (navcontract.subgoal) and the safety controller's path input.

The rule on hand-made paths (straight line, L-turn, a U-turn around a wall, padding, a single
point, repeated points, the end of the path, progress that never goes back), then the same rule in
numpy one world at a time against torch batched over 64 random paths: the robot's sub-goal is the
training rule's. Then the controller: paths in a static frame, an empty path, a new goal pose,
refused paths, the goal reached at the path's end. Last, the rule a policy was trained with: the
contract's ``path_following`` section from the training config (defaults for configs without
``env.worlds``), its checks on load, and the node's parameters (0 = the bundle's, > 0 replaces it;
a bundle without the section follows paths with LookaheadRule's defaults).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from navcontract.action import ActionScaling
from navcontract.bundle import CONTRACT_FILE, BundleError, parse_contract, read_contract
from navcontract.subgoal import (
    SECTION,
    LookaheadRule,
    PathFollowingError,
    TrainedPathFollowing,
    follow_path,
    path_length,
)
from navdeploy.gate import CommandGate
from navdeploy.inputs import MAX_PATH_POINTS, parse_goal_frames
from navdeploy.node_params import NodeParams
from navdeploy.settings import Limits, resolve_settings
from navdeploy.states import State
from support.paths import FIXTURE_BUNDLE

RULE = LookaheadRule(lookahead=1.0, search_window=2.0)


def one(points, position, progress: float = 0.0, count: int | None = None, rule: LookaheadRule = RULE):
    """follow_path for one world in numpy: (subgoal (2,), progress, remaining) as plain floats."""
    path = np.asarray(points, dtype=np.float32)[None]
    n = path.shape[1] if count is None else count
    sub, prog, rem = follow_path(
        path, np.array([n]), np.array([position], dtype=np.float32), np.array([progress], dtype=np.float32), rule
    )
    assert sub.dtype == np.float32 and prog.dtype == np.float32 and rem.dtype == np.float32
    assert np.all(np.isfinite(sub)) and np.isfinite(prog[0]) and np.isfinite(rem[0])
    return sub[0], float(prog[0]), float(rem[0])


# ---------------------------------------------------------------------------------------- the rule
def test_straight_line() -> None:
    line = [(0, 0), (1, 0), (2.5, 0), (5, 0)]
    sub, prog, rem = one(line, (1.0, 0.3))
    assert sub == pytest.approx([2.0, 0.0], abs=1e-6)
    assert prog == pytest.approx(1.0, abs=1e-6) and rem == pytest.approx(4.3, abs=1e-5)
    assert path_length(np.asarray([line], np.float32), np.array([4]))[0] == pytest.approx(5.0)


def test_l_turn_subgoal_goes_round_the_corner() -> None:
    corner = [(0, 0), (2, 0), (2, 3)]
    sub, prog, rem = one(corner, (1.8, 0.1))
    assert prog == pytest.approx(1.8, abs=1e-6)
    assert sub == pytest.approx([2.0, 0.8], abs=1e-6)  # 0.2 m to the corner, 0.8 m up the second leg
    assert rem == pytest.approx((5.0 - 1.8) + 0.1, abs=1e-5)
    # Outside the corner both legs project onto it: the tie goes to the leg further along.
    sub, prog, _ = one(corner, (2.5, -0.5), progress=1.5)
    assert prog == pytest.approx(2.0, abs=1e-6) and sub == pytest.approx([2.0, 1.0], abs=1e-6)


U_TURN = [(0, 0), (4, 0), (4, 0.7), (0, 0.7)]
"""Out along y = 0, round the end of a thin wall along y = 0.5 (x < 3.8), back along y = 0.7."""


def test_u_turn_window_keeps_the_projection_on_the_current_leg() -> None:
    robot = (1.0, 0.4)  # outbound, 0.1 m short of the wall: by plain distance the return leg is nearer
    assert abs(robot[1] - 0.7) < abs(robot[1] - 0.0)
    sub, prog, rem = one(U_TURN, robot, progress=0.5)
    assert prog == pytest.approx(1.0, abs=1e-6) and sub == pytest.approx([2.0, 0.0], abs=1e-6)
    assert rem == pytest.approx((8.7 - 1.0) + 0.4, abs=1e-5)
    # Without the window the return leg (behind the wall, 6.7 m further along the path) captures it.
    _, prog_wide, _ = one(U_TURN, robot, progress=0.5, rule=LookaheadRule(1.0, 100.0))
    assert prog_wide == pytest.approx(4.0 + 0.7 + 3.0, abs=1e-5)
    # Driving out along the wall, the projection stays on the outbound leg.
    prog = 0.0
    for x in np.arange(0.0, 3.2, 0.1):
        _, prog, _ = one(U_TURN, (float(x), 0.4), progress=prog)
        assert prog == pytest.approx(float(x), abs=1e-5)


def test_padding_is_ignored() -> None:
    pts = [(0, 0), (2, 0), (2, 2)]
    padded = pts + [(np.nan, np.nan), (100.0, -50.0), (np.inf, 0.0)]
    for pos, progress in (((1.0, 0.5), 0.0), ((2.5, 1.5), 1.0), ((5.0, 5.0), 3.5)):
        a = one(pts, pos, progress)
        b = one(padded, pos, progress, count=3)
        assert a[0] == pytest.approx(b[0], abs=1e-6) and a[1:] == pytest.approx(b[1:], abs=1e-6)
    assert path_length(np.asarray([padded], np.float32), np.array([3]))[0] == pytest.approx(4.0)


def test_single_point_path() -> None:
    sub, prog, rem = one([(1.0, 2.0)], (4.0, 6.0))
    assert sub == pytest.approx([1.0, 2.0]) and prog == 0.0 and rem == pytest.approx(5.0)
    sub, prog, rem = one([(1.0, 2.0), (np.nan, 0.0), (7.0, 7.0)], (4.0, 6.0), count=1)
    assert sub == pytest.approx([1.0, 2.0]) and prog == 0.0 and rem == pytest.approx(5.0)


def test_repeated_points_give_no_nan() -> None:
    dup = [(0, 0), (0, 0), (1, 0), (1, 0), (1, 0), (3, 0), (3, 0)]
    clean = [(0, 0), (1, 0), (3, 0)]
    for pos, progress in (((0.0, 0.0), 0.0), ((1.0, 0.2), 0.5), ((0.5, -1.0), 0.0), ((3.0, 0.0), 2.9)):
        a, b = one(dup, pos, progress), one(clean, pos, progress)
        assert a[0] == pytest.approx(b[0], abs=1e-6) and a[1:] == pytest.approx(b[1:], abs=1e-6)
    sub, prog, rem = one([(2, 2)] * 5, (2, 3))
    assert sub == pytest.approx([2, 2]) and prog == 0.0 and rem == pytest.approx(1.0)


def test_subgoal_clamps_at_the_path_end() -> None:
    line = [(0, 0), (5, 0)]
    sub, prog, rem = one(line, (4.8, 0.0), progress=4.0)
    assert sub == pytest.approx([5.0, 0.0]) and rem == pytest.approx(0.2, abs=1e-5)
    sub, prog, rem = one(line, (6.0, 0.0), progress=4.8)  # past the end
    assert sub == pytest.approx([5.0, 0.0]) and prog == pytest.approx(5.0) and rem == pytest.approx(1.0)
    sub, prog, _ = one(line, (0.0, 0.0), progress=99.0)  # progress beyond the path: taken as its end
    assert prog == pytest.approx(5.0) and sub == pytest.approx([5.0, 0.0])


def test_progress_never_decreases() -> None:
    rng = np.random.default_rng(3)
    path = np.cumsum(rng.normal(0.0, 1.0, (20, 2)), axis=0)
    prog = 0.0
    for _ in range(300):
        _, new, rem = one(path, rng.uniform(-5, 5, 2) + path[rng.integers(20)], progress=prog)
        assert new >= prog and rem >= 0.0
        prog = new
    _, back, _ = one(U_TURN, (0.0, 0.0), progress=2.0)  # the robot went back to the start
    assert back == pytest.approx(2.0)


def test_non_finite_position_gives_non_finite_output_not_an_error() -> None:
    path = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]])
    sub, prog, rem = follow_path(path, torch.tensor([2]), torch.tensor([[math.nan, 0.0]]), torch.zeros(1))
    assert sub.shape == (1, 2) and prog.shape == (1,) and not torch.isfinite(rem).all()


def test_lookahead_rule_is_validated() -> None:
    for kw in ({"lookahead": -0.1}, {"lookahead": math.nan}, {"search_window": 0.0}, {"search_window": math.inf}):
        with pytest.raises(ValueError):
            LookaheadRule(**kw)


# ------------------------------------------------------------------------- numpy == torch (training)
def random_paths(n: int, k: int, seed: int):
    """N random-walk paths of up to K points, varying counts (1..K, NaN padding), poses near them."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(0.0, 0.8, (n, k, 2)).astype(np.float32)
    steps[:, 3] = 0.0  # a repeated point in every path
    path = np.cumsum(steps, axis=1).astype(np.float32)
    count = rng.integers(1, k + 1, n)
    count[:4] = (1, 2, k, k)
    for i in range(n):
        path[i, count[i] :] = np.nan
    return path, count, rng


def test_numpy_one_world_equals_torch_batched() -> None:
    """The node's sub-goal (numpy, N = 1) equals the training rule's (torch, N = 64) for the same
    path and pose, carried over several steps of progress."""
    n, k = 64, 12
    path, count, rng = random_paths(n, k, seed=7)
    anchor = np.nan_to_num(path[np.arange(n), rng.integers(0, count)])
    t_path, t_count = torch.from_numpy(path), torch.from_numpy(count)
    t_prog = torch.zeros(n)
    np_prog = np.zeros(n, dtype=np.float32)
    for step in range(6):
        position = (anchor + rng.normal(0.0, 0.7, (n, 2)) + 0.3 * step).astype(np.float32)
        t_sub, t_prog, t_rem = follow_path(t_path, t_count, torch.from_numpy(position), t_prog, RULE)
        assert isinstance(t_sub, torch.Tensor) and t_sub.dtype == torch.float32 and t_sub.shape == (n, 2)
        for i in range(n):
            sub, prog, rem = follow_path(
                path[i : i + 1, : count[i]], count[i : i + 1], position[i : i + 1], np_prog[i : i + 1], RULE
            )
            assert sub[0] == pytest.approx(t_sub[i].numpy(), abs=1e-5), (step, i)
            assert prog[0] == pytest.approx(float(t_prog[i]), abs=1e-5)
            assert rem[0] == pytest.approx(float(t_rem[i]), abs=1e-5)
            np_prog[i] = prog[0]
        assert torch.isfinite(t_sub).all() and torch.isfinite(t_rem).all()
    lengths = path_length(t_path, t_count)
    for i in range(n):
        seg = np.diff(path[i, : count[i]].astype(np.float64), axis=0)
        assert float(lengths[i]) == pytest.approx(np.hypot(seg[:, 0], seg[:, 1]).sum(), abs=1e-4)


# ------------------------------------------------------------------------------------- controller
class GoalRecorder:
    """A runtime stand-in that drives forward and records the goal it was given."""

    def __init__(self) -> None:
        self.goals: list[tuple[float, float]] = []
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def step(self, scan, pose, twist, goal) -> np.ndarray:
        self.goals.append((float(goal[0]), float(goal[1])))
        return np.array([0.5, 0.0, 0.0])


def controller(**kw) -> CommandGate:
    args = dict(driver=GoalRecorder(), limits=Limits(1.5, 2.0, True), goal_tolerance=0.3, stale_timeout=0.5)
    args.update(kw)
    return CommandGate(**args)


def at(c: CommandGate, x: float, y: float, t: float = 1.0) -> None:
    c.set_scan(object(), t)
    assert c.set_odom((x, y), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), t, "odom") is None


def expected_subgoal(points_odom, position, progress: float = 0.0) -> tuple[float, float]:
    sub, _, _ = one(points_odom, position, progress)
    return float(sub[0]), float(sub[1])


def test_path_in_a_static_frame_is_transformed_and_followed() -> None:
    c = controller(goal_frames=parse_goal_frames("map 1.0 2.0 1.5707963267948966"))
    at(c, 1.0, 2.5)
    ok, text = c.set_path(np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 1.0]]), "map")
    assert ok and "3 poses" in text
    odom_pts = [(1.0, 2.0), (1.0, 4.0), (0.0, 4.0)]  # rotated a quarter turn, shifted by (1, 2)
    assert c.path == pytest.approx(np.array(odom_pts, dtype=np.float32), abs=1e-6)
    assert c.final_goal() == pytest.approx((0.0, 4.0), abs=1e-6)
    r = c.tick(1.0)
    assert r.state == State.DRIVING and r.path_in_use
    assert r.subgoal == pytest.approx(expected_subgoal(odom_pts, (1.0, 2.5)), abs=1e-6)
    assert r.subgoal == pytest.approx((1.0, 3.5), abs=1e-6)
    assert c.driver.goals[-1] == pytest.approx(r.subgoal)
    assert r.distance == pytest.approx(math.hypot(1.0, 1.5))  # to the path's last point
    assert r.path_remaining == pytest.approx(2.5, abs=1e-5)
    at(c, 1.0, 3.8, t=1.1)  # further along: progress moves, the sub-goal goes round the corner
    r = c.tick(1.1)
    assert c.path_progress == pytest.approx(1.8, abs=1e-5) and r.subgoal == pytest.approx((0.2, 4.0), abs=1e-5)


def test_empty_path_falls_back_to_the_goal_pose() -> None:
    c = controller()
    at(c, 0.0, 0.0)
    assert c.set_goal(5.0, 0.0, "odom")[0]
    assert c.tick(1.0).subgoal is None and c.driver.goals[-1] == (5.0, 0.0)
    assert c.set_path(np.array([[0.0, 0.0], [0.0, 3.0]]), "odom")[0]
    r = c.tick(1.0)
    assert r.path_in_use and r.subgoal == pytest.approx((0.0, 1.0)) and c.driver.goals[-1] == pytest.approx((0.0, 1.0))
    ok, text = c.set_path(np.zeros((0, 2)), "odom")
    assert ok and "goal pose" in text
    r = c.tick(1.0)
    assert r.state == State.DRIVING and not r.path_in_use and r.subgoal is None
    assert c.driver.goals[-1] == (5.0, 0.0) and r.distance == pytest.approx(5.0)
    c.clear_goal()
    assert c.set_path([], "odom")[0]  # an empty path with no goal pose: nothing to drive to
    assert c.tick(1.0).state == State.NO_GOAL


def test_new_goal_pose_clears_the_path() -> None:
    c = controller()
    at(c, 0.0, 0.0)
    c.set_path(np.array([[0.0, 0.0], [0.0, 3.0]]), "odom")
    assert c.tick(1.0).path_in_use
    assert c.set_goal(4.0, 0.0, "odom")[0]
    r = c.tick(1.0)
    assert c.path is None and not r.path_in_use and c.driver.goals[-1] == (4.0, 0.0)
    c.set_path(np.array([[0.0, 0.0], [0.0, 3.0]]), "odom")
    assert not c.set_goal(4.0, 0.0, "earth")[0]  # a refused goal stops: no path left to follow either
    assert c.path is None and c.tick(1.0).state == State.NO_GOAL


def test_new_path_restarts_progress_and_the_policy() -> None:
    c = controller()
    at(c, 2.0, 0.0)
    c.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]), "odom")
    c.tick(1.0)
    assert c.path_progress == pytest.approx(2.0)
    resets = c.driver.resets
    c.set_path(np.array([[2.0, 0.0], [2.0, 5.0]]), "odom")
    assert c.path_progress == 0.0
    assert c.tick(1.0).subgoal == pytest.approx((2.0, 1.0)) and c.driver.resets == resets + 1


def test_bad_paths_are_refused_and_change_nothing() -> None:
    c = controller(goal_frames=parse_goal_frames("map 1 0 0"))
    at(c, 0.0, 0.0)
    c.set_goal(9.0, 9.0, "odom")
    good = np.array([[0.0, 0.0], [3.0, 0.0]])
    assert c.set_path(good, "odom")[0]
    c.tick(1.0)
    before = (c.path.copy(), c.path_progress, c.goal)
    too_many = np.zeros((MAX_PATH_POINTS + 1, 2))
    cases = [
        (np.array([[0.0, 0.0], [np.nan, 1.0]]), "odom", "pose 1 is not finite"),
        (np.array([[0.0, 0.0], [np.inf, 1.0]]), "odom", "not finite"),
        (good, "earth", "frame 'earth'"),
        (too_many, "odom", f"more than {MAX_PATH_POINTS}"),
        (np.zeros((3, 3)), "odom", "expected (K, 2)"),
        ([["a", "b"]], "odom", "not numbers"),
    ]
    for points, frame, needle in cases:
        ok, text = c.set_path(points, frame)
        assert not ok and needle in text and "nothing changed" in text and "\n" not in text, text
        assert np.array_equal(c.path, before[0]) and c.path_progress == before[1] and c.goal == before[2]
    for msg in (SimpleNamespace(header=None), path_msg([(0, 0)] * (MAX_PATH_POINTS + 1)), path_msg([(0, "x")])):
        ok, text = c.path_message(msg)
        assert not ok and text.startswith("path refused") and "\n" not in text
        assert np.array_equal(c.path, before[0])
    assert c.tick(1.0).path_in_use


def path_msg(points, frame: str = "odom") -> SimpleNamespace:
    """A nav_msgs/Path-like object."""
    poses = [SimpleNamespace(pose=SimpleNamespace(position=SimpleNamespace(x=x, y=y, z=0.0))) for x, y in points]
    return SimpleNamespace(header=SimpleNamespace(frame_id=frame), poses=poses)


def test_path_message_adapter() -> None:
    c = controller(goal_frames=parse_goal_frames("map 1 0 0"))
    at(c, 1.0, 0.0)
    ok, _ = c.path_message(path_msg([(0, 0), (3, 0)], "map"))
    assert ok and c.path == pytest.approx(np.array([[1, 0], [4, 0]], np.float32))
    assert c.tick(1.0).subgoal == pytest.approx((2.0, 0.0))
    assert c.path_message(path_msg([]))[0] and c.path is None
    c.path_message(path_msg([(0, 0), (3, 0)]))
    c.input_failed("path", "callback failed")  # a message the node could not handle at all: stop
    assert c.path is None and c.tick(1.0).state == State.NO_GOAL


def test_goal_reached_at_the_end_of_the_path_not_at_a_loop_start() -> None:
    loop = np.array([[0.0, 0.0], [3.0, 0.0], [3.0, 3.0], [0.0, 3.0], [0.0, 0.1]])
    c = controller()
    at(c, 0.0, 0.0)
    c.set_path(loop, "odom")
    r = c.tick(1.0)  # 0.1 m from the last point, but the whole loop lies ahead
    assert r.state == State.DRIVING and r.subgoal == pytest.approx((1.0, 0.0))
    prog = 0.0
    for x, y in [(2, 0), (3, 1), (3, 3), (1.5, 3), (0, 2.5), (0, 1.0)]:
        at(c, float(x), float(y))
        assert c.tick(1.0).state == State.DRIVING
        assert c.path_progress > prog
        prog = c.path_progress
    at(c, 0.0, 0.2)
    r = c.tick(1.0)
    assert r.state == State.GOAL_REACHED and r.distance == pytest.approx(0.1, abs=1e-6)


def stub_contract(path_following: TrainedPathFollowing | None = None) -> SimpleNamespace:
    """The parts of a parsed contract resolve_settings reads."""
    return SimpleNamespace(
        control_period=0.1,
        goal_tolerance=0.3,
        v_max=1.5,
        omega_max=2.0,
        num_beams=72,
        scaling=ActionScaling(1.5, 2.0, True),
        response=None,
        path_following=path_following,
    )


def unguarded(contract: SimpleNamespace, params: NodeParams | None = None):
    """resolve_settings with the node's guard off: the stub states no radius to guard with (and these
    tests are about the path rule)."""
    return resolve_settings(contract, replace(params or NodeParams(), guard=False))


def test_path_settings() -> None:
    contract = stub_contract()
    s, warnings = unguarded(contract)
    assert s.path_rule == LookaheadRule(1.0, 2.0) == LookaheadRule()
    assert "path_lookahead 1 m (default; the bundle has no path_following section)" in s.path_source
    assert "trained rule not stated" in s.path_source and not warnings
    s, _ = unguarded(contract, NodeParams(path_lookahead=0.6, path_search_window=3))
    assert s.path_rule == LookaheadRule(0.6, 3.0)
    assert s.path_source.startswith("path_lookahead 0.6 m (node parameter), path_search_window 3 m (node parameter)")
    assert CommandGate.from_settings(GoalRecorder(), s).path_rule == LookaheadRule(0.6, 3.0)
    for kw, name in (
        ({"path_lookahead": -0.1}, "path_lookahead"),
        ({"path_lookahead": math.nan}, "path_lookahead"),
        ({"path_lookahead": 101.0}, "path_lookahead"),
        ({"path_search_window": -1.0}, "path_search_window"),
        ({"path_search_window": True}, "path_search_window"),
    ):
        with pytest.raises(ValueError, match=name):
            resolve_settings(contract, NodeParams(**kw))


def test_path_parameters_of_zero_take_the_bundles_rule() -> None:
    """As goal_tolerance 0 takes the bundle's tolerance: 0 takes the trained rule, > 0 replaces it."""
    trained = TrainedPathFollowing(LookaheadRule(0.7, 2.5), 0.5)
    s, warnings = unguarded(stub_contract(trained))
    assert s.path_rule == LookaheadRule(0.7, 2.5) and not warnings
    assert s.path_source == (
        "path_lookahead 0.7 m (bundle contract; node parameter 0 = the bundle's), "
        "path_search_window 2.5 m (bundle contract; node parameter 0 = the bundle's); "
        "the policy followed planned paths in 50% of its training episodes"
    )
    s, warnings = unguarded(stub_contract(trained), NodeParams(path_lookahead=1.2))
    assert s.path_rule == LookaheadRule(1.2, 2.5)
    assert "path_lookahead 1.2 m (node parameter; the bundle's 0.7 m)" in s.path_source
    assert warnings == ["path_lookahead=1.2 m differs from the 0.7 m the policy was trained to follow paths with"]
    # The same value as trained, or a policy that never followed a path in training: no warning.
    assert not unguarded(stub_contract(trained), NodeParams(path_search_window=2.5))[1]
    never = TrainedPathFollowing(LookaheadRule(0.7, 2.5), 0.0)
    s, warnings = unguarded(stub_contract(never), NodeParams(path_lookahead=1.2))
    assert s.path_rule == LookaheadRule(1.2, 2.5) and not warnings
    assert s.path_source.endswith("the policy was trained without path following (share 0)")


def test_the_checked_constructor_names_where_the_values_came_from() -> None:
    got = TrainedPathFollowing.checked("trained", 0.7, 3, 0.25)
    assert got == TrainedPathFollowing(LookaheadRule(0.7, 3.0), 0.25)
    assert TrainedPathFollowing.from_dict(got.to_dict()) == got
    assert "lookahead 0.7 m, search window 3 m on 25% of its episodes" in got.describe()


@pytest.mark.parametrize(
    "values, needle",
    [
        ((-0.5, 2.0, 0.0), "where.lookahead = -0.5 must be finite and >= 0"),
        ((1.0, 0.0, 0.0), "where.search_window = 0.0 must be finite and > 0"),
        ((1.0, 2.0, 1.5), "where.share = 1.5 must be finite and >= 0 and <= 1"),
        (("far", 2.0, 0.0), "where.lookahead must be a number"),
    ],
)
def test_unusable_values_are_refused_naming_the_key(values: tuple, needle: str) -> None:
    with pytest.raises(PathFollowingError, match=re.escape(needle)):
        TrainedPathFollowing.checked("where", *values, share_key="share")


def fixture_contract_data() -> dict:
    return json.loads((FIXTURE_BUNDLE / CONTRACT_FILE).read_text())


def test_a_bundle_without_the_section_follows_paths_with_the_defaults() -> None:
    """A bundle without the section (the committed fixture, the shipped default) loads; the robot
    then follows paths with LookaheadRule's defaults."""
    contract = read_contract(FIXTURE_BUNDLE)
    assert SECTION not in contract.raw and contract.path_following is None
    s, warnings = resolve_settings(contract)
    assert s.path_rule == LookaheadRule() and not warnings
    assert "no path_following section" in s.path_source
    s, _ = resolve_settings(contract, NodeParams(path_lookahead=0.4))
    assert s.path_rule == LookaheadRule(0.4, LookaheadRule().search_window)


def test_the_section_is_optional_in_both_formats_and_parsed_when_present() -> None:
    data = fixture_contract_data()
    assert data["format_version"] == 1
    section = TrainedPathFollowing(LookaheadRule(0.7, 2.0), 0.5).to_dict()
    assert parse_contract({**data, SECTION: section}).path_following.rule == LookaheadRule(0.7, 2.0)
    assert parse_contract(data).path_following is None


@pytest.mark.parametrize(
    "edit, needle",
    [
        ({"lookahead": -1.0}, "contract path_following.lookahead = -1.0 must be finite and >= 0"),
        ({"lookahead": math.nan}, "contract path_following.lookahead = nan must be finite"),
        ({"search_window": 0}, "contract path_following.search_window = 0 must be finite and > 0"),
        ({"search_window": math.inf}, "contract path_following.search_window = inf must be finite"),
        ({"trained_share": 1.2}, "contract path_following.trained_share = 1.2 must be finite and >= 0 and <= 1"),
        ({"trained_share": True}, "contract path_following.trained_share must be a number, got True"),
        ({"lookahead": None}, "contract path_following.lookahead must be a number, got None"),
    ],
)
def test_a_corrupt_section_is_refused_in_one_line_naming_the_key(edit: dict, needle: str) -> None:
    data = fixture_contract_data()
    section = {**TrainedPathFollowing(LookaheadRule(0.7, 2.0), 0.5).to_dict(), **edit}
    with pytest.raises(BundleError) as info:
        parse_contract({**data, SECTION: section})
    assert str(info.value).startswith(needle) and "\n" not in str(info.value)


def test_a_section_that_is_not_a_mapping_or_lacks_a_key_is_refused() -> None:
    data = fixture_contract_data()
    with pytest.raises(BundleError, match="^contract path_following must be a mapping, got list$"):
        parse_contract({**data, SECTION: [0.7, 2.0, 0.5]})
    with pytest.raises(BundleError, match="^contract path_following has no trained_share$"):
        parse_contract({**data, SECTION: {"lookahead": 0.7, "search_window": 2.0}})


@pytest.mark.parametrize("sliced", [False, True])
def test_open_subgoal_is_the_same_in_numpy_one_world_at_a_time_and_in_torch_batched(
    sliced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule the node's gate applies to a given path's sub-goal behind the guard, and training to its
    path-following episodes: random robots beside a straight path among random returns; a good share
    of the sub-goals are turned, each at its original distance, the rest as they were. ``sliced``: the
    torch batch judged a few worlds at a time (``navcontract.guard.in_slices``), as a large one is."""
    import navcontract.guard as guard_module
    from navcontract.guard import GuardRule
    from navcontract.subgoal import open_subgoal

    if sliced:
        monkeypatch.setattr(guard_module, "CHUNK_ELEMENTS", 2000)

    rng = np.random.default_rng(0)
    rule = LookaheadRule(lookahead=0.7)
    guard = GuardRule(radius=0.2, margin=0.03, headway=0.5, decel=2.5, slide=False)
    n = 64
    path = np.zeros((n, 2, 2), dtype=np.float32)
    path[:, 1, 0] = 5.0
    pose = np.stack([rng.uniform(0.5, 3, n), rng.uniform(-0.4, 0.4, n), rng.uniform(-1, 1, n)], axis=1)
    ranges = rng.uniform(0.25, 6.0, (n, 72))
    seen = rng.uniform(size=(n, 72)) > 0.1
    count = np.full(n, 2)
    sub, prog, _ = follow_path(path, count, pose[:, :2].astype(np.float32), np.zeros(n, np.float32), rule)
    batched = open_subgoal(
        torch.tensor(path), torch.tensor(count), torch.tensor(pose), torch.tensor(prog), torch.tensor(sub),
        rule, torch.tensor(ranges), torch.tensor(seen), guard, 1.5, 6.0,
    ).numpy()  # fmt: skip
    for i in range(n):
        one = open_subgoal(
            path[i : i + 1], count[i : i + 1], pose[i : i + 1], prog[i : i + 1], sub[i : i + 1],
            rule, ranges[i : i + 1], seen[i : i + 1], guard, 1.5, 6.0,
        )  # fmt: skip
        np.testing.assert_allclose(one[0], batched[i], atol=1e-5)
    turned = np.abs(batched - sub).sum(axis=1) > 1e-6
    assert 5 <= turned.sum() < n
    to_sub = np.hypot(*(sub - pose[:, :2]).T)
    to_new = np.hypot(*(batched - pose[:, :2]).T)
    np.testing.assert_allclose(to_new[turned], to_sub[turned], atol=1e-5)  # the same distance, another way
