"""nav-compare's pairing and verdicts on hand-made results (no simulator)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from navtrain.compare import BAR, both_reached, main, parse_rows, row_summary, verdict
from navtrain.evaluation import COLLISION, SUCCESS, TIMEOUT


def result(success: float, collision: float, turn: float, episodes: int = 4) -> dict:
    return {"success_rate": success, "collision_rate": collision, "command_change_angular": turn, "episodes": episodes}


def test_times_are_compared_on_the_worlds_both_drivers_reach() -> None:
    S, C, T = SUCCESS, COLLISION, TIMEOUT
    episodes = {
        "policy": {"outcome": np.array([S, S, T, S]), "time_s": np.array([5.0, 9.0, 30.0, 4.0]),
                   "path_len": np.array([6.0, 8.0, 1.0, 5.0])},
        "dwa": {"outcome": np.array([S, C, S, S]), "time_s": np.array([10.0, 3.0, 20.0, 6.0]),
                "path_len": np.array([7.0, 2.0, 9.0, 5.0])},
    }  # fmt: skip
    assert both_reached({k: v["outcome"] for k, v in episodes.items()}, S).tolist() == [True, False, False, True]
    s = row_summary({"policy": result(0.75, 0.0, 0.5), "dwa": result(0.75, 0.25, 0.1)}, episodes)
    assert s["both_reached"] == 2
    assert s["paired"]["policy"] == {"time_s": 4.5, "path_m": 5.5} and s["paired"]["dwa"]["time_s"] == 8.0
    assert s["time_ratio"] == pytest.approx(4.5 / 8.0)
    assert all(s["checks"].values())
    text = verdict("rooms", s, {"policy": result(0.75, 0.0, 0.5), "dwa": result(0.75, 0.25, 0.1)})
    assert (
        text.startswith("rooms: the policy meets the bar on 4 worlds (the bar is judged on 500): ") and "0.56x" in text
    )


def test_each_part_of_the_bar_can_fail() -> None:
    S, T = SUCCESS, TIMEOUT
    episodes = {
        "policy": {"outcome": np.array([S, T]), "time_s": np.array([9.5, 30.0]), "path_len": np.ones(2)},
        "dwa": {"outcome": np.array([S, S]), "time_s": np.array([10.0, 8.0]), "path_len": np.ones(2)},
    }
    s = row_summary({"policy": result(0.5, 0.01, BAR.max_turn_change + 0.1), "dwa": result(1.0, 0.0, 0.1)}, episodes)
    assert s["checks"] == {
        "success_at_least_dwa": False,
        "collision_at_most": False,
        "time_ratio_at_most": False,  # 0.95x the DWA's
        "turn_change_at_most": False,
    }
    none = {k: {**v, "outcome": np.array([T, T])} for k, v in episodes.items()}
    s = row_summary({"policy": result(0.0, 0.0, 0.1), "dwa": result(0.0, 0.0, 0.1)}, none)
    assert s["both_reached"] == 0 and math.isnan(s["time_ratio"]) and not s["checks"]["time_ratio_at_most"]
    text = verdict("arenas", s, {"policy": result(0.0, 0.0, 0.1, 500), "dwa": result(0.0, 0.0, 0.1, 500)})
    assert text.startswith("arenas: the policy does NOT meet the bar: ")


def test_rows_are_the_families_suites_and_a_bad_one_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert [r.name for r in parse_rows(None)] == ["rooms", "rooms16", "clutter", "corridors+path", "arenas"]
    assert [r.name for r in parse_rows("arenas, rooms")] == ["arenas", "rooms"]
    with pytest.raises(ValueError, match="unknown row 'caves'"):
        parse_rows("rooms,caves")
    from support.paths import REPO

    bundle = REPO / "tests/fixtures/bundle"
    assert main(["--bundle", str(bundle), "--rows", "caves"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nav-compare: --rows: unknown row 'caves'") and err.count("\n") == 1
    assert main(["--bundle", str(bundle.parent / "none")]) == 2
    assert "no bundle" in capsys.readouterr().err
