"""Multi-process training on the CPU: ``torchrun --nproc_per_node=2 training/train.py`` with gloo.

Each rank steps its own worlds (its own room seed); rsl_rl all-reduces the gradients and the
normaliser statistics, so both ranks end with the same weights; only rank 0 writes the run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_cpu_ranks_train_to_identical_weights(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    assert torchrun, "torchrun is installed with torch"
    cmd = [
        torchrun,
        "--standalone",
        "--nproc_per_node=2",
        str(REPO / "training" / "train.py"),
        "--device",
        "cpu",
        "--num-envs",
        "32",
        "--max-iterations",
        "3",
        "--no-eval",
        "--no-export",
        "--run-name",
        "ddp",
        "runner.num_steps_per_env=8",
        f"runner.log_root={tmp_path / 'logs'}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    digests = dict(re.findall(r"rank (\d)/2 weights sha256 ([0-9a-f]{64})", text))
    assert set(digests) == {"0", "1"}, text[-4000:]
    assert digests["0"] == digests["1"], "the ranks hold different weights"
    runs = list((tmp_path / "logs").glob("*/*ddp"))
    assert len(runs) == 1, runs  # one run folder: rank 0's
    ckpt = torch.load(runs[0] / "model_latest.pt", weights_only=True)
    assert ckpt["iter"] == 2
    # 2 ranks x 32 worlds x 8 steps per iteration: the progress line counts every rank's steps
    assert re.search(r"it +3/3 \| steps +0\.00M", text) and "Synchronizing parameters for rank 1" in text
