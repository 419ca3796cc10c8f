"""The safety suite (navtrain.safety_suite): its rows give the thin-post worlds and lidars they name,
"passable" follows the clearance asked for, a row runs behind the node's gate with the lidar's field
of view, and the command line refuses what the suite cannot run in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from navcontract.guard import GUARD_REVISION, GuardRule, apply_guard
from navdeploy.node_params import NodeParams
from navsim.env import NavEnv
from navtrain.episode_replay import replay
from navtrain.evaluate_cli import main, safety_episode_s
from navtrain.evaluation import NodeActor, bundle_evaluator, with_overrides, with_scan_map
from navtrain.safety_suite import (
    EPISODE_S,
    LIDAR_ERROR_STEP,
    POST_RADIUS,
    ROWS,
    WORLDS,
    lidar_error,
    passable,
    passable_for_lidar,
    row_overrides,
    run_suite,
    write_outputs,
)
from support.lidar_terms import LidarTerms
from support.simenv import nav_config


def test_the_cli_runs_the_suites_own_episode_length_unless_the_command_sets_one() -> None:
    assert EPISODE_S >= 2 * nav_config().env.episode_length_s  # long enough that slow is not stuck
    assert safety_episode_s(SimpleNamespace(overrides=["env.lidar.fov_deg=270.0"])) == EPISODE_S
    assert safety_episode_s(SimpleNamespace(overrides=["env.episode_length_s=2.0"])) is None
    cfg = with_overrides(nav_config(), row_overrides(ROWS[0], EPISODE_S))
    assert cfg.env.episode_length_s == EPISODE_S and cfg.env.lidar.fov_deg == 360.0
    assert with_overrides(nav_config(), row_overrides(ROWS[0], None)).env.episode_length_s == 30.0


def test_rows_are_thin_post_clutter_with_the_lidar_they_name_and_randomisation_as_trained() -> None:
    base = nav_config()
    fovs = {}
    for row in ROWS:
        cfg = with_overrides(base, [*WORLDS, *row.overrides])
        c = cfg.env.worlds.clutter
        assert cfg.env.worlds.families == {"clutter": 1.0} and cfg.env.worlds.path_following == 0.0
        assert tuple(c.post_radius) == (POST_RADIUS, POST_RADIUS) and c.piece_share == 0.0
        assert not cfg.env.worlds.curriculum.enabled  # the family's top level
        assert cfg.randomization == base.randomization  # what the robot meets: as trained
        fovs[row.name] = cfg.env.lidar.fov_deg
    assert fovs == {"posts": 360.0, "posts270": 270.0}


def _post_worlds(n: int = 6):
    """The suite's worlds, ``n`` of them, and the env that drew them."""
    cfg = with_overrides(nav_config(), list(WORLDS))
    env = NavEnv(cfg, num_envs=n, device="cpu", world_pool=False)
    gen = torch.Generator()
    gen.manual_seed(3)
    return cfg, env, env.new_rooms(env.num_envs, gen)


def test_passable_follows_the_clearance_asked_for() -> None:
    cfg, env, rooms = _post_worlds()
    assert passable(env, rooms, env.radius).all()  # drawn worlds are certified for the robot's radius
    half_width = cfg.env.worlds.clutter.width / 2
    assert not passable(env, rooms, half_width).any()  # nothing that wide fits in the arena
    wide = passable(env, rooms, 0.3)
    assert wide.dtype == np.bool_ and wide.shape == (6,)


def _env_with(terms: LidarTerms, n: int, noise_std: float = 0.01) -> SimpleNamespace:
    lidar = SimpleNamespace(noise_std=noise_std)
    return SimpleNamespace(randomization=terms, num_envs=n, env_cfg=SimpleNamespace(lidar=lidar))


def test_lidar_error_is_the_calibrations_short_reading_at_the_passing_distance_plus_one_noise_std() -> None:
    c = 0.25
    # World 0 reads 2 % + 1 cm short; world 1 reads long (no allowance for it); world 2 is exact.
    bias = {"scale": [0.98, 1.02, 1.0], "offset": [-0.01, 0.0, 0.0]}
    noise = {"std": [0.0, 0.02, 0.03]}
    err = lidar_error(_env_with(LidarTerms(lidar_bias=bias, lidar_noise=noise), 3), c)
    assert err == pytest.approx([0.02 * c + 0.01, 0.02, 0.03])
    # Without the noise term, the lidar's base noise; without the bias term, no short reading.
    assert lidar_error(_env_with(LidarTerms(lidar_bias=bias), 3, noise_std=0.01), c) == pytest.approx(
        [0.02 * c + 0.01 + 0.01, 0.01, 0.01]
    )
    assert lidar_error(_env_with(LidarTerms(), 2, noise_std=0.0), c) == pytest.approx([0.0, 0.0])


def test_a_world_passable_for_its_lidar_keeps_the_clearance_plus_its_lidar_error() -> None:
    cfg, env, rooms = _post_worlds()
    c = float(env.radius)
    exact = passable(env, rooms, c)
    assert np.array_equal(passable_for_lidar(env, rooms, c, np.zeros(6)), exact)
    wider = passable(env, rooms, c + 2 * LIDAR_ERROR_STEP)
    # An error between two steps counts as the step above it; each world is judged at its own error.
    mixed = np.array([0.0, 1.2 * LIDAR_ERROR_STEP] * 3)
    expect = np.where(mixed > 0, wider, exact)
    assert np.array_equal(passable_for_lidar(env, rooms, c, mixed), expect)
    half_width = cfg.env.worlds.clutter.width / 2
    assert not passable_for_lidar(env, rooms, c, np.full(6, half_width)).any()


def test_a_row_runs_behind_the_nodes_gate_with_the_lidars_field_of_view(fixture_bundle: Path, tmp_path: Path) -> None:
    evaluator = bundle_evaluator(fixture_bundle, "dwa", ["env.episode_length_s=0.5"], node=NodeParams(), map_beams=720)
    actors: list[NodeActor] = []
    make = evaluator.make_act

    def keep(env: NavEnv) -> NodeActor:
        actor = make(env)
        actors.append(actor)
        return actor

    evaluator.make_act = keep
    payload = run_suite(evaluator, episodes=2, seed=11, num_envs=2)
    assert [r["name"] for r in payload["rows"]] == ["posts", "posts270"]
    assert actors[0].fov_beams is None  # 360 degrees: every beam
    fov = actors[1].fov_beams
    assert fov is not None and len(fov) == 541  # 270 of 360 degrees of 720 beams, both edges
    assert math.isclose(actors[1].fov_angle_min, -0.75 * math.pi)
    for row in payload["rows"]:
        assert row["episodes"] == 2 and 0 <= row["passable"] <= row["passable_nominal"] <= 2
        assert len(row["episode_lidar_error_m"]) == 2 and min(row["episode_lidar_error_m"]) > 0  # noise at least
        assert row["stuck_in_passable"] <= row["stuck_in_passable_nominal"]
        assert row["collisions"] + round(row["success_rate"] * 2) + round(row["timeout_rate"] * 2) == 2
        # The fixture bundle has no guard section: the node's default guard, whose passing clearance is
        # (0.2 + 0.01) / (1 - sin(2.5 deg)) on 72 beams.
        assert row["passable_clearance_m"] == pytest.approx(0.21 / (1 - math.sin(math.radians(2.5))))
        assert sum(row["gate_states"].values()) > 0
        assert row["stalled_in_passable"] + row["slow_in_passable"] == row["stuck_in_passable"]
        stuck = row["stuck_worlds"]  # 0.5 s episodes: every passable world times out, and is named
        assert len(stuck) == row["stuck_in_passable"] == row["passable"] - round(row["success_rate"] * 2)
        assert all(0 <= w["episode"] < 2 and w["stalled"] == (w["idle_s"] >= 10.0) for w in stuck)
        assert all(w["lidar_error_m"] == row["episode_lidar_error_m"][w["episode"]] for w in stuck)
        assert len(row["collision_worlds"]) == row["collisions"]
    json_path, md_path, png_path = write_outputs(payload, tmp_path / "safety")
    assert json.loads(json_path.read_text())["suite"] == "safety"
    assert "| posts270 |" in md_path.read_text() and png_path.stat().st_size > 5000


@pytest.mark.parametrize(
    "args, match",
    [
        (["--suite", "safety"], "--suite safety drives a bundle behind the node's gate"),
        (["--suite", "safety", "--node", "--rows", "posts,walls"], "unknown row(s) walls"),
        (["--suite", "robustness", "--batch-log", "b.json"], "--batch-log goes with --suite safety"),
        (
            ["--suite", "safety", "--node", "--rows", "posts", "--replay", "1", "--batch-log", "b.json"],
            "not with --replay",
        ),
    ],
)
def test_safety_arguments_are_refused_in_one_line(args, match, capsys, fixture_bundle: Path, tmp_path: Path) -> None:
    assert main(["--bundle", str(fixture_bundle), *args, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


def test_an_episode_replays_by_itself_as_it_ran_in_its_row(fixture_bundle: Path, tmp_path: Path) -> None:
    """Each batch of a row has its own seeds: the second batch's second world, run again alone, ends
    as it did in the row, and its gate's trace has one entry per control tick it was driven."""
    evaluator = bundle_evaluator(fixture_bundle, "dwa", ["env.episode_length_s=2.0"], node=NodeParams(), map_beams=720)
    row = ROWS[1]
    payload = run_suite(evaluator, episodes=4, seed=11, num_envs=2, rows=[row.name])
    ran = payload["rows"][0]
    assert ran["num_envs"] == 2 and len(ran["episode_outcomes"]) == len(ran["episode_time_s"]) == 4
    assert ran["episode_s"] == 2.0  # the evaluator's own length: run_suite was given none
    again = replay(evaluator, row.name, row_overrides(row, None), 3, 11, 2)
    assert again["outcome"] == ran["episode_outcomes"][3] and again["time_s"] == pytest.approx(ran["episode_time_s"][3])
    assert again["path_m"] == pytest.approx(ran["episode_path_m"][3], abs=1e-3) and again["path_m"] > 0.5
    assert len(again["ticks"]) == round(again["time_s"] / evaluator.cfg.env.control_period)
    assert {"t", "state", "reason", "pose", "cmd", "subgoal", "guard_scale"} <= set(again["ticks"][0])
    # what the guard judged, judged again offline: the same scale on every tick that drove
    rule, max_range = GuardRule.from_dict(again["guard"]), again["max_range"]
    judged = [t for t in again["ticks"] if "checked" in t and t["guard_scale"] is not None]
    assert len(judged) > 5 and all(len(t["ranges"]) == 72 for t in judged)
    for t in judged:
        seen = np.ones(72, dtype=bool)
        seen[t["unseen"]] = False
        _, scale = apply_guard(
            np.array(t["ranges"]), np.array(t["checked"]), rule, max_range, seen, motion=np.array(t["twist"])
        )
        assert float(scale) == pytest.approx(t["guard_scale"], abs=2e-3), t["t"]
    # the scan map's part: its path id, clearance and memories every tick; the path and why it came on
    # the ticks it changed (the first tick's plan is the goal's first)
    assert all({"path_id", "path_radius", "memories", "forgotten"} <= set(t) for t in again["ticks"])
    changed = [t for t in again["ticks"] if "path" in t]
    assert changed and changed[0]["switch"] == "no path in use" and len(changed[0]["path"]) >= 2
    ids = [t["path_id"] for t in again["ticks"]]
    assert len(changed) == 1 + sum(a != b for a, b in zip(ids, ids[1:], strict=False))
    assert {"half", "cylinders", "path", "goal"} <= set(again["world"]) and len(again["world"]["cylinders"]) > 10
    code = main(
        ["--suite", "safety", "--bundle", str(fixture_bundle), "--node", "--controller", "dwa", "--rows", row.name]
        + ["--replay", "3", "--num-envs", "2", "--seed", "11", "--out", str(tmp_path / "replay"), "--map-beams", "720"]
        + ["env.episode_length_s=2.0"]
    )
    assert code == 0
    assert json.loads((tmp_path / "replay.json").read_text())["outcome"] == again["outcome"]
    from PIL import Image

    with Image.open(tmp_path / "replay.png") as image:  # the world with the robot's track on it
        assert image.width > 300 and image.height > 150


def test_a_run_stopped_part_way_goes_on_from_its_next_batch(
    fixture_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Batches kept in the log are taken from it; a batch missing there runs again, and ends as it did
    (each batch has seeds of its own); a log of another bundle (key) is not used. After each batch the
    row's counts so far are printed."""
    from navtrain import safety_suite

    evaluator = bundle_evaluator(fixture_bundle, "dwa", ["env.episode_length_s=1.0"], node=NodeParams(), map_beams=720)
    log = tmp_path / "batches.json"
    first = run_suite(evaluator, episodes=4, seed=11, num_envs=2, rows=["posts270"], log=log, log_key={"bundle": "a"})
    kept = json.loads(log.read_text())
    assert sorted(kept["rows"]) == ["posts270#0", "posts270#1"] and kept["key"]["bundle"] == "a"
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[safety] posts270 so far: ")]
    row = first["rows"][0]
    success = sum(o == "success" for o in row["episode_outcomes"])
    assert len(lines) == 2 and lines[0].split(": ", 1)[1].startswith("2 episodes, ")
    assert lines[1].split(": ", 1)[1].startswith(f"4 episodes, success {100.0 * success / 4:.1f} %, ")
    assert f"{row['collisions']} collisions" in lines[1] and f"of {row['passable']} passable" in lines[1]
    assert kept["key"]["guard_revision"] == GUARD_REVISION  # a changed guard rule: every batch runs again
    del kept["rows"]["posts270#1"]  # as if stopped during the second batch
    log.write_text(json.dumps(kept))
    ran: list[int] = []
    real = safety_suite.run_batch

    def counted(env, act, gen, seed, batch, row, clearance):
        ran.append(batch)
        return real(env, act, gen, seed, batch, row, clearance)

    monkeypatch.setattr(safety_suite, "run_batch", counted)
    again = run_suite(evaluator, episodes=4, seed=11, num_envs=2, rows=["posts270"], log=log, log_key={"bundle": "a"})
    assert ran == [1]
    a, b = first["rows"][0], again["rows"][0]
    for key in ("episode_outcomes", "episode_time_s", "episode_path_m", "episode_lidar_error_m", "passable"):
        assert a[key] == b[key]
    assert a["gate_states"] == b["gate_states"]
    run_suite(evaluator, episodes=4, seed=11, num_envs=2, rows=["posts270"], log=log, log_key={"bundle": "b"})
    assert ran == [1, 0, 1]  # another bundle: every batch runs, and the log is now that bundle's
    assert json.loads(log.read_text())["key"]["bundle"] == "b"


def test_with_scan_map_changes_the_map_of_every_gate_the_evaluator_builds(fixture_bundle: Path) -> None:
    evaluator = bundle_evaluator(fixture_bundle, "dwa", ["env.episode_length_s=0.5"], node=NodeParams(), map_beams=720)
    changed = with_scan_map(evaluator, return_filter=4)
    cfg = with_overrides(evaluator.cfg, [*WORLDS, *ROWS[0].overrides])
    env = NavEnv(cfg, num_envs=2, device="cpu")
    act = changed.make_act(env)
    act.reset()
    assert {g.scan_planner.map.cfg.return_filter for g in act.gates} == {4}
    plain = evaluator.make_act(env)
    plain.reset()
    assert {g.scan_planner.map.cfg.return_filter for g in plain.gates} == {1}
    with pytest.raises(ValueError, match="scan map"):
        with_scan_map(bundle_evaluator(fixture_bundle, "dwa"), return_filter=4).make_act(env)
