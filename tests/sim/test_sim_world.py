"""The one-room C MuJoCo world (navsim.sim_world, used by the sim node, the benchmark's reference
and the lidar tests) against the training env (MuJoCo Warp): same rooms, same scans, same response
to commands, same episode judgement and outcome names. No ROS needed here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from navcontract.scan import BeamLayout
from navsim.config_load import load_config
from navsim.families.rooms import RoomBatch
from navsim.outcomes import OUTCOMES, Outcome
from navsim.robot import body_to_world
from navsim.sim_world import Room, SimWorld
from support.simenv import EXACT_EPISODES, NO_GUARD, NO_RANDOMIZATION

SEEDS = [0, 1, 2, 3]


@pytest.fixture(scope="module")
def cfg():
    return load_config(overrides=list(EXACT_EPISODES))


@pytest.fixture(scope="module")
def world(cfg) -> SimWorld:
    return SimWorld(cfg)


def _batch(rooms) -> RoomBatch:
    def t(name, dtype=torch.float32):
        return torch.tensor(np.stack([getattr(r, name) for r in rooms]), dtype=dtype)

    return RoomBatch(t("slot_pos"), t("slot_yaw"), t("slot_active", torch.bool), t("start"), t("goal"))


@pytest.fixture(scope="module")
def env_and_rooms(make_env, world):
    rooms = [world.make_room(s) for s in SEEDS]
    env = make_env(len(SEEDS), *EXACT_EPISODES, NO_RANDOMIZATION)
    return env, rooms


def test_seed_selects_a_fixed_valid_room(world: SimWorld) -> None:
    a, b, c = world.make_room(5), world.make_room(5), world.make_room(6)
    assert np.array_equal(a.slot_pos, b.slot_pos) and np.array_equal(a.goal, b.goal)
    assert not np.array_equal(a.goal, c.goal)
    lo, hi = world.env_cfg.room.goal_distance
    assert lo - 1e-6 <= np.linalg.norm(a.goal - a.start[:2]) <= hi + 1e-6
    world.reset(a)
    assert world.pose() == pytest.approx(a.start)
    ids = world.slot_ids
    placed = world.data.geom_xpos[ids[a.slot_active]][:, :2]
    assert np.allclose(placed, a.slot_pos[a.slot_active])
    assert np.all(world.data.geom_xpos[ids[~a.slot_active]][:, 2] < -50)
    for k in np.flatnonzero(a.slot_active):  # boxes keep their yaw (geom_sameframe cleared)
        c, s = math.cos(a.slot_yaw[k]), math.sin(a.slot_yaw[k])
        assert np.allclose(world.data.geom_xmat[ids[k]].reshape(3, 3)[:2, :2], [[c, -s], [s, c]], atol=1e-9)
    assert np.any(np.abs(a.slot_yaw[a.slot_active]) > 0.1)


def test_scan_matches_the_training_lidar(env_and_rooms, world: SimWorld) -> None:
    env, rooms = env_and_rooms
    env.reset(_batch(rooms))
    warp_scan = env.scan.cpu().numpy()
    for i, room in enumerate(rooms):
        world.reset(room)
        ours = world.scan(noise=False)
        assert ours.shape == (world.num_beams,)
        assert np.abs(ours - warp_scan[i]).max() < 2e-3, f"room {room.seed}"


def test_scan_follows_the_training_rule_with_a_field_of_view(make_env) -> None:
    """The sim node publishes what training sees with a 270-degree lidar too: same sub-rays, same
    unseen sectors, filled by the same (runtime's) rule."""
    over = [*EXACT_EPISODES, "env.lidar.fov_deg=270", NO_RANDOMIZATION]
    fov_world = SimWorld(load_config(overrides=over))
    rooms = [fov_world.make_room(s) for s in SEEDS]
    env = make_env(len(SEEDS), *over)
    env.reset(_batch(rooms))
    assert np.array_equal(fov_world.lidar.rays.seen, env.lidar.rays.seen) and not env.lidar.rays.seen.all()
    assert fov_world.lidar.rays.rays_per_beam == env.lidar.rays.rays_per_beam == env.env_cfg.lidar.rays_per_beam
    for i, room in enumerate(rooms):
        fov_world.reset(room)
        assert np.abs(fov_world.scan(noise=False) - env.scan[i].numpy()).max() < 2e-3, f"room {room.seed}"


def test_commands_move_the_robot_as_in_training(env_and_rooms, world: SimWorld) -> None:
    """Identical body-frame commands (incl. turning, so the body->world rotation matters) give
    identical trajectories in both simulators while nothing is hit."""
    env, rooms = env_and_rooms
    env.reset(_batch(rooms))
    scaling = env.scaling
    raw = torch.tensor([[0.3, 0.2, 0.5]]).expand(len(rooms), 3)
    cmd = np.array([0.3 * scaling.v_max, 0.2 * scaling.v_max, 0.5 * scaling.omega_max])
    steps = 5
    for _ in range(steps):
        env.step(raw)
    warp_pose = env.pose().cpu().numpy()
    warp_twist = env.body_twist().cpu().numpy()
    for i, room in enumerate(rooms):
        if env.last_info.collision[i]:
            continue
        world.reset(room)
        for _ in range(steps):
            world.step(cmd)
        assert world.pose() == pytest.approx(warp_pose[i], abs=2e-3), f"room {room.seed}"
        assert world.body_twist() == pytest.approx(warp_twist[i], abs=2e-2)
        assert math.hypot(*(world.pose()[:2] - room.start[:2])) > 0.2


def test_episode_outcomes(world: SimWorld) -> None:
    room = world.make_room(0)
    world.reset(room)
    # drive straight at the nearest obstacle surface: a collision (and it beats everything else)
    active = np.flatnonzero(room.slot_active)
    target = room.slot_pos[active[np.argmin(np.linalg.norm(room.slot_pos[active] - room.start[:2], axis=1))]]
    for _ in range(200):
        p = world.pose()
        d = target - p[:2]
        c, s = math.cos(p[2]), math.sin(p[2])
        world.step(np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1], 0.0]) * 1.5 / max(np.linalg.norm(d), 1e-6))
        if world.outcome() is not None:
            break
    assert world.outcome() == Outcome.COLLISION == "collision"
    world.reset(room)
    assert world.outcome() is None
    world.data.qpos[:2] = room.goal + np.array([0.1, 0.0])
    world.step(np.zeros(3))
    assert world.outcome() == Outcome.SUCCESS == "success"
    world.reset(room)
    for _ in range(world.max_steps):
        world.step(np.zeros(3))
    assert world.outcome() == Outcome.TIMEOUT
    world.reset(room, pose=np.array([world.half + 0.5, 0.0, 0.0]))  # outside the room
    world.step(np.zeros(3))
    assert world.outcome() == Outcome.OUT_OF_BOUNDS


def test_one_outcome_vocabulary() -> None:
    """The env's termination reasons, its StepInfo flags and the C world's outcomes are one set."""
    from dataclasses import fields

    from navsim.env import StepInfo

    assert {str(o) for o in OUTCOMES} == {"success", "collision", "timeout", "out_of_bounds"}
    assert {f.name for f in fields(StepInfo)} - {"pose"} == {str(o) for o in OUTCOMES}
    assert OUTCOMES[0] == Outcome.COLLISION  # collision beats everything


def test_scan_uses_the_robot_side_beam_layout(world: SimWorld) -> None:
    assert world.beams == BeamLayout(world.num_beams)
    assert world.beams.angle_min == pytest.approx(-math.pi)
    assert world.beams.angle_max == pytest.approx(math.pi - 2 * math.pi / world.num_beams)


def test_body_to_world_rotates_the_planar_command() -> None:
    cmd = np.array([[1.0, 0.5, 0.3], [1.0, 0.5, 0.3]])
    out = body_to_world(cmd, np.array([0.0, math.pi / 2]))
    assert out[0] == pytest.approx([1.0, 0.5, 0.3])
    assert out[1] == pytest.approx([-0.5, 1.0, 0.3])


def test_room_from_a_training_batch_round_trips(env_and_rooms) -> None:
    env, rooms = env_and_rooms
    env.reset(_batch(rooms))
    for i, room in enumerate(rooms):
        again = Room.from_batch(env.rooms, i, seed=room.seed)
        assert np.allclose(again.slot_pos, room.slot_pos, atol=1e-6) and np.allclose(again.goal, room.goal, atol=1e-6)
        assert np.array_equal(again.slot_active, room.slot_active)


def test_policy_episodes_end_alike_in_both_simulators(make_env, cfg, fixture_bundle) -> None:
    """The trained bundle, noise off, six rooms: the sim node's world (scans -> deploy runtime ->
    command) and the training env (policy observations -> same ONNX actions) end every episode
    the same way on the same step."""
    from navdeploy.runtime import PolicyRuntime, ScanInput

    rt = PolicyRuntime.load(fixture_bundle)
    seeds = list(range(101, 107))
    limit = 60
    world = SimWorld(cfg)
    rooms = [world.make_room(s) for s in seeds]
    # NO_GUARD: the fixture bundle has no guard section, and rt.step is the raw policy command
    env = make_env(len(seeds), *EXACT_EPISODES, NO_RANDOMIZATION, NO_GUARD)
    env.reset(_batch(rooms))
    warp: list[tuple[str, int] | None] = [None] * len(seeds)
    for t in range(1, limit + 1):
        env.step(torch.as_tensor(rt.act(env.get_observations()["policy"].cpu().numpy())))
        info = env.last_info
        for i in range(len(seeds)):
            if warp[i] is None:
                for o in OUTCOMES:
                    if bool(getattr(info, str(o))[i]):
                        warp[i] = (o, t)
                        break
        if all(warp):
            break
    ours: list[tuple[str, int] | None] = []
    for room in rooms:
        world.reset(room)
        rt.reset()
        while world.outcome() is None and world.steps < limit:
            scan = ScanInput.training_beams(world.scan(noise=False), world.num_beams, world.max_range)
            world.step(rt.step(scan, pose=world.pose(), twist=world.body_twist(), goal=room.goal))
        ours.append((world.outcome(), world.steps) if world.outcome() else None)
    assert ours == warp
    assert {o for o, _ in filter(None, ours)} >= {Outcome.SUCCESS}
