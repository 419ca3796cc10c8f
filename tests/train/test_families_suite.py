"""The families suite's rows: each one's overrides give the worlds its name promises, and a
``+path`` row differs from its goal-mode twin only in feeding the policy the path's sub-goal."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from navsim.config import WorldsCfg
from navtrain.evaluation import Evaluator, with_overrides
from navtrain.families_suite import NOMINAL, ROWS, run_suite, write_outputs
from support.simenv import nav_config

TWINS = {"rooms16+path": "rooms16", "clutter+path": "clutter", "corridors+path": "corridors"}


def test_row_names_are_unique_and_every_path_row_has_a_goal_mode_twin() -> None:
    names = [r.name for r in ROWS]
    assert len(set(names)) == len(names)
    assert sorted(n for n in names if n.endswith("+path")) == sorted(TWINS)
    base = nav_config("env.worlds.path_clearance=0.0")  # as a checkpoint from before the option
    for path_row, goal_row in TWINS.items():
        follow = with_overrides(base, [*NOMINAL, *next(r for r in ROWS if r.name == path_row).overrides])
        goal = with_overrides(base, [*NOMINAL, *next(r for r in ROWS if r.name == goal_row).overrides])
        assert follow.env.worlds.path_following == 1.0 and goal.env.worlds.path_following == 0.0
        follow.env.worlds.path_following = goal.env.worlds.path_following
        assert follow == goal, path_row
        assert not follow.randomization.enabled and not follow.env.worlds.curriculum.enabled
        assert follow.env.worlds.path_clearance == WorldsCfg().path_clearance > 0  # the same paths for all


def test_path_rows_follow_the_path_in_every_episode_and_goal_rows_in_none(tmp_path: Path) -> None:
    follows: list[list[bool]] = []  # one list per row: an env's id can be reused once it is freed

    def make_act(env):  # records which episodes follow the path; stands still
        row: list[bool] = []
        follows.append(row)

        def act(obs, _unused=None):
            row.extend(env.follow.tolist())
            return torch.zeros(env.num_envs, env.num_actions)

        return act

    cfg = nav_config("env.episode_length_s=0.5")
    evaluator = Evaluator(cfg, "standing still", "cpu", make_act)
    payload = run_suite(evaluator, episodes=4, seed=5, rows=["rooms16+path", "clutter", "clutter+path"])
    assert [r["name"] for r in payload["rows"]] == ["rooms16+path", "clutter", "clutter+path"]
    assert len(follows) == 3 and all(follows)
    assert all(follows[0]) and not any(follows[1]) and all(follows[2])
    for row in payload["rows"]:
        result = row["results"]["standing still"]
        assert result["episodes"] == 4 and result["timeout_rate"] == 1.0  # standing still never arrives
        low, high = result["success_interval"]  # 0 of 4: the Wilson interval 0-49 %
        assert low == 0.0 and round(high, 3) == 0.490
    json_path, md_path, png_path = write_outputs(payload, tmp_path / "families")
    table = md_path.read_text()
    assert "success, 95 % interval" in table and "| 0.0–49.0 % |" in table
    assert json.loads(json_path.read_text())["rows"][0]["results"]["standing still"]["success_interval"][0] == 0.0
    assert png_path.stat().st_size > 5000  # success bars with their intervals


def test_a_suite_stopped_part_way_goes_on_from_the_next_row(tmp_path: Path) -> None:
    """With a row log, a suite stopped in its second row (Ctrl-C, the end of a session) keeps its first
    row: run again, it runs only the second; with another episode count it runs both again."""
    calls: list[str] = []
    stop = {"at": "clutter"}

    def make_act(env):
        families = env.cfg["env"]["worlds"]["families"]
        name = "clutter" if families.get("clutter") == 1.0 else "rooms16"
        calls.append(name)

        def act(obs, _unused=None):
            if name == stop["at"]:
                raise KeyboardInterrupt
            return torch.zeros(env.num_envs, env.num_actions)

        return act

    evaluator = Evaluator(nav_config("env.episode_length_s=0.5"), "standing still", "cpu", make_act)
    log = tmp_path / "families_rows.json"
    try:
        run_suite(evaluator, episodes=4, seed=5, rows=["rooms16", "clutter"], log=log, log_key={"checkpoint": "abc"})
    except KeyboardInterrupt:
        pass
    assert calls == ["rooms16", "clutter"] and log.is_file()
    first = json.loads(log.read_text())["rows"]["rooms16"]["entry"]
    calls.clear()
    stop["at"] = ""
    payload = run_suite(
        evaluator, episodes=4, seed=5, rows=["rooms16", "clutter"], log=log, log_key={"checkpoint": "abc"}
    )
    assert calls == ["clutter"]  # the first row came from the log
    assert [r["name"] for r in payload["rows"]] == ["rooms16", "clutter"] and payload["rows"][0] == first
    calls.clear()
    run_suite(evaluator, episodes=3, seed=5, rows=["rooms16", "clutter"], log=log, log_key={"checkpoint": "abc"})
    assert calls == ["rooms16", "clutter"]  # another episode count: nothing is taken from the log
