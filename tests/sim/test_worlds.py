"""World families: every generated world is feasible for the robot (checked here independently of
the generator's planner), the curriculum moves levels as specified, path following feeds the
policy the robot's sub-goal rule, and the default configuration draws the rooms of env.room without the planner."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from scipy import ndimage

from navcontract.subgoal import LookaheadRule, follow_path, open_subgoal
from navsim.config import NavConfig
from navsim.config_load import load_config
from navsim.env import NavEnv
from navsim.families import FAMILIES, FAMILY_INDEX, extent_half, family_half_extent, planned
from navsim.families.generate import generate_family, place_bounds
from navsim.families.rooms import RoomBatch, RoomGeometry
from navsim.robot import build_mjcf, slot_sizes
from navsim.world_pool import Curriculum, certified_clearance, plan_worlds, planned_worlds
from navtrain.checkpoint import load_checkpoint

ALL = "env.worlds.families={rooms: 1.0, clutter: 1.0, corridors: 1.0, arenas: 1.0}"
WORLDS_PER_FAMILY = {"fast": 50, "sweep": 125}
"""Worlds checked per family (over all 5 levels): a quick sample in the fast tier, a larger one in
the whole suite, each from its own seed."""


def _config(*overrides: str):
    return load_config(overrides=[ALL, "randomization.enabled=false", *overrides])


# ------------------------------------------------------------------------------------------------
# An independent feasibility check: its own distance code (numpy) and its own planner (connected
# components of the free grid), sharing nothing with navsim.families.rooms / navsim.grid_planner.


def _distances(points: np.ndarray, world: dict) -> np.ndarray:
    """Planar distance from points (P, 2) to the nearest obstacle surface or the world's walls."""
    best = np.minimum(world["hx"] - np.abs(points[:, 0]), world["hy"] - np.abs(points[:, 1]))
    for (x, y), r in world["circles"]:
        best = np.minimum(best, np.hypot(points[:, 0] - x, points[:, 1] - y) - r)
    for (x, y), yaw, (ax, ay) in world["boxes"]:
        dx, dy = points[:, 0] - x, points[:, 1] - y
        lx = np.abs(np.cos(yaw) * dx + np.sin(yaw) * dy) - ax
        ly = np.abs(-np.sin(yaw) * dx + np.cos(yaw) * dy) - ay
        d = np.hypot(np.maximum(lx, 0), np.maximum(ly, 0)) + np.minimum(np.maximum(lx, ly), 0)
        best = np.minimum(best, d)
    return best


def _world(batch, sizes, i: int) -> dict:
    """World i as plain shapes (bound slots left out: the walls are the world's extents)."""
    nc = len(sizes.cylinder_radius)
    bound = set(sizes.role("bound").tolist())
    pos = batch.slot_pos[i].numpy().astype(np.float64)
    yaw = batch.slot_yaw[i].numpy().astype(np.float64)
    act = batch.slot_active[i].numpy()
    circles = [(pos[j], sizes.cylinder_radius[j]) for j in np.flatnonzero(act) if j < nc]
    boxes = [(pos[j], yaw[j], sizes.box_half[j - nc]) for j in np.flatnonzero(act) if j >= nc and j not in bound]
    hx, hy = (float(v) for v in batch.half[i])
    return {"circles": circles, "boxes": boxes, "hx": hx, "hy": hy}


def _connected(world: dict, start: np.ndarray, goal: np.ndarray, radius: float, cell: float = 0.04) -> bool:
    """Start and goal in one 8-connected component of the cells whose exact clearance > radius."""
    xs = np.arange(-world["hx"] + cell / 2, world["hx"], cell)
    ys = np.arange(-world["hy"] + cell / 2, world["hy"], cell)
    gx, gy = np.meshgrid(xs, ys)
    free = (_distances(np.stack([gx.ravel(), gy.ravel()], axis=1), world) > radius).reshape(gx.shape)
    labels, _ = ndimage.label(free, structure=np.ones((3, 3)))

    def label_at(p: np.ndarray) -> int:
        ix = int(np.argmin(np.abs(xs - p[0])))
        iy = int(np.argmin(np.abs(ys - p[1])))
        return int(labels[iy, ix])

    a, b = label_at(start), label_at(goal)
    return a > 0 and a == b


def _path_clear(world: dict, path: np.ndarray, radius: float, spacing: float = 0.01) -> float:
    """Smallest clearance along the polyline, sampled every ``spacing`` metres."""
    pts = [path[:1]]
    for a, b in zip(path[:-1], path[1:], strict=True):
        m = max(2, int(math.ceil(np.linalg.norm(b - a) / spacing)) + 1)
        pts.append(a + np.linspace(0, 1, m)[:, None] * (b - a))
    return float(_distances(np.concatenate(pts), world).min())


@pytest.fixture(scope="module")
def setup():
    cfg = _config()
    sizes = slot_sizes(cfg.env)
    geom = RoomGeometry(cfg.env, sizes, "cpu")
    return cfg, sizes, geom


@pytest.mark.parametrize("sample", ["fast", pytest.param("sweep", marks=pytest.mark.slow)])
@pytest.mark.parametrize("family", FAMILIES)
def test_every_generated_world_is_feasible_for_the_robot(setup, family, sample):
    """50 (fast) or 125 (sweep) worlds per family over all levels: the recorded path keeps more than
    the certified clearance (the guard's passing clearance, more than the robot's radius) from every
    surface (sampled every 1 cm) and an independent grid planner joins start and goal at it."""
    cfg, sizes, geom = setup
    radius = certified_clearance(cfg.env)
    assert cfg.env.worlds.certify == "guard" and radius > cfg.env.robot.radius
    levels = cfg.env.worlds.curriculum.levels
    gen = torch.Generator()
    gen.manual_seed(1234 + FAMILY_INDEX[family] + 100 * (sample == "sweep"))
    per_level = WORLDS_PER_FAMILY[sample] // levels
    checked = 0
    for level in range(levels):
        batch, _ = planned_worlds(family, level, per_level, cfg.env, geom, gen)
        assert (batch.family == FAMILY_INDEX[family]).all() and (batch.level == level).all()
        for i in range(per_level):
            world = _world(batch, sizes, i)
            path = batch.path[i, : int(batch.path_count[i])].numpy().astype(np.float64)
            start, goal = batch.start[i, :2].numpy(), batch.goal[i].numpy()
            assert np.allclose(path[0], start, atol=1e-5) and np.allclose(path[-1], goal, atol=1e-5)
            assert _path_clear(world, path, radius) > radius, f"{family} level {level} world {i}: path too close"
            length = float(np.linalg.norm(np.diff(path, axis=0), axis=1).sum())
            assert length == pytest.approx(float(batch.path_length[i]), rel=1e-4)
            shortest = float(batch.shortest_length[i])
            assert np.linalg.norm(goal - start) - 1e-4 <= shortest <= length + 1e-4
            if i % 4 == 0:  # the independent planner on every fourth world (it is slower)
                assert _connected(world, start, goal, radius), f"{family} level {level} world {i}"
            checked += 1
    assert checked >= WORLDS_PER_FAMILY[sample]


def test_independent_check_and_planner_refuse_a_blocked_world(setup):
    """A wall across a corridor world: the planner says infeasible, and so does the independent check."""
    cfg, sizes, geom = setup
    gen = torch.Generator()
    gen.manual_seed(5)
    batch = generate_family("clutter", 0, 1, cfg.env, geom, gen)
    batch.slot_active[:] = False
    piece = sizes.role("piece")
    hy = family_half_extent(cfg.env, "clutter")[1]
    k = int(math.ceil(hy / sizes.box_half[piece[0] - len(sizes.cylinder_radius), 0]))
    for j, slot in enumerate(piece[:k]):  # pieces end to end across the field at x = 0
        batch.slot_pos[0, slot] = torch.tensor([0.0, -hy + (2 * j + 1) * 0.25])
        batch.slot_yaw[0, slot] = math.pi / 2
        batch.slot_active[0, slot] = True
    place_bounds(batch, sizes, cfg.env.room.wall_thickness)
    plan = plan_worlds(batch, cfg.env, geom)
    assert not plan.feasible[0]
    world = _world(batch, sizes, 0)
    assert not _connected(world, batch.start[0, :2].numpy(), batch.goal[0].numpy(), cfg.env.robot.radius)
    batch.slot_active[0, piece[k // 2]] = False  # open one gap of 0.5 m: feasible for the radius alone
    radius_only = copy.deepcopy(cfg.env)
    radius_only.worlds.certify = "radius"
    assert plan_worlds(batch, radius_only, geom).feasible[0]
    world = _world(batch, sizes, 0)
    assert _connected(world, batch.start[0, :2].numpy(), batch.goal[0].numpy(), cfg.env.robot.radius)
    # not for the guard: the grid certifies a passage of 2 x its passing clearance + 0.1 m (0.54 m)
    assert not plan_worlds(batch, cfg.env, geom).feasible[0]
    batch.slot_active[0, piece[k // 2 + 1]] = False  # 1 m wide: feasible for both
    assert plan_worlds(batch, cfg.env, geom).feasible[0] and plan_worlds(batch, radius_only, geom).feasible[0]


def test_the_followed_path_keeps_clear_of_a_narrow_gap_when_a_wide_one_is_near(setup):
    """A wall across a clutter field with a 0.5 m gap on the straight line and a 1 m gap by the side
    wall: the shortest path squeezes through the narrow gap, the followed path
    (env.worlds.path_clearance) takes the wide one, and both record the shortest length for SPL."""
    cfg, sizes, geom = setup
    radius = cfg.env.robot.radius
    gen = torch.Generator()
    gen.manual_seed(5)
    batch = generate_family("clutter", 0, 1, cfg.env, geom, gen)
    batch.slot_active[:] = False
    piece = sizes.role("piece")
    half = float(sizes.box_half[piece[0] - len(sizes.cylinder_radius), 0])
    hy = family_half_extent(cfg.env, "clutter")[1]
    centres = np.arange(-hy + half, hy, 2 * half)
    open_at = {int(np.argmin(np.abs(centres + half)))}  # narrow: the piece just below y = 0
    open_at |= {len(centres) - 1, len(centres) - 2}  # wide: the two by the +y wall
    used = [y for k, y in enumerate(centres) if k not in open_at]
    for slot, y in zip(piece, used, strict=False):
        batch.slot_pos[0, slot] = torch.tensor([0.0, float(y)])
        batch.slot_yaw[0, slot] = math.pi / 2
        batch.slot_active[0, slot] = True
    batch.start[0] = torch.tensor([-5.0, 0.0, 0.0])
    batch.goal[0] = torch.tensor([5.0, 0.0])
    place_bounds(batch, sizes, cfg.env.room.wall_thickness)
    world = _world(batch, sizes, 0)
    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.worlds.certify = "radius"  # the 0.5 m gap is certified for the radius, not for the guard
    env_cfg.worlds.path_clearance = 0.0
    short = plan_worlds(batch, env_cfg, geom)
    env_cfg.worlds.path_clearance = 0.25
    wide = plan_worlds(batch, env_cfg, geom)
    assert short.feasible[0] and wide.feasible[0]
    short_path = short.path[0, : short.count[0]].astype(np.float64)
    wide_path = wide.path[0, : wide.count[0]].astype(np.float64)
    assert _path_clear(world, short_path, radius) < radius + 0.06  # through the 0.5 m gap
    assert _path_clear(world, wide_path, radius) > radius + 0.15  # through the 1 m gap
    assert wide_path[:, 1].max() > hy - 1.0
    assert short.shortest[0] == pytest.approx(short.length[0]) and wide.shortest[0] == pytest.approx(short.length[0])
    assert wide.length[0] > short.length[0] + 0.2


def test_levels_make_worlds_harder(setup):
    cfg, _, geom = setup
    gen = torch.Generator()
    gen.manual_seed(9)
    easy, _ = planned_worlds("clutter", 0, 32, cfg.env, geom, gen)
    hard, _ = planned_worlds("clutter", 4, 32, cfg.env, geom, gen)
    assert hard.slot_active.sum() > 1.5 * easy.slot_active.sum()
    easy, _ = planned_worlds("arenas", 0, 32, cfg.env, geom, gen)
    hard, _ = planned_worlds("arenas", 4, 32, cfg.env, geom, gen)
    assert hard.path_length.mean() > easy.path_length.mean() + 1.0
    easy, _ = planned_worlds("corridors", 0, 32, cfg.env, geom, gen)
    hard, _ = planned_worlds("corridors", 4, 32, cfg.env, geom, gen)
    assert hard.slot_active.sum() > easy.slot_active.sum()  # fewer walls opened: more dead ends


# ------------------------------------------------------------------------------------------------
# Curriculum


def test_curriculum_moves_up_on_success_and_down_on_failure():
    cfg = _config("env.worlds.curriculum.enabled=true", "env.worlds.curriculum.start_level=2")
    gen = torch.Generator()
    gen.manual_seed(0)
    cur = Curriculum(cfg.env, 6, torch.device("cpu"), gen)
    assert cur.level.tolist() == [2] * 6
    done = torch.tensor([True, True, False, True, True, False])
    success = torch.tensor([True, False, False, False, True, True])  # success without done: no move
    cur.update(done, success)
    assert cur.level.tolist() == [3, 1, 2, 1, 3, 2]
    for _ in range(5):
        cur.update(torch.ones(6, dtype=torch.bool), torch.tensor([True, False, True, False, True, False]))
    assert cur.level.tolist() == [4, 0, 4, 0, 4, 0]  # clamped to [0, levels - 1]
    log = cur.log()
    assert float(log["Curriculum/share_level_4"]) == pytest.approx(0.5)
    assert float(log["Curriculum/share_level_0"]) == pytest.approx(0.5)


def test_curriculum_state_restores_level_shares_per_family_for_another_number_of_worlds():
    """What a checkpoint keeps (level counts per family) comes back in a run with more worlds: each
    family's level shares, within sampling; a family saved with another number of levels keeps its own."""
    cfg = _config("env.worlds.curriculum.enabled=true")
    gen = torch.Generator()
    gen.manual_seed(3)
    saved = Curriculum(cfg.env, 400, torch.device("cpu"), gen)
    for k in range(len(saved.families)):  # family k: its worlds at level k % levels
        saved.level[saved.slot == k] = k % saved.levels
    saved.level[(saved.slot == 0).nonzero()[::2, 0]] = 4  # rooms: half at 0, half at 4
    state = saved.state()
    assert sum(sum(c) for c in state.values()) == 400
    state["arenas"] = [1, 1]  # another number of levels: ignored
    resumed = Curriculum(cfg.env, 4000, torch.device("cpu"), gen)
    assert resumed.restore(state, gen) == ["rooms", "clutter", "corridors"]
    for k, name in enumerate(resumed.families):
        levels = resumed.level[resumed.slot == k]
        if name == "rooms":
            assert set(levels.tolist()) == {0, 4} and abs(float((levels == 4).float().mean()) - 0.5) < 0.06
        elif name == "arenas":
            assert (levels == 0).all()  # start_level
        else:
            assert (levels == k).all()
    off = Curriculum(_config().env, 10, torch.device("cpu"), gen)
    assert off.restore(state, gen) == [] and (off.level == off.levels - 1).all()


def test_curriculum_off_keeps_every_world_at_the_top_level():
    cfg = _config()
    gen = torch.Generator()
    gen.manual_seed(0)
    cur = Curriculum(cfg.env, 8, torch.device("cpu"), gen)
    cur.update(torch.ones(8, dtype=torch.bool), torch.zeros(8, dtype=torch.bool))
    assert cur.level.tolist() == [cfg.env.worlds.curriculum.levels - 1] * 8


def test_env_draws_the_next_world_at_the_moved_level():
    """In NavEnv a world that fails drops a level and its next world comes from that level's pool;
    TensorBoard gets the level statistics."""
    cfg = _config(
        "env.worlds.families={rooms: 1.0, corridors: 1.0}",
        "env.worlds.curriculum.enabled=true",
        "env.worlds.curriculum.start_level=3",
        "env.worlds.pool_size=4",
        "env.worlds.refresh_size=2",
        "env.episode_length_s=0.3",
        "env.init_at_random_ep_len=false",
    )
    env = NavEnv(cfg, num_envs=6, device="cpu", seed=3)
    assert env.rooms.level.tolist() == [3] * 6
    logs = {}
    for _ in range(3):  # 3 steps of 0.1 s: every world times out (a failure)
        _, _, dones, extras = env.step(torch.zeros(6, 3))
        logs.update(extras.get("log", {}))
    assert bool(dones.all())
    assert env.curriculum.level.tolist() == [2] * 6
    assert env.rooms.level.tolist() == [2] * 6
    fams = env.rooms.family.tolist()
    assert fams == env.curriculum.family.tolist()
    assert "Curriculum/share_level_2" in logs and float(logs["Curriculum/share_level_2"]) == 1.0


def test_a_checkpoint_carries_the_curriculum_levels_into_the_resumed_run(tmp_path):
    """NavRunner.save keeps the level counts per family; NavRunner.load in a run with another number
    of worlds draws each world's level from them (before, every resume started again at level 0)."""
    from navtrain.ppo_config import runner_cfg
    from navtrain.runner import NavRunner

    overrides = (
        "env.worlds.families={rooms: 1.0, corridors: 1.0}",
        "env.worlds.curriculum.enabled=true",
        "env.worlds.pool_size=4",
        "env.worlds.refresh_size=2",
    )
    cfg = _config(*overrides)
    env = NavEnv(cfg, num_envs=8, device="cpu", seed=3)
    runner = NavRunner(env, runner_cfg(cfg, env.obs_manager.obs_groups()), cfg, log_dir=None)
    rooms = env.curriculum.slot == 0
    env.curriculum.level[rooms] = 4
    env.curriculum.level[~rooms] = 2
    runner.save(str(tmp_path / "model_7.pt"))
    assert load_checkpoint(tmp_path / "model_7.pt")["infos"]["curriculum"] == env.curriculum.state()

    fresh_cfg = _config(*overrides)
    fresh = NavEnv(fresh_cfg, num_envs=12, device="cpu", seed=4)
    assert (fresh.curriculum.level == 0).all()
    resumed = NavRunner(fresh, runner_cfg(fresh_cfg, fresh.obs_manager.obs_groups()), fresh_cfg, log_dir=None)
    resumed.load(str(tmp_path / "model_7.pt"))
    assert resumed.restored_curriculum == ["rooms", "corridors"]
    rooms = fresh.curriculum.slot == 0
    assert (fresh.curriculum.level[rooms] == 4).all() and (fresh.curriculum.level[~rooms] == 2).all()


# ------------------------------------------------------------------------------------------------
# Path following in training uses the robot's rule


def _corridor_follower() -> tuple[NavConfig, NavEnv]:
    """Four corridor worlds, every episode following its planned path."""
    cfg = _config(
        "env.worlds.families={corridors: 1.0}",
        "env.worlds.path_following=1.0",
        "env.worlds.pool_size=4",
        "env.worlds.refresh_size=2",
    )
    return cfg, NavEnv(cfg, num_envs=4, device="cpu", seed=1)


def test_policy_goal_is_the_robot_sub_goal_rule():
    cfg, env = _corridor_follower()
    rule = LookaheadRule(cfg.env.worlds.lookahead, cfg.env.worlds.search_window)
    progress = np.zeros(4, dtype=np.float32)
    for t in range(15):
        if t:
            _, _, dones, _ = env.step(torch.tensor([[0.6, 0.0, 0.0]] * 4))
            progress[dones.numpy().astype(bool)] = 0.0  # a new episode starts at the path's start
        path = env.rooms.path.numpy()
        count = env.rooms.path_count.numpy()
        pose = env.observed_pose.numpy()
        scan = env.scan.numpy()
        seen = None if env.scan_seen is None else env.scan_seen.numpy()
        for i in range(4):  # the robot's side: numpy, one world at a time, with its own progress
            sub, prog, _ = follow_path(
                path[i : i + 1], count[i : i + 1], pose[i : i + 1, :2], progress[i : i + 1], rule
            )
            progress[i] = prog[0]
            # and, behind the guard, turned toward the open path as the node's gate does
            sub = open_subgoal(
                path[i : i + 1],
                count[i : i + 1],
                pose[i : i + 1],
                prog,
                sub,
                rule,
                scan[i : i + 1],
                None if seen is None else seen[i : i + 1],
                env.stages.guard,
                env.dims.v_max,
                env.dims.max_range,
            )
            assert np.allclose(sub[0], env.policy_goal[i].numpy(), atol=1e-5)
    assert bool(env.follow.all())
    # the goal observation is the sub-goal: it differs from the final goal in corridors
    assert not torch.allclose(env.policy_goal, env.rooms.goal)


def test_a_path_follower_is_rewarded_for_facing_the_sub_goal_it_was_given():
    """face_goal: the cosine of the bearing from the robot after the step to the sub-goal the policy
    observed for it (turned toward the open path where the guard cuts the line short), times its
    forward speed over v max."""
    cfg, env = _corridor_follower()
    weight = cfg.rewards.face_goal.weight
    for _ in range(10):
        given = env.policy_goal.clone()
        _, _, dones, _ = env.step(torch.tensor([[0.8, 0.0, 0.3]] * 4))
        pose, v = env.pose(), env.body_twist()[:, 0]
        dx, dy = given[:, 0] - pose[:, 0], given[:, 1] - pose[:, 1]
        cos = (torch.cos(pose[:, 2]) * dx + torch.sin(pose[:, 2]) * dy) / torch.hypot(dx, dy).clamp(min=1e-9)
        expected = weight * cos * (v.abs() / env.dims.v_max).clamp(0.0, 1.0)
        ended = dones.bool()  # their pose is the next episode's
        got = env.reward_manager.last_values["face_goal"]
        assert torch.allclose(got[~ended], expected[~ended], atol=1e-5)


# ------------------------------------------------------------------------------------------------
# Defaults: today's rooms


def test_default_config_is_todays_rooms():
    cfg = load_config()
    assert not planned(cfg.env.worlds)
    sizes = slot_sizes(cfg.env)
    assert sizes.num_slots == cfg.env.room.num_cylinder_slots + cfg.env.room.num_box_slots
    assert set(sizes.roles) == {"room_cylinder", "room_box"}
    assert extent_half(cfg.env) == cfg.env.room.size / 2
    xml = build_mjcf(cfg.env)
    assert 'name="obs_box7"' in xml and 'name="obs_box8"' not in xml and 'name="obs_cyl8"' not in xml


def test_unknown_family_is_refused_by_name():
    from navsim.config import ConfigError

    with pytest.raises(ConfigError, match="unknown family 'caves'"):
        load_config(overrides=["env.worlds.families={caves: 1.0}"])
    with pytest.raises(ConfigError, match="at least one family"):
        load_config(overrides=["env.worlds.families={rooms: 0.0}"])
    with pytest.raises(ConfigError, match=r"env.worlds.certify must be one of guard \| radius, got 'shell'"):
        load_config(overrides=["env.worlds.certify=shell"])


def test_the_certified_clearance_is_the_guards_passing_clearance():
    """Worlds are certified at the clearance the guard lets the robot pass at (its rule on the
    policy's beams), or at the radius alone when asked; a wider robot or margin certifies wider."""
    from navcontract.guard import GuardRule

    cfg = load_config()
    g = cfg.env.guard
    rule = GuardRule(radius=cfg.env.robot.radius, margin=g.margin, headway=g.headway, decel=g.decel, slide=g.slide)
    assert certified_clearance(cfg.env) == pytest.approx(rule.passing_clearance(cfg.env.lidar.num_beams))
    assert certified_clearance(load_config(overrides=["env.worlds.certify=radius"]).env) == cfg.env.robot.radius
    jackal = load_config(overrides=["env.robot.base=jackal", "env.guard.margin=0.03"]).env
    assert certified_clearance(jackal) == pytest.approx((0.333 + 0.03) / (1 - math.sin(math.pi / 72)))


def test_tensorboard_gets_success_and_collision_per_family():
    cfg = _config(
        "env.worlds.families={rooms: 1.0, corridors: 1.0}",
        "env.worlds.pool_size=4",
        "env.worlds.refresh_size=2",
        "env.episode_length_s=0.2",
        "env.init_at_random_ep_len=false",
    )
    env = NavEnv(cfg, num_envs=8, device="cpu", seed=2)
    env.step(torch.zeros(8, 3))
    _, _, dones, extras = env.step(torch.zeros(8, 3))  # every world times out now
    assert bool(dones.all())
    log = extras["log"]
    fams = env.curriculum.family
    for name in ("rooms", "corridors"):
        n = int((fams == FAMILY_INDEX[name]).sum())
        if n:
            assert log[f"Family/{name}/success"].shape == (n,)
            assert float(log[f"Family/{name}/collision"].sum()) == 0.0
    assert "Family/clutter/success" not in log


def test_c_mujoco_world_builds_planned_families():
    """The ROS sim node's C MuJoCo world takes a families config: the seed picks a planned world,
    the robot starts clear of it and the C lidar sees the same surfaces as the planner's geometry."""
    from navsim.sim_world import SimWorld

    cfg = _config("env.worlds.families={clutter: 1.0, corridors: 1.0}")
    world = SimWorld(cfg, noise_std=0.0)
    assert world.half == extent_half(cfg.env)
    kinds = set()
    for seed in range(6):
        room = world.make_room(seed)
        world.reset(room)
        scan = world.scan(noise=False)
        assert np.isfinite(scan).all() and scan.min() > cfg.env.robot.radius
        # 360 degrees of sector minima: their minimum is the distance to the nearest surface
        batch = world.geometry
        t = torch.as_tensor
        rb = RoomBatch(
            t(room.slot_pos[None], dtype=torch.float32),
            t(room.slot_yaw[None], dtype=torch.float32),
            t(room.slot_active[None]),
            t(room.start[None], dtype=torch.float32),
            t(room.goal[None], dtype=torch.float32),
        )
        nearest = float(batch.clearance(rb, t(room.start[None, None, :2], dtype=torch.float32)))
        assert scan.min() == pytest.approx(nearest, abs=2e-3)
        kinds.add(int(np.count_nonzero(room.slot_active)))
    assert len(kinds) > 1
