"""scripts/gpu_check.sh --dry-run: the whole GPU check pipeline, tiny, on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from navtrain.gpu_check import DRY_RUN

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_check_dry_run_writes_every_section(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    out = tmp_path / "gc"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh"), "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["errors"] == {} and report["device"] == "cpu" and report["dry_run"] is True
    assert set(report["benchmark"]) == {str(n) for n in DRY_RUN["sizes"]}
    assert all(row["env_steps_per_s"] > 0 for row in report["benchmark"].values())
    training = report["training"]
    steps = DRY_RUN["train_envs"] * 32 * DRY_RUN["max_iterations"]  # 32 steps per world and iteration
    assert training["env_steps"] == steps and training["env_steps_per_s"] > 0
    its = [row["iteration"] for row in report["evaluations"]]
    assert its == sorted(its) and len(its) >= 1
    assert all(0.0 <= row["success"] <= 1.0 and row["training_s"] > 0 for row in report["evaluations"])
    reached = [r for r in report["evaluations"] if r["success"] >= 0.97 and r["collision"] <= 0.03]
    assert (report["time_to_bar_s"] is None) == (not reached)
    assert report["peak_memory_gib"] > 0.05
