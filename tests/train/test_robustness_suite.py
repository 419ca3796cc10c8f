"""The robustness matrix: its rows come from the randomisation registry, every row runs the same
rooms, and the CLI writes JSON, markdown and a chart, with a baseline policy side by side."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from navtrain.evaluate_cli import main
from navtrain.evaluation import eval_env
from navtrain.robustness import merge_baseline, row_config, select_rows, suite_rows, table
from support.simenv import nav_config

ROWS = "nominal,command_latency@high,lidar_bias@2x,all@high,all@train"  # in suite order
SHORT_EPISODES = "env.episode_length_s=2.0"
"""Evaluation override for the suites run here: 2 s episodes (not part of the observation), so that
a row of the tiny policy ends in a few dozen control steps."""


def test_rows_follow_the_registry_and_the_trained_ranges():
    rows = {r.name: r for r in suite_rows(nav_config())}
    terms = list(nav_config().randomization.terms)
    assert list(rows)[0] == "nominal" and list(rows)[-2:] == ["all@high", "all@train"]
    assert len(rows) == 1 + 2 * len(terms) + 2
    assert rows["actuator_lag@2x"].values == {"actuator_lag": {"tau": pytest.approx((0.24, 0.24))}}
    assert rows["accel_limit@high"].values["accel_limit"] == {"linear": (2.5, 2.5), "angular": (3.2, 3.2)}
    assert rows["accel_limit@2x"].values["accel_limit"] == {"linear": (1.25, 1.25), "angular": (1.6, 1.6)}
    assert rows["observation_latency@2x"].values == {"observation_latency": {"substeps": (4.0, 4.0)}}
    assert rows["lidar_bias@2x"].values["lidar_bias"]["offset"] == pytest.approx((-0.04, 0.04))
    assert rows["all@high"].terms == terms and rows["all@high"].severity == 1.0
    assert rows["all@train"].severity is None and rows["all@train"].values["lidar_yaw"] == {"deg": (-2.0, 2.0)}
    assert not any(r.skipped for r in rows.values())
    # A policy trained with fewer terms gets fewer rows; one beyond the delay budget is skipped.
    cfg = nav_config(
        "randomization.terms.observation_latency.enabled=false",
        "randomization.terms.control_jitter.enabled=false",
        "randomization.terms.command_latency.params.substeps=[0,3]",
    )
    rows = {r.name: r for r in suite_rows(cfg)}
    assert "observation_latency@high" not in rows
    assert "env.physics_substeps" in rows["command_latency@2x"].skipped and not rows["command_latency@high"].skipped


def test_a_row_switches_on_its_terms_only_at_its_severity():
    cfg = nav_config()
    row = {r.name: r for r in suite_rows(cfg)}["lidar_bias@2x"]
    env, _ = eval_env(row_config(cfg, row), 8, None, None, "cpu")
    env.randomization.set_severity(row.severity)
    env.reset()
    assert list(env.randomization.ranges) == ["lidar_bias"] and env.base is None
    offset = env.randomization.value("lidar_bias", "offset")
    assert torch.allclose(offset.abs(), torch.full((8,), 0.04))
    nominal = {r.name: r for r in suite_rows(cfg)}["nominal"]
    assert not row_config(cfg, nominal).randomization.enabled


def test_a_row_changes_the_base_never_the_robots_guard_and_smoother():
    """Every row, nominal included, runs the guard and velocity smoother the policy was trained with
    (as the node keeps them whatever the base does): an evaluator passes its trained config as the
    controller; the row's own config alone would drop the smoother (no trained acceleration limit)
    and shorten the guard's reaction time (no lag)."""
    cfg = nav_config()
    trained, _ = eval_env(cfg, 4, None, None, "cpu")
    assert trained.stages.accel.active and trained.guard is not None
    for row in suite_rows(cfg):
        if row.name not in ("nominal", "lidar_bias@2x", "actuator_lag@high"):
            continue
        env, _ = eval_env(row_config(cfg, row), 4, None, None, "cpu", controller=cfg)
        assert env.stages.accel == trained.stages.accel and env.guard == trained.guard, row.name
        assert env.stages.fan == trained.stages.fan
    alone, _ = eval_env(row_config(cfg, suite_rows(cfg)[0]), 4, None, None, "cpu")
    assert not alone.stages.accel.active and alone.guard.reaction < trained.guard.reaction


def _payload(label: str, success: float) -> dict:
    result = {"success_rate": success, "collision_rate": 1 - success, "timeout_rate": 0.0, "spl": 0.5}
    result.update({"mean_time_to_goal_s": math.nan, "command_change_linear": 0.1, "command_change_angular": 0.2})
    rows = [
        {"name": "nominal", "terms": [], "severity": None, "values": {}, "skipped": None, "results": {label: result}},
        {"name": "x@high", "terms": ["x"], "severity": 1.0, "values": {}, "skipped": None, "results": {label: result}},
    ]
    return {"suite": "robustness", "episodes": 10, "seed": 3, "policies": [label], "rows": rows}


def test_a_baseline_is_merged_row_by_row_and_labelled_apart():
    ours, theirs = _payload("policy", 0.9), _payload("policy", 0.5)
    theirs["rows"].append({**theirs["rows"][1], "name": "y@high"})
    theirs["episodes"] = 20
    notes = merge_baseline(ours, theirs)
    assert ours["policies"] == ["policy", "policy (baseline)"]
    assert ours["rows"][0]["results"]["policy (baseline)"]["success_rate"] == 0.5
    assert any("episodes 20" in n for n in notes) and any("y@high" in n for n in notes)
    md = table(ours)
    assert "success [1]" in md and "success [2]" in md and "[2] policy (baseline)" in md
    assert "| nominal | randomisation off | 90.0 % | — | 10.0 % | 0.0 % | — |" in md  # no interval in the input
    with pytest.raises(ValueError, match="not a robustness suite"):
        merge_baseline(ours, {"rows": []})


@pytest.mark.parametrize(
    "args, match",
    [
        (["--baseline", "x.json"], "--baseline goes with --suite"),
        (["--suite", "robustness", "--json", "x.json"], "--json does not go with --suite"),
        (["--suite", "robustness", "--baseline", "/nonexistent/x.json"], "no such file"),
    ],
)
def test_suite_arguments_are_checked_before_any_world(args, match, capsys, fixture_bundle):
    assert main(["--bundle", str(fixture_bundle), *args]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


def test_a_baseline_that_is_not_a_suite_json_is_refused(tmp_path, capsys, fixture_bundle):
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"episodes": 3}))
    assert main(["--suite", "robustness", "--bundle", str(fixture_bundle), "--baseline", str(bad)]) == 2
    assert "not a robustness suite JSON" in capsys.readouterr().err


def test_rows_chosen_by_name_or_pattern_keep_the_suites_order():
    rows = suite_rows(nav_config())
    terms = list(nav_config().randomization.terms)
    trained_end = [r.name for r in select_rows(rows, ["*@high", "nominal"])]
    assert trained_end == ["nominal"] + [f"{t}@high" for t in terms] + ["all@high"]
    assert [r.name for r in select_rows(rows, ["lidar_noise@2x", "actuator_lag@high"])] == [
        "actuator_lag@high",
        "lidar_noise@2x",
    ]
    assert select_rows(rows, None) == rows
    with pytest.raises(ValueError, match=r"unknown row\(s\) \*@3x \(known: nominal, "):
        select_rows(rows, ["nominal", "*@3x"])


def test_unknown_rows_are_named(capsys, fixture_bundle):
    assert main(["--suite", "robustness", "--bundle", str(fixture_bundle), "--rows", "nominal,lidar_yaw@3x"]) == 2
    err = capsys.readouterr().err
    assert "lidar_yaw@3x" in err and "lidar_yaw@2x" in err


@pytest.mark.slow
def test_checkpoint_and_bundle_suites_side_by_side(trained_checkpoint: Path, exported_bundle: Path, tmp_path: Path):
    common = ["--suite", "robustness", "--episodes", "4", "--rows", ROWS, SHORT_EPISODES]
    ckpt_out, bundle_out = tmp_path / "ckpt", tmp_path / "bundle"
    assert main([*common, "--checkpoint", str(trained_checkpoint), "--label", "torch", "--out", str(ckpt_out)]) == 0
    first = json.loads(ckpt_out.with_suffix(".json").read_text())
    assert [r["name"] for r in first["rows"]] == ROWS.split(",")
    for row in first["rows"]:
        res = row["results"]["torch"]
        assert res["episodes"] == 4 and res["seed"] == first["seed"]
        assert res["success_rate"] + res["collision_rate"] + res["timeout_rate"] + res["out_of_bounds_rate"] == 1.0
        assert res["command_change_linear"] > 0 and res["command_change_angular"] >= 0
    baseline = ["--baseline", str(ckpt_out.with_suffix(".json"))]
    assert (
        main([*common, "--bundle", str(exported_bundle), "--label", "onnx", "--out", str(bundle_out), *baseline]) == 0
    )
    both = json.loads(bundle_out.with_suffix(".json").read_text())
    assert both["policies"] == ["onnx", "torch"]
    assert all(set(r["results"]) == {"onnx", "torch"} for r in both["rows"])
    assert both["rows"][2]["values"]["lidar_bias"]["offset"] == pytest.approx([-0.04, 0.04])
    md = bundle_out.with_suffix(".md").read_text()
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len(lines) == 2 + len(ROWS.split(",")) and "[1] onnx, [2] torch" in md
    assert {ln.count("|") for ln in lines} == {2 + 2 * 8 + 1}  # row, values, 8 metrics per policy
    assert bundle_out.with_suffix(".png").stat().st_size > 5000
