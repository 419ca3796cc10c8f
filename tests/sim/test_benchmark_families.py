"""nav-benchmark-sim --families: every family alone and the mix side by side, ratios against rooms,
the model's obstacle slots, active obstacles per world and the planner's cost, in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from navsim.benchmark import FAMILY_MIX, family_overrides, family_rows, main
from navsim.families import FAMILIES


def test_family_rows_are_each_family_then_the_mix() -> None:
    rows = family_rows()
    assert list(rows) == [*FAMILIES, "mix"] and rows["mix"] == FAMILY_MIX
    assert all(rows[f] == {f: 1.0} for f in FAMILIES)
    assert family_overrides({"clutter": 1.0}, 4, 8) == [
        "env.worlds.families={clutter: 1.0}",
        "env.worlds.curriculum.enabled=false",
        "env.worlds.pool_size=4",
        "env.worlds.refresh_size=4",
    ]


@pytest.mark.slow
def test_families_option_writes_every_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    argv = ["--num-envs", "4", "--steps", "1", "--warmup", "1", "--no-reference", "--families"]
    argv += ["--family-rounds", "1", "--pool-size", "2", "--plan-worlds", "2", "--json", str(out)]
    assert main([*argv, "randomization.enabled=false"]) == 0
    fam = json.loads(out.read_text())["families"]
    assert fam["steps"] == fam["refresh_interval"]  # one step rounded up to a whole refresh interval
    rows = fam["rows"]
    assert list(rows) == [*FAMILIES, "mix"]
    for name, row in rows.items():
        res = row["results"]["4"]
        assert res["env_steps_per_s"] > 0 and res["physics_steps_per_s"] > 0 and res["lidar_steps_per_s"] > 0
        assert row["planned_pools"] == (name != "rooms")
        assert 0 < row["mean_active_obstacles"] <= row["obstacle_slots"] - row["bound_slots"]
    assert rows["rooms"]["results"]["4"]["ratio_to_rooms"] == 1.0
    assert rows["rooms"]["bound_slots"] == 0 and rows["clutter"]["bound_slots"] == 4
    assert rows["mix"]["obstacle_slots"] > max(rows[f]["obstacle_slots"] for f in FAMILIES)
    assert set(fam["planner"]) == set(FAMILIES)
    for cost in fam["planner"].values():
        assert (
            cost["plan_ms_per_draw"] > 0 and 0.0 <= cost["refused_share"] <= 1.0 and cost["refresh_ms"] > 0
        )  # 2 draws of a dense family may all be refused
    printed = capsys.readouterr().out
    assert "world families: NavEnv.step" in printed and "grid planner" in printed
