"""nav-benchmark-tick (navdeploy.bench_tick) runs its three modes on the same stream and writes its
JSON; the synthetic lidar sees the posts it is cast against. Nothing here is timed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from navdeploy import bench_tick
from support.paths import REPO


def test_the_lidar_sees_a_post_straight_ahead_and_the_walls_elsewhere() -> None:
    world = bench_tick.World((-1.0, 4.0, -2.0, 2.0), np.array([[2.0, 0.0, 0.1]]))
    r = bench_tick.cast(world, np.array([0.0, 0.0, 0.0]), 8, np.random.default_rng(0), 0.0)
    # beam 4 points forward (angle 0): the post's near side; beam 0 backward: the wall at x = -1.
    assert math.isclose(r[4], 1.9, abs_tol=1e-9) and math.isclose(r[0], 1.0, abs_tol=1e-9)
    assert math.isclose(r[6], 2.0, abs_tol=1e-9)  # left (pi/2): the wall at y = 2


def test_the_benchmark_runs_every_mode_on_one_stream_and_writes_json(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)  # the default bundle is found under the repository root
    out = tmp_path / "tick.json"
    assert bench_tick.main(["--ticks", "14", "--pace", "0", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    (run,) = data["runs"]
    assert run["pace_s"] == 0.0 and set(run["modes"]) == {"worker", "sync", "off"}
    for mode, r in run["modes"].items():
        assert sum(r["states"].values()) == 14 - bench_tick.WARMUP, mode
        assert r["tick_ms"]["p50"] <= r["tick_ms"]["p99"] <= r["tick_ms"]["max"]
    assert run["modes"]["off"]["ticks_with_subgoal"] == 0
    assert run["modes"]["sync"]["ticks_with_subgoal"] > 0
    assert data["beams"] == 720 and data["world"]["posts"] > 40
