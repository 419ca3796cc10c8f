"""Robot-side controllers in the batched simulator: the exported policy through its runtime drives
exactly as the checkpoint's torch actor does, the DWA baseline runs from the same contract, and
the side-by-side comparison writes its table."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from navsim.outcomes import OUTCOMES
from navtrain.checkpoint import build_actor, config_from_checkpoint, load_checkpoint
from navtrain.evaluation import (
    RobotSideActor,
    eval_env,
    evaluate_controller,
    run_episodes,
    torch_actor,
)

pytestmark = pytest.mark.slow

DEFAULT_BUNDLE = Path(__file__).resolve().parents[2] / "ros2_ws/src/nav_policy/nav_policy/default_bundle"


def test_bundle_runtime_drives_the_same_episodes_as_the_checkpoint(trained_checkpoint: Path, exported_bundle: Path):
    from navdeploy.runtime import PolicyRuntime

    ckpt = load_checkpoint(trained_checkpoint)
    cfg = config_from_checkpoint(ckpt)
    cfg.env.lidar.noise_std = 0.0  # both runs see the same scans (the noise stream would move on)
    cfg.randomization.enabled = False  # and the same base (its draws would move on too)
    cfg.env.episode_length_s = 8.0  # 80 steps per episode are plenty to compare decisions
    env, seed = eval_env(cfg, 24, None, None, "cpu")
    gen = torch.Generator().manual_seed(seed)
    rooms = env.new_rooms(env.num_envs, gen)
    torch_res, _ = run_episodes(env, torch_actor(build_actor(ckpt, cfg, env.device)), rooms)
    robot = RobotSideActor(env, lambda: PolicyRuntime.load(exported_bundle))
    robot_res, _ = run_episodes(env, robot, rooms)
    assert robot.calls > 0 and robot.ms_per_call is not None and robot.ms_per_call > 0
    # Same rooms, noise-free scans: the ONNX runtime (float32, resampled LaserScan) takes the same
    # decisions as the torch actor, episode by episode.
    np.testing.assert_array_equal(robot_res["outcome"], torch_res["outcome"])
    # Step by step on the same states (the torch actor drives, the robot side answers from what the
    # node would receive): the same action to float32 rounding, on every step of every episode.
    # (Free-running paths are no measure of this: a grazing contact turns a 1e-7 difference into
    # centimetres after a few hundred steps.)
    actor = torch_actor(build_actor(ckpt, cfg, env.device))
    env.reset(rooms=rooms)
    robot.reset()
    obs = env.get_observations()
    live = torch.ones(env.num_envs, dtype=torch.bool)
    worst, compared = 0.0, 0
    for _ in range(env.max_episode_length):
        want, got = actor(obs, live), robot(obs, live)
        worst = max(worst, float((want - got).abs()[live].max()))
        compared += int(live.sum())
        obs, _, dones, _ = env.step(torch.where(live[:, None], want, 0.0))
        live &= ~dones.bool()
        if not live.any():
            break
    assert compared >= 24 * 10 and worst < 1e-5


def test_dwa_controller_from_the_bundle_contract(fixture_bundle: Path) -> None:
    result, trace = evaluate_controller(fixture_bundle, "dwa", episodes=12, num_envs=12, plot_rooms=2)
    assert result.episodes == 12 and result.controller.startswith("dwa")
    assert result.success_rate + result.collision_rate + result.timeout_rate + result.out_of_bounds_rate == 1.0
    assert result.success_rate >= 0.5
    assert result.compute_ms_per_step is not None and 0 < result.compute_ms_per_step < 100
    assert trace is not None and len(trace.paths) == 2
    with pytest.raises(ValueError, match="controller must be one of"):
        evaluate_controller(fixture_bundle, "mpc", episodes=2)


def test_compare_puts_both_drivers_behind_the_gate_on_the_same_worlds(fixture_bundle: Path, tmp_path: Path) -> None:
    """nav-compare: each row's worlds through the node's gate for both drivers, the paired times on
    the worlds both reach recomputed from the per-episode outcomes it writes, a verdict per row."""
    from navtrain.compare import BAR, CONTROLLERS, main
    from navtrain.evaluation import SUCCESS, TIMEOUT

    out = tmp_path / "compare"
    short = "env.episode_length_s=6.0"  # every row, after its own overrides
    argv = ["--bundle", str(fixture_bundle), "--episodes", "4", "--rows", "rooms,clutter", "--out", str(out), short]
    assert main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    assert list(data["rows"]) == ["rooms", "clutter"] and data["overrides"] == [short] and data["node_gate"]
    assert data["bar"]["max_collision"] == BAR.max_collision
    for name, row in data["rows"].items():
        assert row["overrides"][-1] == short and "env.worlds.curriculum.enabled=false" in row["overrides"]
        results, episodes = row["results"], row["episodes"]
        assert set(results) == set(episodes) == set(CONTROLLERS)
        for r in results.values():
            assert r["episodes"] == 4 and r["seed"] == results["policy"]["seed"]
            assert "behind the node's gate" in r["controller"] and sum(r["gate_states"].values()) > 0
        both = [i for i in range(4) if all(episodes[c]["outcome"][i] == SUCCESS for c in CONTROLLERS)]
        assert row["summary"]["both_reached"] == len(both)
        for c in CONTROLLERS:
            t = row["summary"]["paired"][c]["time_s"]
            if both:
                assert t == pytest.approx(float(np.mean([episodes[c]["time_s"][i] for i in both])))
            else:
                assert math.isnan(t)
        assert row["verdict"].startswith(f"{name}: the policy ")
        for c in CONTROLLERS:  # behind the gate: how each robot ended, and how often its map's path changed
            idle, changes = episodes[c]["idle_s"], episodes[c]["path_changes"]
            assert len(idle) == len(changes) == 4 and min(idle) >= 0.0 and min(changes) >= 0
            split = row["summary"]["timeouts"][c]
            timeouts = sum(o == TIMEOUT for o in episodes[c]["outcome"])
            assert split["stalled"] + split["slow"] == timeouts
        if name == "clutter":  # goal mode: the scan map gives every robot a path
            assert all(min(episodes[c]["path_changes"]) >= 1 for c in CONTROLLERS)
    md = out.with_suffix(".md").read_text()
    assert md.count("| policy |") == md.count("| dwa |") == 2 and "meet the bar" in md
    assert "stalled: a timeout whose robot came no" in md
    assert out.with_suffix(".png").stat().st_size > 1000


def test_the_evaluation_scan_map_plans_with_the_guard_clearance(fixture_bundle: Path) -> None:
    """nav-evaluate --scan-map plans as the node does (navdeploy.gate.make_planner): with the passing
    clearance of the guard that stops the robot (here the env's), wider than the robot's radius; with
    the radius alone when there is no guard."""
    from navdeploy.runtime import PolicyRuntime
    from navdeploy.scan_map import ScanMapCfg
    from navtrain.evaluate_cli import bundle_config

    beams = int(PolicyRuntime.load(fixture_bundle).contract.num_beams)
    cfg = bundle_config(fixture_bundle)
    for guarded in (True, False):
        cfg.env.guard.enabled = guarded
        env, _ = eval_env(cfg, 2, 0, 2, "cpu")
        actor = RobotSideActor(env, lambda: PolicyRuntime.load(fixture_bundle), ScanMapCfg())
        assert actor.planners is not None
        if guarded:
            want = env.guard.passing_clearance(beams)
            assert want > cfg.env.robot.radius + env.guard.margin
        else:
            assert env.guard is None
            want = None
        assert [p.clearance for p in actor.planners] == [want, want]


class _StraightAtGoal:
    """A driver that charges its goal at full speed, whatever is in the way. The scan goes through a
    policy runtime only for the scan report the node's guard reads (``last_scan_report``)."""

    def __init__(self, bundle: Path) -> None:
        from navdeploy.runtime import PolicyRuntime

        self.runtime = PolicyRuntime.load(bundle)
        self.contract = self.runtime.contract

    def configure_scan(self, options) -> None:
        self.runtime.configure_scan(options)

    @property
    def last_scan_report(self):
        return self.runtime.last_scan_report

    def reset(self) -> None:
        self.runtime.reset()

    def step(self, scan, pose, twist, goal) -> np.ndarray:
        self.runtime.step(scan, pose=pose, twist=twist, goal=goal)
        dx, dy = goal[0] - pose[0], goal[1] - pose[1]
        c, s = math.cos(pose[2]), math.sin(pose[2])
        bx, by = c * dx + s * dy, -s * dx + c * dy
        norm = max(math.hypot(bx, by), 1e-9)
        v = float(self.contract.scaling.v_max)
        return np.array([v * bx / norm, v * by / norm, 0.0])


@pytest.mark.parametrize("scan_map", [False, True])
def test_behind_the_node_gate_a_driver_charging_a_post_never_hits_it(scan_map: bool) -> None:
    """The same driver and rooms (a post between start and goal): bare, it hits the post; behind the
    node's gate (NodeActor: the guard of the installed default bundle as the last stage, the env's
    guard off) it never does, with the scan map off and on."""
    fixture_bundle = DEFAULT_BUNDLE
    from navdeploy.node_params import NodeParams
    from navsim.outcomes import OUTCOMES, Outcome
    from navtrain.evaluate_cli import bundle_config
    from navtrain.evaluation import NodeActor
    from support.simenv import empty_rooms, place_obstacle

    cfg = bundle_config(fixture_bundle)
    cfg.env.guard.enabled = False
    cfg.env.smoother.enabled = False
    cfg.randomization.enabled = False
    cfg.env.lidar.noise_std = 0.0
    cfg.env.episode_length_s = 6.0
    env, _ = eval_env(cfg, 2, 0, 2, "cpu")
    rooms = empty_rooms(env, start=(0.0, 0.0, 0.0), goal=(3.0, 0.0))
    place_obstacle(rooms, 0, 0, (1.5, 0.0))  # on the line to the goal
    place_obstacle(rooms, 1, 0, (1.5, 0.05))  # a little off it

    def make() -> _StraightAtGoal:
        return _StraightAtGoal(fixture_bundle)

    bare, _ = run_episodes(env, RobotSideActor(env, make), rooms)
    actor = NodeActor(env, make, NodeParams(scan_map=scan_map), 720)
    gated, _ = run_episodes(env, actor, rooms)
    collision = OUTCOMES.index(Outcome.COLLISION)
    assert (bare["outcome"] == collision).all(), bare["outcome"]
    assert (gated["outcome"] != collision).all(), gated["outcome"]
    assert actor.states.get("driving", 0) > 0
    idle = actor.idle_seconds()
    timeout = OUTCOMES.index(Outcome.TIMEOUT)
    for i in range(2):  # a robot held in front of the post until the end came no closer for seconds
        if gated["outcome"][i] == timeout:
            assert idle[i] >= 2.0, (i, idle[i], gated["time_s"][i])
        else:  # one that got round it was still closing in at its last tick
            assert idle[i] < 1.0, (i, idle[i])
    with pytest.raises(ValueError, match="only guard"):
        cfg.env.guard.enabled = True
        NodeActor(eval_env(cfg, 1, 0, 1, "cpu")[0], make, NodeParams(), 720)
    cfg.env.guard.enabled = False
    cfg.randomization.enabled = True  # trained acceleration limits: the env's smoother would run
    cfg.env.smoother.enabled = True
    with pytest.raises(ValueError, match="only velocity smoother"):
        NodeActor(eval_env(cfg, 1, 0, 1, "cpu")[0], make, NodeParams(), 720)


def test_an_evaluation_behind_the_node_gate_reports_its_gate_states() -> None:
    from navdeploy.node_params import NodeParams
    from navdeploy.scan_map import ScanMapCfg
    from navdeploy.states import State

    result, _ = evaluate_controller(
        DEFAULT_BUNDLE,
        "dwa",
        episodes=2,
        num_envs=2,
        seed=5,
        plot_rooms=0,
        node=NodeParams(),
        overrides=["env.episode_length_s=4.0"],
    )
    assert result.controller.endswith("behind the node's gate")  # the env's guard and smoother were off
    assert result.gate_states and set(result.gate_states) <= {s.value for s in State}
    assert sum(result.gate_states.values()) <= 2 * 40 and result.gate_states.get("driving", 0) > 0
    with pytest.raises(ValueError, match="scan map is the node's"):
        evaluate_controller(DEFAULT_BUNDLE, "dwa", episodes=2, node=NodeParams(), scan_map=ScanMapCfg())


def test_a_long_batch_reports_its_progress(
    trained_checkpoint: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import navtrain.evaluation as evaluation

    ckpt = load_checkpoint(trained_checkpoint)
    cfg = config_from_checkpoint(ckpt)
    cfg.env.episode_length_s = 1.0  # 10 ticks
    env, seed = eval_env(cfg, 4, None, None, "cpu")
    rooms = env.new_rooms(env.num_envs, torch.Generator().manual_seed(seed))
    monkeypatch.setattr(evaluation, "PROGRESS_EVERY_S", 0.0)  # a line on every tick
    res, _ = run_episodes(env, torch_actor(build_actor(ckpt, cfg, env.device)), rooms, label="four rooms")
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[evaluate] four rooms: tick ")]
    assert len(lines) == env.max_episode_length == 10
    assert lines[0] == "[evaluate] four rooms: tick 0/10, 0 of 4 worlds ended (0 success, 0 collision)"
    assert len(res["outcome"]) == 4


def counting_evaluators(
    monkeypatch: pytest.MonkeyPatch, label: Callable[[str, list[str]], str]
) -> tuple[list[str], list[str]]:
    """``navtrain.evaluation.bundle_evaluator`` patched to record ``label(driver, overrides)`` of every
    evaluator built, in ``made``, and to raise KeyboardInterrupt (a stop) at the label in ``stop[0]``."""
    from navtrain import evaluation

    made: list[str] = []
    stop = [""]
    real = evaluation.bundle_evaluator

    def counted(bundle, name, overrides, *args, **kwargs):
        made.append(label(name, overrides))
        if made[-1] == stop[0]:
            raise KeyboardInterrupt
        return real(bundle, name, overrides, *args, **kwargs)

    monkeypatch.setattr(evaluation, "bundle_evaluator", counted)
    return made, stop


def short_compare(
    bundle: Path, rows: str, log: Path | None, num_envs: int | None = None, episode_s: float = 1.0
) -> dict:
    """``nav-compare``'s run on 2 worlds per row of ``episode_s`` episodes, seed 7, keeping rows in
    ``log`` (1 s: what is kept and resumed does not depend on how the episodes end)."""
    from navtrain import compare

    overrides = [f"env.episode_length_s={episode_s}"]
    return compare.run_compare(bundle, compare.parse_rows(rows), 2, 7, num_envs=num_envs, overrides=overrides, log=log)


def test_a_comparison_stopped_part_way_goes_on_from_the_next_row(
    fixture_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a row log, a comparison stopped in its second row keeps its first: run again (here with
    the bundle copied to another folder, as in another checkout), it drives only the second row's
    worlds, and the first row comes back as it was; another bundle keeps nothing of it."""

    made, stop = counting_evaluators(
        monkeypatch, lambda name, overrides: "clutter" if any("clutter: 1" in o for o in overrides) else "rooms"
    )
    stop[0] = "clutter"
    log = tmp_path / "compare_rows.json"
    with pytest.raises(KeyboardInterrupt):
        short_compare(fixture_bundle, "rooms,clutter", log)
    assert made == ["rooms", "rooms", "clutter"]  # both drivers of the first row, then the stop
    first = json.loads(log.read_text())["rows"]["rooms"]["entry"]
    made.clear()
    stop[0] = ""
    moved = tmp_path / "elsewhere" / "bundle"
    shutil.copytree(fixture_bundle, moved)
    payload = short_compare(moved, "rooms,clutter", log)
    assert made == ["clutter", "clutter"] and list(payload["rows"]) == ["rooms", "clutter"]
    assert payload["rows"]["rooms"] == first
    contract = moved / "contract.json"  # another file there: another bundle
    contract.write_text(json.dumps(json.loads(contract.read_text()), indent=3))
    made.clear()
    short_compare(moved, "rooms", log)
    assert made == ["rooms", "rooms"]


def test_a_comparison_stopped_between_its_drivers_goes_on_with_the_second(
    fixture_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row's first driver is kept as it ends: stopped before the DWA's half, the same comparison run
    again drives only the DWA, and the row equals one run whole."""

    made, stop = counting_evaluators(monkeypatch, lambda name, overrides: name)
    stop[0] = "dwa"
    log = tmp_path / "compare_rows.json"
    with pytest.raises(KeyboardInterrupt):
        short_compare(fixture_bundle, "rooms", log)
    assert made == ["policy", "dwa"] and set(json.loads(log.read_text())["rows"]) == {"rooms#policy"}
    made.clear()
    stop[0] = ""
    resumed = short_compare(fixture_bundle, "rooms", log)
    assert made == ["dwa"]
    whole = short_compare(fixture_bundle, "rooms", None)
    assert made == ["dwa", "policy", "dwa"]
    a, b = (json.loads(json.dumps(run["rows"]["rooms"])) for run in (resumed, whole))
    for row in (a, b):  # the controllers' wall time per step is the only thing that differs
        for result in row["results"].values():
            result.pop("compute_ms_per_step")
    assert a == b


def test_a_comparison_stopped_in_a_batch_goes_on_from_that_batch(
    fixture_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch is kept as it ends: stopped in the policy's second batch of one world, the same
    comparison run again drives that batch and the DWA's two, and the row equals one run whole (each
    batch has seeds of its own); a finished half keeps no batches."""
    from navtrain import kept_batches

    ran: list[tuple[str, int]] = []
    stop = [("policy", 1)]
    real = kept_batches.run_batch

    def counted(env, act, gen, seed, batch, label):
        driver = "dwa" if label.startswith("dwa") else "policy"
        if (driver, batch) == stop[0]:
            raise KeyboardInterrupt
        ran.append((driver, batch))
        return real(env, act, gen, seed, batch, label)

    monkeypatch.setattr(kept_batches, "run_batch", counted)
    log = tmp_path / "compare_rows.json"
    with pytest.raises(KeyboardInterrupt):
        short_compare(fixture_bundle, "rooms", log, num_envs=1, episode_s=3.0)
    assert ran == [("policy", 0)] and set(json.loads(log.read_text())["rows"]) == {"rooms#policy#0"}
    from navcontract.guard import GUARD_REVISION

    assert json.loads(log.read_text())["key"]["guard_revision"] == GUARD_REVISION
    ran.clear()
    stop[0] = ("", -1)
    resumed = short_compare(fixture_bundle, "rooms", log, num_envs=1, episode_s=3.0)
    assert ran == [("policy", 1), ("dwa", 0), ("dwa", 1)]
    assert set(json.loads(log.read_text())["rows"]) == {"rooms#policy", "rooms#dwa", "rooms"}
    whole = short_compare(fixture_bundle, "rooms", None, num_envs=1, episode_s=3.0)
    a, b = (json.loads(json.dumps(run["rows"]["rooms"])) for run in (resumed, whole))
    for row in (a, b):  # the controllers' wall time per step is the only thing that differs
        for result in row["results"].values():
            result.pop("compute_ms_per_step")
    assert a == b and a["results"]["policy"]["episodes"] == 2
    assert resumed["worlds_per_batch"] == 1
    # an episode the run names runs again by itself, with its gate's trace (nav-compare --replay)
    from navtrain.compare import main

    out = tmp_path / "replay"
    argv = ["--bundle", str(fixture_bundle), "--rows", "rooms", "--driver", "dwa", "--replay", "1", "--num-envs", "1"]
    assert main([*argv, "--seed", "7", "--out", str(out), "env.episode_length_s=3.0"]) == 0
    again, ran = json.loads(out.with_suffix(".json").read_text()), a["episodes"]["dwa"]
    assert again["outcome"] == str(OUTCOMES[ran["outcome"][1]]) and again["time_s"] == pytest.approx(ran["time_s"][1])
    assert len(again["ticks"]) == round(again["time_s"] / 0.1) and out.with_suffix(".png").is_file()
    assert main([*argv[:8], "--out", str(out)]) == 2  # no --num-envs: refused in one line


def one_post_ahead() -> Any:
    """One world of the default bundle's config without randomisation, noise, guard or smoother: the
    robot at the origin facing a post at (1.5, 0.3), its goal 3 m ahead."""
    from navtrain.evaluate_cli import bundle_config
    from support.simenv import empty_rooms, place_obstacle

    cfg = bundle_config(DEFAULT_BUNDLE)
    cfg.env.guard.enabled = False
    cfg.env.smoother.enabled = False
    cfg.randomization.enabled = False
    cfg.env.lidar.noise_std = 0.0
    env, _ = eval_env(cfg, 1, 0, 1, "cpu")
    rooms = empty_rooms(env, start=(0.0, 0.0, 0.0), goal=(3.0, 0.0))
    place_obstacle(rooms, 0, 0, (1.5, 0.3))
    env.reset(rooms=rooms)
    return env


def test_the_node_s_lidar_meets_the_world_s_lidar_terms() -> None:
    """Behind the node's gate the robot's own 720-beam lidar (NodeActor) is cast from the pose the
    env's lidar is cast from, turned by the world's mounting yaw, and carries the world's lidar faults
    (the robustness suite's lidar rows reach the node): a 90-degree yaw offset turns the scan by 180
    beams, a dropout probability of 1 leaves no reading."""
    from navdeploy.node_params import NodeParams
    from navtrain.evaluation import NodeActor

    env = one_post_ahead()
    actor = NodeActor(env, lambda: _StraightAtGoal(DEFAULT_BUNDLE), NodeParams(), 720)
    plain = actor._map_scan()
    assert plain is not None and np.isfinite(plain).all()

    class Terms:
        def __init__(self, values: dict[str, dict[str, float]]) -> None:
            self.values = values

        def enabled(self, term: str) -> bool:
            return term in self.values

        def value(self, term: str, param: str) -> torch.Tensor:
            return torch.tensor([self.values[term][param]])

    env.randomization = Terms({"lidar_yaw": {"deg": 90.0}})
    turned = actor._map_scan()
    assert np.allclose(turned[0], np.roll(plain[0], -180), atol=1e-4)  # beam j now sees what beam j + 180 saw
    env.randomization = Terms({"lidar_dropout": {"prob": 1.0}})
    assert np.isnan(actor._map_scan()).all()


def test_the_node_s_lidar_sits_where_lidar_mount_puts_it() -> None:
    """``lidar_mount`` (nav-evaluate --lidar-mount): the node's lidar is cast from its pose on the body
    and reads in its own frame. Turned by 90 degrees and upside down at the centre, the node's scan
    rules (told by its lidar_* parameters) give the policy the beams of the lidar at the centre; 0.5 m
    forward, the post ahead is 0.5 m nearer to it."""
    from dataclasses import replace

    from navcontract.scan import LidarMount, ScanInput, resample_scan
    from navdeploy.node_params import NodeParams
    from navtrain.evaluation import NodeActor

    env = one_post_ahead()

    def make() -> _StraightAtGoal:
        return _StraightAtGoal(DEFAULT_BUNDLE)

    plain = NodeActor(env, make, NodeParams(), 720)._map_scan()[0]
    mount = LidarMount(0.0, 0.0, math.pi / 2, upside_down=True)
    told = NodeParams(lidar_yaw=math.pi / 2, lidar_upside_down=True)
    turned = NodeActor(env, make, told, 720, mount)
    assert turned.settings.lidar_mount == mount
    dense = turned._map_scan()[0]
    beams = resample_scan(replace(ScanInput.training_beams(dense, 720, 6.0), mount=mount), 72, 6.0)
    assert np.allclose(beams, resample_scan(ScanInput.training_beams(plain, 720, 6.0), 72, 6.0), atol=1e-4)
    assert not np.allclose(dense, plain, atol=0.1)  # its own frame: not the body's
    ahead = np.abs(-math.pi + np.arange(720) * 2 * math.pi / 720) < math.radians(30)
    forward = NodeActor(env, make, NodeParams(lidar_x=0.5), 720, LidarMount(0.5, 0.0, 0.0))._map_scan()[0]
    assert forward[ahead].min() == pytest.approx(plain[ahead].min() - 0.49, abs=0.03)


def test_rates_per_family_add_up_to_the_totals() -> None:
    from navtrain.evaluation import COLLISION, SUCCESS, TIMEOUT, family_rates

    outcome = np.array([SUCCESS, SUCCESS, COLLISION, TIMEOUT, SUCCESS, SUCCESS])
    family = np.array([0, 0, 0, 1, 1, 3])  # rooms, rooms, rooms, clutter, clutter, arenas
    rates = family_rates(outcome, family)
    assert rates is not None and list(rates) == ["rooms", "clutter", "arenas"]
    assert rates["rooms"]["episodes"] == 3 and rates["rooms"]["success_rate"] == pytest.approx(2 / 3)
    assert rates["rooms"]["collision_rate"] == pytest.approx(1 / 3) and rates["clutter"]["timeout_rate"] == 0.5
    assert rates["arenas"]["success_interval"][0] < 1.0 == rates["arenas"]["success_rate"]
    assert family_rates(outcome, np.zeros(6, dtype=int)) is None  # one family: the totals say it all


def test_an_evaluation_of_a_mix_reports_each_family() -> None:
    result, _ = evaluate_controller(
        DEFAULT_BUNDLE,
        "dwa",
        episodes=4,
        num_envs=4,
        seed=5,
        plot_rooms=0,
        overrides=["env.episode_length_s=2.0", "env.worlds.families={rooms: 0.5, arenas: 0.5}"],
    )
    fams = result.by_family
    assert fams is not None and set(fams) == {"rooms", "arenas"}
    assert sum(f["episodes"] for f in fams.values()) == 4
    total = sum(f["success_rate"] * f["episodes"] for f in fams.values()) / 4
    assert total == pytest.approx(result.success_rate)


def test_a_comparison_splits_each_driver_s_timeouts_into_stalled_and_slow() -> None:
    """A timeout is stalled when its robot came no closer to the goal for STALLED_S before the end, slow
    otherwise; the path changes are averaged over the timeouts and over the successes apart."""
    from navtrain.compare import timeout_split
    from navtrain.evaluation import COLLISION, STALLED_S, SUCCESS, TIMEOUT

    episodes = {
        "outcome": np.array([SUCCESS, TIMEOUT, TIMEOUT, TIMEOUT, COLLISION, SUCCESS]),
        "idle_s": np.array([0.0, STALLED_S, STALLED_S - 0.1, 30.0, 12.0, 0.2]),
        "path_changes": np.array([1, 6, 2, 4, 9, 3]),
    }
    split = timeout_split(episodes)
    assert split["stalled"] == 2 and split["slow"] == 1  # the collision's idle time is not a timeout's
    assert split["path_changes_in_timeouts"] == pytest.approx(4.0)
    assert split["path_changes_in_successes"] == pytest.approx(2.0)
    assert "path_changes_in_timeouts" not in timeout_split({k: episodes[k] for k in ("outcome", "idle_s")})


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--lidar-mount", "0.1,0,90"], "--lidar-mount goes with --node"),
        (["--node", "--lidar-mount", "0.1,0"], "expected X,Y,YAW or X,Y,YAW,upside_down"),
        (["--node", "--lidar-mount", "0.1,0,90,flipped"], "expected X,Y,YAW or X,Y,YAW,upside_down"),
        (["--node", "--lidar-mount", "0.1,0,nan"], "lidar mount yaw must be a finite number"),
        (["--node", "--node-unaware"], "--node-unaware goes with --lidar-mount"),
    ],
)
def test_a_lidar_mount_that_cannot_be_read_is_refused_in_one_line(extra: list[str], needle: str, capsys) -> None:
    from navtrain.evaluate_cli import main

    assert main(["--bundle", str(DEFAULT_BUNDLE), "--episodes", "1", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
