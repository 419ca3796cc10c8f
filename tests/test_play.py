"""nav-play: an animated GIF of a few episodes of a checkpoint or a bundle, one frame per control
step until every episode has ended; bad input is one line and exit 2. Also: the evaluation plot
shows the failures first, as its caption says."""

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

from conftest import FIXTURE_BUNDLE, NO_RANDOMIZATION, nav_config
from navsim.outcomes import Outcome
from navsim.rooms import RoomBatch
from navtrain.evaluation import EpisodeTrace, plot_trace
from navtrain.play import main

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
    with pytest.raises(SystemExit) as exit_:
        main([*bundle, "--out", gif, "--fps", "0"])
    assert_one_line(exit_.value.code, capsys.readouterr().err, "argument --fps")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "dir.gif"], "nothing written"


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
