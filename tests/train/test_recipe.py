"""Recipes (navtrain.recipe, navtrain.recipe_work, nav-recipe's argument errors): the file format read
strictly, the plan, the seeds of validation, evaluation and training, and where an interrupted
stage resumes, judged on work folders of hand-made checkpoint files. No training: the end-to-end
runs are in test_recipe_run.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
import yaml

from navtrain.recipe import (
    SEED_OFFSETS,
    RecipeError,
    check_seeds,
    load_recipe,
    make_plan,
    score,
    stream,
)
from navtrain.recipe_work import Work
from support.paths import REPO
from support.recipes import tiny_recipe

SHIPPED = sorted((REPO / "recipes").glob("*.yaml"))

TINY = tiny_recipe(seed=1, first_iterations=30, every=5, validation_episodes=4, episodes=4)


def write(tmp_path: Path, data: dict, name: str = "r.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def edited(**changes) -> dict:
    data = json.loads(json.dumps(TINY))
    for dotted, value in changes.items():
        node = data
        keys = dotted.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[keys[-1]] = value
    return data


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_recipes_load_with_disjoint_seed_streams(path: Path) -> None:
    recipe = load_recipe(path)
    assert recipe.name == path.stem and recipe.out == f"policies/{path.stem}"
    cfgs = [recipe.stage_config(s) for s in recipe.stages]
    for cfg in cfgs:
        assert cfg.randomization.enabled and cfg.env.guard.enabled and cfg.env.smoother.enabled
        assert cfg.env.worlds.curriculum.enabled and set(cfg.env.worlds.families) == {
            "rooms",
            "clutter",
            "corridors",
            "arenas",
        }
    evaluation = recipe.evaluation.seed
    assert not stream(recipe.selection.validation_seed) & stream(evaluation)
    assert not stream(recipe.selection.validation_seed) & stream(recipe.seed)
    plan = make_plan(recipe)
    trained = plan.last_iteration + 1 - plan.stages[0].first
    assert trained == sum(s.iterations for s in recipe.stages) >= (100 if recipe.init is not None else 1000)
    assert recipe.suites.robustness is not None
    # a table per world family beside the robustness matrix: the families suite, or the compare suite
    # (every family, the policy and the DWA behind the node's gate; issue 30's 500 worlds per family)
    compare = recipe.suites.compare
    assert recipe.suites.families is not None or (compare is not None and compare.episodes >= 500 and not compare.rows)


def test_the_shipped_recipes_train_their_bases() -> None:
    bases = {p.stem: load_recipe(p).stage_config(load_recipe(p).stages[0]).env.robot.drive for p in SHIPPED}
    assert bases == {
        "holonomic_default": "holonomic",
        "holonomic_270": "holonomic",
        "holonomic_270_steer": "holonomic",
        "holonomic_direct": "holonomic",
        "holonomic_steer": "holonomic",
        "jackal_default": "diff_drive",
        "jackal_tuned": "diff_drive",
        "jackal_noise": "diff_drive",
        "jackal_fast": "diff_drive",
        "jackal_direct": "diff_drive",
    }
    tuned = load_recipe(REPO / "recipes/jackal_tuned.yaml")  # fine-tunes the kept Jackal policy
    assert tuned.init is not None and tuned.init.path == REPO / "policies/jackal_default/checkpoint.pt"
    noise = load_recipe(REPO / "recipes/jackal_noise.yaml")  # fine-tunes jackal_tuned's chosen checkpoint
    assert noise.init is not None and noise.init.path == REPO / "runs/recipes/jackal_tuned/final/checkpoint.pt"
    assert noise.stage_config(noise.stages[0]).env.lidar.noise_beams == 10
    fast = load_recipe(REPO / "recipes/jackal_fast.yaml")  # fine-tunes jackal_noise's chosen checkpoint
    assert fast.init is not None and fast.init.path == REPO / "runs/recipes/jackal_noise/final/checkpoint.pt"
    fast_cfg = fast.stage_config(fast.stages[0])
    assert fast_cfg.rewards.time.weight == -0.06 and fast_cfg.env.lidar.noise_beams == 10
    direct = load_recipe(REPO / "recipes/jackal_direct.yaml")  # the same start, shorter paths
    assert direct.init is not None and direct.init.path == fast.init.path
    direct_cfg = direct.stage_config(direct.stages[0])
    assert direct_cfg.rewards.near_obstacle.weight == -0.02 and direct_cfg.rewards.backward.weight == 0.0
    fov = load_recipe(REPO / "recipes/holonomic_270.yaml")  # holonomic_default's learn stage on a 270-degree lidar
    assert fov.init is not None and fov.init.iteration == 1499
    assert {fov.stage_config(s).env.lidar.fov_deg for s in fov.stages} == {270.0}
    quick = load_recipe(REPO / "recipes/holonomic_direct.yaml")  # holonomic_default's choice, faster among posts
    assert quick.init is not None and quick.init.path == REPO / "runs/recipes/holonomic_default/final/checkpoint.pt"
    quick_cfg = quick.stage_config(quick.stages[0])
    assert quick_cfg.rewards.near_obstacle.weight == -0.04 and quick_cfg.rewards.time.weight == -0.04
    assert quick_cfg.rewards.collision.weight == -20.0 and quick_cfg.env.worlds.families["clutter"] == 0.5
    steer = load_recipe(REPO / "recipes/holonomic_steer.yaml")  # holonomic_direct's last checkpoint, steered
    assert steer.init is not None and steer.init.iteration == 2150 and steer.init.path.is_file()
    steer_cfg = steer.stage_config(steer.stages[0])
    assert steer_cfg.env.guard.steer == 30.0 and steer_cfg.env.guard.sweep_lag == 0.06
    assert steer_cfg.rewards.time.weight == -0.04
    steer270 = load_recipe(REPO / "recipes/holonomic_270_steer.yaml")  # holonomic_270's kept policy, steered
    assert steer270.init is not None and steer270.init.path == REPO / "policies/holonomic_270/checkpoint.pt"
    steer270_cfg = steer270.stage_config(steer270.stages[0])
    assert steer270_cfg.env.lidar.fov_deg == 270.0 and steer270_cfg.env.guard.steer == 30.0
    assert steer270_cfg.env.guard.sweep_lag == 0.06 and steer270_cfg.env.guard.axis_brake


def test_a_recipe_reads_into_typed_stages(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, TINY))
    assert [s.name for s in recipe.stages] == ["first", "second"]
    assert recipe.stages[1].num_envs.cuda == 64 and recipe.stages[1].overrides == ["algorithm.desired_kl=0.005"]
    assert recipe.selection.score == {"success": 1.0, "collision": -3.0}  # the default rule
    assert recipe.evaluation.seed is None and recipe.suites.robustness is None
    assert len(recipe.sha256) == 64 and recipe.config_path == REPO / "conf" / "nav.yaml"


@pytest.mark.parametrize(
    "data, message",
    [
        ({**TINY, "stagez": []}, "unknown key 'stagez'"),
        (edited(stages__0__overides=[]), "unknown key 'stages[0].overides'"),
        (edited(selection__rule="max"), "unknown key 'selection.rule'"),
        (edited(suites={"robustness": {"episodes": 2, "row": ["nominal"]}}), "unknown key 'suites.robustness.row'"),
        ({k: v for k, v in TINY.items() if k != "selection"}, "needs selection"),
        (edited(stages__0__iterations="many"), "stages[0].iterations: expected an integer"),
        (edited(stages__0__iterations=0), "stages[0].iterations must be >= 1"),
        (edited(stages__1__name="first"), "'first' names two stages"),
        (edited(stages=[]), "at least one stage"),
        (edited(stages__0__overrides=["env.room.num_obstacle=[4,8]"]), "unknown key 'env.room.num_obstacle'"),
        (
            edited(stages__0__overrides=["runner.save_interval=10"]),
            "'runner.save_interval' is set by the recipe runner",
        ),
        (edited(overrides=["env.robot.base=jackal"]), "'env.robot.base' is set by the recipe's base"),
        (edited(selection__score={"succes": 1.0}), "unknown metric 'succes'"),
        (edited(selection__controller="robot"), "selection.controller must be one of policy, node, got 'robot'"),
        (edited(evaluation__controller="dwa"), "evaluation.controller must be one of policy, node, got 'dwa'"),
        (edited(suites={"families": {"episodes": 2, "rows": ["caves"]}}), "unknown row 'caves'"),
        (edited(suites={"robustness": {"episodes": 2, "rows": ["nominal", "*@3x"]}}), "unknown row(s) *@3x"),
        (edited(config="conf/none.yaml"), "no such file"),
        (edited(base="tank"), "env.robot.base"),
        (edited(selection__validation_seed=1000003), "share generator seeds"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_bad_recipe_is_one_line_naming_the_key(tmp_path: Path, data: dict, message: str) -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe(write(tmp_path, data))
    text = str(err.value)
    assert message in text and "\n" not in text and str(tmp_path) in text


def test_unreadable_recipes_are_named(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="recipe file not found"):
        load_recipe(tmp_path / "none.yaml")
    (tmp_path / "bad.yaml").write_text("name: [\n")
    with pytest.raises(RecipeError, match="not valid YAML at line"):
        load_recipe(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(RecipeError, match="a recipe is a mapping"):
        load_recipe(tmp_path / "list.yaml")


def test_seed_streams_that_share_a_generator_are_refused(tmp_path: Path) -> None:
    """Not only equal seeds: a validation seed whose noise generator is the evaluation's
    randomisation generator shares worlds' perturbations with it."""
    recipe = load_recipe(write(tmp_path, TINY))
    cfg = recipe.stage_config(recipe.stages[0])
    evaluation = cfg.runner.eval_seed
    for clash in (evaluation, evaluation + 104_729 - 7919, evaluation - 7):
        recipe.selection.validation_seed = clash
        with pytest.raises(RecipeError, match="share generator seeds"):
            check_seeds(recipe, cfg)
    recipe.selection.validation_seed = evaluation + 1
    check_seeds(recipe, cfg)
    recipe.seed = evaluation + 1 + 7919  # training's noise generator = validation's world generator + ...
    with pytest.raises(RecipeError, match="seed \\(training\\)"):
        check_seeds(recipe, cfg)


def test_every_generator_an_evaluation_seeds_is_in_its_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """SEED_OFFSETS lists every generator seed the evaluation derives from its seed (recorded on a
    real evaluation env), and the shipped validation and evaluation streams never meet."""
    from navtrain.evaluation import eval_env, run_rooms
    from support.simenv import nav_config

    seeded: list[int] = []

    class Recording(torch.Generator):
        def manual_seed(self, seed):  # noqa: ANN001, ANN201
            seeded.append(int(seed))
            return super().manual_seed(seed)

    monkeypatch.setattr(torch, "Generator", Recording)
    cfg = nav_config("env.episode_length_s=0.3")
    streams = {}
    for seed in (2000003, 1000003):
        seeded.clear()
        env, _ = eval_env(cfg, 2, seed, 2, "cpu")
        run_rooms(env, lambda obs, live: torch.zeros(2, 3), cfg, 2, seed, 0, "zero")
        streams[seed] = set(seeded)
        assert streams[seed] <= stream(seed) and seed in streams[seed], (seed, sorted(seeded))
    assert len(streams[1000003]) >= 3  # worlds, sensor noise, randomisation
    assert not streams[2000003] & streams[1000003]
    assert min(SEED_OFFSETS) == 0


def test_score_weighs_rates_and_a_plan_numbers_iterations_across_stages(tmp_path: Path) -> None:
    assert score({"success_rate": 0.9, "collision_rate": 0.05}, {"success": 1.0, "collision": -3.0}) == pytest.approx(
        0.75
    )
    recipe = load_recipe(write(tmp_path, TINY))
    plan = make_plan(recipe)
    assert [(s.first, s.last) for s in plan.stages] == [(0, 29), (30, 49)] and plan.every == 5
    smoke = make_plan(recipe, smoke=True)
    assert [(s.first, s.last) for s in smoke.stages] == [(0, 1), (2, 3)] and smoke.every == 1
    assert (
        smoke.stages[0].num_envs == {"cpu": 16, "cuda": 16} and "env.episode_length_s=1.0" in smoke.stages[1].overrides
    )
    scaled = make_plan(recipe, scale=0.1)
    assert [s.iterations for s in scaled.stages] == [3, 2]


def fine_tuning(tmp_path: Path, content: bytes = b"kept policy", **init) -> dict:
    """TINY with an ``init`` naming a kept file of ``content`` (its real sha256 unless given)."""
    kept = tmp_path / "kept.pt"
    kept.write_bytes(content)
    return {
        **TINY,
        "init": {"checkpoint": str(kept), "sha256": hashlib.sha256(content).hexdigest(), "iteration": 99, **init},
    }


def test_a_fine_tuning_recipe_numbers_its_stages_after_the_kept_checkpoint(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, fine_tuning(tmp_path)))
    assert recipe.init is not None and recipe.init.iteration == 99
    plan = make_plan(recipe)
    assert [(s.first, s.last) for s in plan.stages] == [(100, 129), (130, 149)]
    assert plan.init == {"checkpoint": str(tmp_path / "kept.pt"), "sha256": recipe.init.sha256, "iteration": 99}
    work = Work(tmp_path / "work")
    point = work.resume_point(plan, 0)  # the first stage goes on from the kept checkpoint
    assert (point.remaining, point.resume_from, point.done_iterations) == (30, tmp_path / "kept.pt", 0)
    touch(work, plan.stages[0], 1, "model_29.pt", "model_110.pt")  # 29: not of this plan's iterations
    point = work.resume_point(plan, 0)
    assert point.resume_from.name == "model_110.pt" and point.remaining == 19 and point.done_iterations == 11
    assert make_plan(load_recipe(write(tmp_path, TINY))).init is None  # from scratch


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sha256": "0" * 64}, "not the checkpoint this recipe fine-tunes"),
        ({"sha256": "abc"}, "init.sha256 must be 64 lowercase hex digits"),
        ({"iteration": -1}, "init.iteration must be >= 0"),
        ({"checkpoint": "policies/none/checkpoint.pt"}, "init.checkpoint: no such file"),
        ({"iter": 3}, "unknown key 'init.iter'"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_fine_tuning_recipe_refuses_another_checkpoint(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe(write(tmp_path, fine_tuning(tmp_path, **change)))
    assert message in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------------
# Where a stage resumes: work folders of hand-made checkpoint files (only their names count)


def touch(work: Work, stage, part: int, *names: str) -> None:
    folder = work.stage_dir(stage) / "nav" / f"2026-01-01_00-00-0{part}_part{part}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")


def test_a_stage_resumes_from_its_checkpoint_of_the_highest_iteration(tmp_path: Path) -> None:
    plan = make_plan(load_recipe(write(tmp_path, TINY)))
    first, second = plan.stages
    work = Work(tmp_path / "work")
    point = work.resume_point(plan, 0)
    assert (point.remaining, point.resume_from, point.done_iterations) == (30, None, 0)
    touch(work, first, 1, "model_0_interrupted.pt", "model_latest.pt")  # may be untrained: not a resume point
    assert work.resume_point(plan, 0).resume_from is None
    touch(work, first, 1, "model_0.pt", "model_5.pt", "model_7_interrupted.pt")  # killed, then interrupted
    point = work.resume_point(plan, 0)
    assert point.resume_from.name == "model_7_interrupted.pt" and point.remaining == 22 and point.done_iterations == 8
    touch(work, first, 2, "model_10.pt", "model_29.pt")
    assert work.resume_point(plan, 0).remaining == 0
    point = work.resume_point(plan, 1)  # the next stage starts from the first one's last checkpoint
    assert point.resume_from.name == "model_29.pt" and point.remaining == 20 and point.done_iterations == 0
    assert work.current(plan) == (1, point)
    touch(work, second, 1, "model_29_interrupted.pt")  # interrupted before its first update: not its own
    assert work.resume_point(plan, 1) == point
    touch(work, second, 1, "model_35.pt", "model_40.pt", "model_40_interrupted.pt")
    latest = work.latest(second)
    assert latest.iteration == 40 and not latest.interrupted
    assert work.resume_point(plan, 1).remaining == 9
    touch(work, second, 2, "model_49.pt")
    assert work.current(plan) is None


def test_a_later_stage_needs_the_earlier_one_done(tmp_path: Path) -> None:
    plan = make_plan(load_recipe(write(tmp_path, TINY)))
    with pytest.raises(RecipeError, match="stage 'first' has not ended"):
        Work(tmp_path / "w").resume_point(plan, 1)


def test_a_work_folder_of_another_plan_is_refused(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, TINY))
    work = Work(tmp_path / "work")
    work.open(make_plan(recipe), recipe.path, recipe.sha256)
    work.state["parts"].append({"stage": "first", "ended": None})
    work.save()
    reopened = Work(tmp_path / "work")
    reopened.open(make_plan(recipe), recipe.path, recipe.sha256)  # the same plan goes on
    assert reopened.state["parts"][0]["ended"].startswith("unknown")  # a part whose process was killed
    with pytest.raises(RecipeError, match="holds another plan .*smoke False vs True"):
        Work(tmp_path / "work").open(make_plan(recipe, smoke=True), recipe.path, recipe.sha256)
    with pytest.raises(RecipeError, match="stage 'first' iterations 30 vs 3"):
        Work(tmp_path / "work").open(make_plan(recipe, scale=0.1), recipe.path, recipe.sha256)


def test_a_stage_that_has_not_started_may_change(tmp_path: Path) -> None:
    """Once the first stage has run a part, the second (not started) may take other overrides and
    iterations; the first may not change, and neither may the second once it has started."""
    recipe = load_recipe(write(tmp_path, TINY))
    work = Work(tmp_path / "work")
    work.open(make_plan(recipe), recipe.path, recipe.sha256)
    work.state["parts"].append({"stage": "first", "ended": "2026-01-01"})
    work.save()
    changed = load_recipe(write(tmp_path, edited(stages__1__iterations=40, stages__1__overrides=[]), "c.yaml"))
    reopened = Work(tmp_path / "work")
    reopened.open(make_plan(changed), changed.path, changed.sha256)
    second = reopened.state["plan"]["stages"][1]
    assert second["iterations"] == 40 and second["last"] == 69
    assert "algorithm.desired_kl=0.005" not in second["overrides"]
    (change,) = reopened.state["plan_changes"]
    assert any("stage 'second' iterations 20 vs 40" in c for c in change["changes"])
    assert json.loads((tmp_path / "work" / "state.json").read_text())["plan"] == make_plan(changed).to_dict()
    with pytest.raises(RecipeError, match="stage 'first' iterations 30 vs 3"):
        Work(tmp_path / "work").open(make_plan(changed, scale=0.1), changed.path, changed.sha256)
    reopened.state["parts"].append({"stage": "second", "ended": None})
    reopened.save()
    with pytest.raises(RecipeError, match="stage 'second' iterations 40 vs 20"):
        Work(tmp_path / "work").open(make_plan(recipe), recipe.path, recipe.sha256)


def test_one_process_works_in_a_folder(tmp_path: Path) -> None:
    work = Work(tmp_path / "work")
    with work.locked():
        assert work.running_pid() is not None
        with pytest.raises(RecipeError, match="another nav-recipe"):
            with Work(tmp_path / "work").locked():
                pass
    assert work.running_pid() is None


def test_nav_recipe_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from navtrain.recipe_cli import main

    assert main(["run", str(tmp_path / "none.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nav-recipe: recipe file not found") and err.count("\n") == 1
    assert main(["run", str(write(tmp_path, {**TINY, "stagez": []}))]) == 2
    assert "unknown key 'stagez'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ex:
        main(["run", str(write(tmp_path, TINY)), "--smoke", "--stage-iterations-scale", "2"])
    assert ex.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert main(["status", str(write(tmp_path, TINY)), "--work", str(tmp_path / "w")]) == 0
    assert "not started" in capsys.readouterr().out
