"""nav-play: an animated GIF of a few episodes of a checkpoint or a bundle, one frame per control
step until every episode has ended, in any world family (its own extents, the planner's path, the
sub-goal when following it); bad input is one line and exit 2. Also: the evaluation plot shows the
failures first, as its caption says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image

from navsim.families import extent_half
from navsim.families.rooms import RoomBatch
from navsim.outcomes import Outcome
from navtrain.evaluation import EpisodeTrace, plot_trace
from navtrain.play import FAMILIES, main, panel_layout
from support.paths import FIXTURE_BUNDLE
from support.simenv import NO_RANDOMIZATION, nav_config

WROTE = re.compile(r"\[play\] wrote (.+): (\d+) frames, ([\d.]+) MB")


def play(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_gif(path: Path, stdout: str, max_steps: int, panels_across: int) -> None:
    (match,) = WROTE.findall(stdout)
    frames = int(match[1])
    assert Path(match[0]) == path and 2 <= frames <= max_steps + 1  # the reset, then one per step
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == frames and gif.is_animated
        assert gif.size[0] == 100 * 2.5 * panels_across  # --dpi 100, 2.5-inch panels
    assert "[play] episodes 0: " in stdout and ", 1: " in stdout


@pytest.mark.slow
def test_plays_a_checkpoint(trained_checkpoint: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "sub" / "ckpt.gif"
    code, stdout, _ = play(
        capsys, "--checkpoint", str(trained_checkpoint), "--episodes", "2", "--max-steps", "6", "--out", str(out)
    )
    assert code == 0
    assert_gif(out, stdout, 6, panels_across=2)
    assert not [p for p in out.parent.iterdir() if p != out], "no staging file left behind"


@pytest.mark.slow
def test_plays_a_bundle_through_the_robot_runtime(exported_bundle: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "bundle.gif"
    out.write_bytes(b"an older animation")  # replaced, as nav-evaluate replaces its outputs
    code, stdout, _ = play(
        capsys,
        "--bundle",
        str(exported_bundle),
        "--episodes",
        "2",
        "--max-steps",
        "4",
        "--out",
        str(out),
        NO_RANDOMIZATION,
    )
    assert code == 0 and "policy (bundle, onnxruntime)" in stdout
    assert_gif(out, stdout, 4, panels_across=2)


EPISODE = re.compile(r"(\d+): (success|collision|timeout|out_of_bounds|running)(?: \(([\d.]+) s\))?")


def expected_frames(stdout: str, max_steps: int, control_period: float) -> int:
    """The reset frame, then one per step until the last episode ended (or max_steps)."""
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("[play] episodes ")]
    ends = EPISODE.findall(line)
    if any(outcome == "running" for _, outcome, _ in ends):
        return max_steps + 1
    return round(max(float(t) for _, _, t in ends) / control_period) + 1


@pytest.mark.parametrize(("family", "half"), [("clutter", (6.5, 2.0)), ("corridors", (4.8, 1.8))])
def test_plays_a_family_following_the_path(family: str, half: tuple[float, float], tmp_path: Path, capsys) -> None:
    """A wide family in its own proportions: one column of wide panels, every frame written."""
    out = tmp_path / f"{family}.gif"
    max_steps = 24
    code, stdout, _ = play(
        capsys,
        "--bundle",
        str(FIXTURE_BUNDLE),
        "--episodes",
        "2",
        "--max-steps",
        str(max_steps),
        "--family",
        family,
        "--path-following",
        "--out",
        str(out),
        NO_RANDOMIZATION,
    )
    assert code == 0
    assert f", {family}, following the planned path" in stdout
    (match,) = WROTE.findall(stdout)
    frames = int(match[1])
    assert frames == expected_frames(stdout, max_steps, nav_config().env.control_period)
    wall = nav_config().env.room.wall_thickness
    layout = panel_layout(2, (half[1] + wall) / (half[0] + wall))
    assert layout.cols == 1 and layout.width > layout.height * 2
    with Image.open(out) as gif:
        assert gif.n_frames == frames and gif.is_animated
        assert gif.size[0] == round(100 * layout.width)  # --dpi 100, one column
        assert gif.size[1] > 100 * 2 * layout.height


def test_recording_keeps_world_extents_path_and_sub_goals() -> None:
    """What the panels draw: the world's own extents, its planned path, every active slot, and the
    sub-goal the policy saw at every frame (not the final goal while it is far)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Polygon

    from navsim.robot import slot_sizes
    from navtrain.evaluation import eval_env
    from navtrain.play import draw_room, record, world_half

    cfg = nav_config(NO_RANDOMIZATION, "env.worlds.families={corridors: 1.0}", "env.worlds.path_following=1.0")
    env, seed = eval_env(cfg, 2, None, None, "cpu")
    gen = torch.Generator().manual_seed(seed)
    rooms = env.new_rooms(2, gen)
    rec = record(env, lambda obs, live: torch.zeros(2, 3), rooms, max_steps=3)
    assert rec.frames == 4 and rec.goals.shape == (4, 2, 2) and rec.follow.all()
    far = np.linalg.norm(rec.rooms.goal.numpy() - rec.poses[0, :, :2], axis=-1) > 2 * cfg.env.worlds.lookahead
    assert far.all()
    assert (np.linalg.norm(rec.goals[0] - rec.rooms.goal.numpy(), axis=-1) > 0.5).all()  # a sub-goal, not the goal
    assert world_half(rec.rooms, 0, cfg.env) == pytest.approx((4.8, 1.8))
    nan_half = RoomBatch(rec.rooms.slot_pos, rec.rooms.slot_yaw, rec.rooms.slot_active, rec.rooms.start, rec.rooms.goal)
    assert world_half(nan_half, 0, cfg.env) == (extent_half(cfg.env),) * 2
    fig, ax = plt.subplots()
    draw_room(ax, rec.rooms, 1, cfg.env)
    sizes = slot_sizes(cfg.env)
    active = rec.rooms.slot_active[1].numpy()
    n_cyl = len(sizes.cylinder_radius)
    polygons = [p for p in ax.patches if isinstance(p, Polygon)]
    assert len(polygons) == int(active[n_cyl:].sum()) > 4  # maze walls and the four bounds
    circles = [p for p in ax.patches if isinstance(p, Circle)]
    assert len(circles) == int(active[:n_cyl].sum()) + 1  # + the goal's tolerance
    plan = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
    assert len(plan) == 1 and len(plan[0].get_xdata()) == int(rec.rooms.path_count[1]) > 2
    assert ax.get_xlim() == pytest.approx((-4.8 - 0.1, 4.8 + 0.1)) and ax.get_ylim() == pytest.approx((-1.9, 1.9))
    plt.close(fig)


def play_a_clutter_field(capsys: pytest.CaptureFixture[str], out: Path, *flags: str) -> tuple[int, str]:
    """nav-play of the fixture bundle in one clutter field for three steps, with ``flags``: exit code, stdout."""
    args = ["--bundle", str(FIXTURE_BUNDLE), *flags, "--family", "clutter", "--episodes", "1", "--max-steps", "3"]
    code, stdout, _ = play(capsys, *args, "--out", str(out), NO_RANDOMIZATION)
    return code, stdout


def test_scan_map_episodes_show_the_path_planned_on_the_robot_s_scans(tmp_path: Path, capsys) -> None:
    """--scan-map drives goal-mode worlds along the node's own map path: the recording keeps that
    path as it changed and the sub-goal handed to the policy, and the panel draws both."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from navdeploy.scan_map import ScanMapCfg
    from navtrain.evaluation import bundle_evaluator, eval_env
    from navtrain.play import Panel, record

    overrides = [NO_RANDOMIZATION, "env.worlds.families={clutter: 1.0}", "env.worlds.path_following=0.0"]
    evaluator = bundle_evaluator(FIXTURE_BUNDLE, "policy", overrides, None, ScanMapCfg(), 720)
    env, seed = eval_env(evaluator.cfg, 2, None, None, evaluator.device)
    act = evaluator.make_act(env)
    rooms = env.new_rooms(2, torch.Generator().manual_seed(seed))
    rec = record(env, act, rooms, max_steps=12)
    assert rec.mapped.all() and not rec.follow.any()
    for i in range(2):
        assert rec.map_paths[i] and rec.map_paths[i][0][0] == 1  # planned at the first step
        first = rec.map_paths[i][0][1]
        assert first is not None and np.allclose(first[-1], rec.rooms.goal[i].numpy(), atol=0.1)
        # 10-12 m to the goal: the policy was handed the map's sub-goal, not the goal
        assert np.linalg.norm(rec.goals[1, i] - rec.rooms.goal[i].numpy()) > 5.0
    angles = np.linspace(-np.pi, np.pi, rec.scans.shape[-1], endpoint=False)
    fig, ax = plt.subplots()
    panel = Panel(ax, rec, 0, evaluator.cfg.env, angles)
    panel.update(5)
    dashed = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    assert len(dashed) == 1 and len(dashed[0].get_xdata()) >= 2
    plt.close(fig)
    out = tmp_path / "map.gif"
    code, stdout = play_a_clutter_field(capsys, out, "--scan-map")
    assert code == 0 and "+ scan map" in stdout and out.exists()


def test_node_episodes_show_what_the_node_s_gate_planned_and_handed(tmp_path: Path, capsys) -> None:
    """--node drives behind the node's own gate (its scan map, guard, smoother): the recording keeps
    the gate's map path as it changed and the sub-goal the gate took each tick, not the env's goal."""
    from navdeploy.node_params import NodeParams
    from navtrain.evaluation import NodeActor, bundle_evaluator, eval_env
    from navtrain.play import record

    overrides = [NO_RANDOMIZATION, "env.worlds.families={clutter: 1.0}", "env.worlds.path_following=0.0"]
    evaluator = bundle_evaluator(FIXTURE_BUNDLE, "policy", overrides, None, None, 720, NodeParams())
    env, seed = eval_env(evaluator.cfg, 2, None, None, evaluator.device)
    act = evaluator.make_act(env)
    assert isinstance(act, NodeActor)
    rooms = env.new_rooms(2, torch.Generator().manual_seed(seed))
    rec = record(env, act, rooms, max_steps=12)
    assert rec.mapped.all() and not rec.follow.any()
    for i in range(2):
        planned = [path for _, path in rec.map_paths[i] if path is not None]
        assert planned and np.allclose(planned[0][-1], rec.rooms.goal[i].numpy(), atol=0.1)
        # 10-12 m to the goal: the gate handed the policy the map's sub-goal, which the recording shows
        assert np.linalg.norm(rec.goals[-1, i] - rec.rooms.goal[i].numpy()) > 5.0
    out = tmp_path / "node.gif"
    code, stdout = play_a_clutter_field(capsys, out, "--node")
    assert code == 0 and "behind the node's gate" in stdout and out.exists()
    assert_one_line(
        *refused(capsys, "--bundle", str(FIXTURE_BUNDLE), "--node", "--scan-map", "--out", str(out)), "--node"
    )


def test_family_flags_name_the_known_families() -> None:
    from navsim.families import FAMILIES as KNOWN

    assert FAMILIES == KNOWN


def assert_one_line(code: int | str | None, err: str, *words: str) -> None:
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("nav-play: ")
    for word in words:
        assert word in line, (word, line)


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code, _, err = play(capsys, *args)
    return code, err


def test_bad_input_is_one_line_before_any_world(tmp_path: Path, capsys) -> None:
    gif = str(tmp_path / "a.gif")
    assert_one_line(*refused(capsys, "--checkpoint", str(tmp_path / "nope.pt"), "--out", gif), "no such checkpoint")
    bundle = ["--bundle", str(FIXTURE_BUNDLE)]
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert_one_line(*refused(capsys, *bundle, "--out", str(blocker / "a.gif")), "--out", "is not a folder")
    assert_one_line(*refused(capsys, *bundle, "--out", str(tmp_path / "a.png")), "--out", "*.gif")
    (tmp_path / "dir.gif").mkdir()
    assert_one_line(*refused(capsys, *bundle, "--out", str(tmp_path / "dir.gif")), "is a folder")
    assert_one_line(*refused(capsys, *bundle, "--out", gif, "env.room.sizee=3"), "unknown key 'env.room.sizee'")
    assert_one_line(*refused(capsys, *bundle, "--out", gif, "--episodes", "17"), "at most 16")
    assert_one_line(*refused(capsys, *bundle, "--controller", "dwa", "--scan-map", "--out", gif), "--scan-map")
    assert_one_line(
        *refused(capsys, *bundle, "--out", gif, "--family", "kitchens"), "--family kitchens", "unknown world family"
    )
    assert_one_line(
        *refused(capsys, *bundle, "--out", gif, "--family", "clutter", "env.worlds.families={rooms: 1.0}"),
        "both set env.worlds.families",
    )
    with pytest.raises(SystemExit) as exit_:
        main([*bundle, "--out", gif, "--fps", "0"])
    assert_one_line(exit_.value.code, capsys.readouterr().err, "argument --fps")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "dir.gif"], "nothing written"


@pytest.mark.slow
def test_console_script_exists_and_refuses_in_one_line(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("nav-play")
    assert script.is_file(), "pip install --no-deps -e training"
    proc = subprocess.run(
        [str(script), "--checkpoint", str(tmp_path / "nope.pt")], capture_output=True, text=True, timeout=120
    )
    assert_one_line(proc.returncode, proc.stderr, "no such checkpoint")


def test_evaluation_plot_shows_failures_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = nav_config()
    outcomes = [Outcome.SUCCESS, Outcome.COLLISION, Outcome.SUCCESS, Outcome.TIMEOUT, Outcome.OUT_OF_BOUNDS]
    n, s = len(outcomes), cfg.env.room.num_cylinder_slots + cfg.env.room.num_box_slots
    rooms = RoomBatch(
        torch.zeros(n, s, 2),
        torch.zeros(n, s),
        torch.zeros(n, s, dtype=torch.bool),
        torch.zeros(n, 3),
        torch.ones(n, 2),
    )
    paths = [np.array([[0.0, 0.0], [0.1 * k, 0.0]]) for k in range(n)]
    titles: list[list[str]] = []

    def keep_titles(fig: Figure, *args, **kwargs) -> None:
        titles.append([ax.get_title() for ax in fig.axes if ax.get_title()])

    monkeypatch.setattr(Figure, "savefig", keep_titles)
    plot_trace(EpisodeTrace(rooms, paths, outcomes), cfg.env, tmp_path / "eval.png")
    assert titles == [["collision", "timeout", "out_of_bounds", "success", "success"]]
