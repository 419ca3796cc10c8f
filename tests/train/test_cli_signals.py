"""nav-train under SIGTERM, with real signals on a tiny run.

The run is driven by a small script that starts ``navtrain.train_cli.main`` in a subprocess and makes
the process send itself SIGTERM at an exact moment: in the middle of a PPO update (after the
update's second optimizer step) and, for the second signal, while the interrupt checkpoint is
being written. Adam counts its steps, so a checkpoint tells how many updates went into its weights:
``(iter + 1) * epochs * mini-batches`` for a consistent one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from navtrain.checkpoint import load_checkpoint
from support.paths import REPO

pytestmark = pytest.mark.slow

EPOCHS, MINI_BATCHES = 2, 2
STEPS_PER_ITERATION = EPOCHS * MINI_BATCHES

DRIVER = textwrap.dedent(
    """
    import os, signal, sys
    import torch
    import navtrain.runner
    from navtrain import train_cli

    KILL_AT_STEP = int(sys.argv[1])
    SECOND_DURING_SAVE = sys.argv[2] == "1"
    steps = 0
    adam_step = torch.optim.Adam.step

    def step(self, *args, **kwargs):
        global steps
        out = adam_step(self, *args, **kwargs)
        steps += 1
        if steps == KILL_AT_STEP:
            os.kill(os.getpid(), signal.SIGTERM)  # mid-update: more optimizer steps follow
        return out

    torch.optim.Adam.step = step
    save = navtrain.runner.atomic_torch_save

    def save_with_a_second_signal(obj, path):
        if SECOND_DURING_SAVE and "interrupted" in str(path):
            os.kill(os.getpid(), signal.SIGTERM)
        return save(obj, path)

    navtrain.runner.atomic_torch_save = save_with_a_second_signal
    sys.exit(train_cli.main(sys.argv[3:]))
    """
)


def run_interrupted(
    log_root: Path, kill_at_step: int, second_during_save: bool, save_interval: int
) -> tuple[Path, str]:
    args = [
        "--device", "cpu", "--num-envs", "16", "--max-iterations", "4", "--no-eval", "--no-export", "--seed", "1",
        f"runner.log_root={log_root}", "runner.num_steps_per_env=8", f"runner.save_interval={save_interval}",
        f"algorithm.num_learning_epochs={EPOCHS}", f"algorithm.num_mini_batches={MINI_BATCHES}",
        f"presets.cpu.num_mini_batches={MINI_BATCHES}", "model.actor_hidden_dims=[32,32]", "model.critic_hidden_dims=[32,32]",
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(kill_at_step), "1" if second_during_save else "0", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-3000:])
    (run,) = sorted((log_root / "nav").iterdir())
    assert not [p.name for p in run.iterdir() if ".tmp-" in p.name], "a temporary checkpoint was left behind"
    return run, proc.stderr


def adam_steps(ckpt: dict) -> int:
    counts = {int(s["step"]) for s in ckpt["optimizer_state_dict"]["state"].values()}
    assert len(counts) == 1, counts
    return counts.pop()


def test_sigterm_during_the_update_saves_the_last_consistent_state(tmp_path: Path) -> None:
    # SIGTERM after the 2nd of 4 optimizer steps of iteration 1.
    run, stderr = run_interrupted(tmp_path, STEPS_PER_ITERATION + 2, second_during_save=False, save_interval=1)
    latest = load_checkpoint(run / "model_latest.pt")
    saved = load_checkpoint(run / f"model_{latest['iter']}_interrupted.pt")
    assert adam_steps(latest) == (latest["iter"] + 1) * STEPS_PER_ITERATION, "half-updated weights were saved"
    assert latest["iter"] == 1
    assert adam_steps(saved) == adam_steps(latest)
    # The normaliser statistics moved with the (whole) update.
    before = load_checkpoint(run / "model_0.pt")
    assert not bool(
        (latest["actor_state_dict"]["obs_normalizer._mean"] == before["actor_state_dict"]["obs_normalizer._mean"]).all()
    )


def test_a_second_sigterm_waits_for_the_interrupt_save(tmp_path: Path) -> None:
    # SIGTERM in iteration 0's update (no checkpoint yet), and another while the interrupt save writes.
    run, stderr = run_interrupted(tmp_path, 2, second_during_save=True, save_interval=100)
    latest = load_checkpoint(run / "model_latest.pt")
    assert latest["iter"] == 0 and adam_steps(latest) == STEPS_PER_ITERATION
    assert (run / "model_0_interrupted.pt").is_file()
    assert "still saving, please wait" in stderr
