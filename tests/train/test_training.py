"""Training end to end on a small config: artifacts, normaliser, resume, and that learning happens."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from navtrain import train_cli
from navtrain.checkpoint import load_checkpoint
from support.paths import REPO

pytestmark = pytest.mark.slow


def _scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "nav").iterdir() if p.is_dir())


SMALL = [
    "--num-envs",
    "32",
    "--device",
    "cpu",
    "--no-export",
    "--eval-episodes",
    "16",
    "runner.num_steps_per_env=16",
    "runner.save_interval=1",
    "model.actor_hidden_dims=[64,64]",
    "model.critic_hidden_dims=[64,64]",
    "env.episode_length_s=3.0",  # 30 control steps: episodes end within the run and the final evaluation is short
]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("logs")
    rc = train_cli.main(
        [
            *SMALL,
            "--max-iterations",
            "3",
            "--run-name",
            "first",
            f"runner.log_root={root}",
            "algorithm.learning_rate=1e-3",
        ]
    )
    assert rc == 0
    (run,) = _run_dirs(root)
    return run


def test_training_writes_checkpoints_tensorboard_and_evaluation(first_run: Path) -> None:
    names = {p.name for p in first_run.iterdir()}
    assert {
        "model_0.pt",
        "model_1.pt",
        "model_2.pt",
        "model_latest.pt",
        "config.yaml",
        "eval.json",
        "eval.png",
    } <= names
    assert any(n.startswith("events.out.tfevents") for n in names)
    assert not any(n.startswith(".") and ".tmp-" in n for n in names), "a temporary checkpoint file was left behind"
    metrics = json.loads((first_run / "eval.json").read_text())
    assert metrics["episodes"] == 16
    total = (
        metrics["success_rate"] + metrics["collision_rate"] + metrics["timeout_rate"] + metrics["out_of_bounds_rate"]
    )
    assert total == pytest.approx(1.0)
    for tag in (
        "Loss/value",
        "Loss/surrogate",
        "Loss/entropy",
        "Loss/learning_rate",
        "Policy/mean_std",
        "Perf/total_fps",
    ):
        assert len(_scalars(first_run, tag)) == 3, tag
    # Episode statistics reach TensorBoard through extras["log"] and rsl_rl's own logger.
    for tag in ("Episode_Termination/collision", "Episode_Termination/success", "Episode/length_s"):
        assert _scalars(first_run, tag), tag
    assert _scalars(first_run, "Episode_Reward/collision")
    # The randomisation drawn for the new episodes (conf/nav.yaml trains with it).
    taus = [v for _, v in _scalars(first_run, "Randomization/actuator_lag/tau")]
    assert taus and all(0.02 <= v <= 0.12 for v in taus)
    rates = [v for _, v in _scalars(first_run, "Episode_Termination/collision")]
    assert all(0.0 <= v <= 1.0 for v in rates)


def test_checkpoint_loads_safely_and_normaliser_moved(first_run: Path) -> None:
    ckpt = load_checkpoint(first_run / "model_latest.pt")  # weights_only=True
    assert ckpt["iter"] == 2
    actor = ckpt["actor_state_dict"]
    assert actor["obs_normalizer._mean"].shape == (1, 78)
    assert actor["obs_normalizer._mean"].abs().max() > 1e-3
    assert not torch.allclose(actor["obs_normalizer._var"], torch.ones_like(actor["obs_normalizer._var"]))
    assert ckpt["infos"]["nav_config"]["env"]["num_envs"] == 32
    assert ckpt["infos"]["obs_groups"] == {"actor": ["policy"], "critic": ["policy", "privileged"]}


def test_resume_continues_iterations_and_learning_rate(first_run: Path, tmp_path: Path) -> None:
    saved = load_checkpoint(first_run / "model_latest.pt")
    saved_lr = saved["optimizer_state_dict"]["param_groups"][0]["lr"]
    assert saved_lr != pytest.approx(3e-4)
    # A fixed schedule keeps whatever LR the run starts with: it must be the checkpoint's, not the config's.
    rc = train_cli.main(
        [
            *SMALL,
            "--max-iterations",
            "2",
            "--no-eval",
            "--resume",
            str(first_run / "model_latest.pt"),
            f"runner.log_root={tmp_path}",
            "algorithm.schedule=fixed",
            "algorithm.learning_rate=3e-4",
        ]
    )
    assert rc == 0
    (run,) = _run_dirs(tmp_path)
    resumed = load_checkpoint(run / "model_latest.pt")
    assert resumed["iter"] == saved["iter"] + 2
    assert (run / "model_3.pt").is_file() and (run / "model_4.pt").is_file()
    lrs = _scalars(run, "Loss/learning_rate")
    assert [s for s, _ in lrs] == [3, 4]
    assert all(v == pytest.approx(saved_lr, rel=1e-6) for _, v in lrs)


def test_unknown_override_key_is_rejected_with_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    rc = train_cli.main(["--max-iterations", "1", "algorithm.learning_rat=1e-4"])
    assert rc == 2
    assert "algorithm.learning_rat" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["training/train.py"], ["-m", "navtrain.train_cli"]])
def test_documented_train_command_runs_the_entry_point(command: list[str]) -> None:
    """``python training/train.py`` (the documented command) and the module behind ``nav-train``."""
    proc = subprocess.run(
        [sys.executable, *command, "--max-iterations", "1", "env.stuck_window=25"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "unknown key 'env.stuck_window'" in proc.stderr


EASY = [
    "env.room.num_obstacles=[0,0]",
    "env.room.goal_distance=[1.0,2.0]",
    "env.episode_length_s=8.0",
    "runner.num_steps_per_env=32",
    "runner.save_interval=100",
]


def test_learning_beats_the_untrained_policy(tmp_path: Path) -> None:
    from navtrain.evaluation import evaluate_checkpoint

    common = ["--num-envs", "64", "--device", "cpu", "--no-export", "--no-eval", "--seed", "3", *EASY]
    assert train_cli.main([*common, "--max-iterations", "0", f"runner.log_root={tmp_path / 'untrained'}"]) == 0
    assert train_cli.main([*common, "--max-iterations", "8", f"runner.log_root={tmp_path / 'trained'}"]) == 0
    (before,) = _run_dirs(tmp_path / "untrained")
    (after,) = _run_dirs(tmp_path / "trained")
    assert load_checkpoint(before / "model_latest.pt")["iter"] == 0
    untrained, _ = evaluate_checkpoint(before / "model_latest.pt", episodes=32, seed=77, plot_rooms=0)
    trained, _ = evaluate_checkpoint(after / "model_latest.pt", episodes=32, seed=77, plot_rooms=0)
    print(f"untrained success {untrained.success_rate:.2f}, trained {trained.success_rate:.2f}")
    assert trained.success_rate >= untrained.success_rate + 0.4
