"""nav-time-to-bar: evaluates a run's checkpoints in order and stops at the first that meets the bar."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from navtrain.time_to_bar import checkpoints, main

SHORT_EPISODES = "env.episode_length_s=2.0"
"""Evaluation override: 2 s episodes (not part of the observation). Which checkpoints are evaluated,
and where the tool stops, depend on the bar and the rates only."""


def make_run(tmp_path: Path, checkpoint: Path | None) -> Path:
    """A run folder with iterations 10 and 2 (copies of ``checkpoint``; empty files when None)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("stand-in: the checkpoints carry their config\n")
    for it in (10, 2):  # out of order on purpose
        if checkpoint is None:
            (run / f"model_{it}.pt").write_bytes(b"")
        else:
            shutil.copy(checkpoint, run / f"model_{it}.pt")
    (run / "model_latest.pt").write_bytes(b"")  # not an iteration checkpoint: ignored
    return run


def test_checkpoints_are_taken_in_iteration_order(tmp_path) -> None:
    run = make_run(tmp_path, None)  # the order comes from the file names alone
    assert [it for it, _ in checkpoints(run)] == [2, 10]


@pytest.mark.slow
def test_the_runner_stores_training_time_and_steps(trained_checkpoint) -> None:
    infos = torch.load(trained_checkpoint, weights_only=False)["infos"]
    assert infos["train_elapsed_s"] > 0
    assert infos["env_steps"] > 0


@pytest.mark.slow
def test_stops_at_the_first_checkpoint_meeting_the_bar(tmp_path, trained_checkpoint, capsys) -> None:
    run = make_run(tmp_path, trained_checkpoint)
    out = tmp_path / "ttb.json"
    common = [str(run), "--episodes", "4", "--json", str(out), SHORT_EPISODES]
    # A bar every policy meets: the first checkpoint (iteration 2) is the answer, 10 is never evaluated.
    assert main([*common, "--success", "0", "--collision", "1"]) == 0
    data = json.loads(out.read_text())
    assert [r["iteration"] for r in data["rows"]] == [2] and data["reached"]["iteration"] == 2
    assert data["reached"]["elapsed_from"] == "train_elapsed_s"
    assert data["overrides"] == [SHORT_EPISODES]
    # A bar nobody meets: every checkpoint is evaluated and the tool says so.
    assert main([*common, "--success", "1.01"]) == 0
    data = json.loads(out.read_text())
    assert [r["iteration"] for r in data["rows"]] == [2, 10] and data["reached"] is None
    assert "no checkpoint" in capsys.readouterr().out


@pytest.mark.parametrize("make", ["missing", "no_checkpoints"])
def test_refuses_what_is_not_a_run_in_one_line(tmp_path, capsys, make) -> None:
    run = tmp_path / "r"
    if make == "no_checkpoints":
        run.mkdir()
        (run / "config.yaml").write_text("x: 1\n")
    assert main([str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nav-time-to-bar: ") and "\n" not in err
