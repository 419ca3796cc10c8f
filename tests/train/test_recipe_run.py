"""nav-recipe end to end with --smoke (2 iterations per stage, 16 CPU worlds, a few episodes), in
this process: a run writes the bundle, checkpoint, evaluation, suites and provenance; a second run
of a finished recipe trains nothing and writes the same policy; a run stopped by SIGTERM right
after the first stage's first checkpoint resumes from it and ends with the same iterations and env
steps as the uninterrupted run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

import navtrain.runner
from navtrain.checkpoint import check_resume, load_checkpoint
from navtrain.recipe import load_recipe, make_plan
from navtrain.recipe_cli import main
from support.paths import REPO
from support.recipes import tiny_recipe

pytestmark = pytest.mark.slow

RECIPE = tiny_recipe(seed=3, first_iterations=40, every=10, validation_episodes=50, episodes=100, suite_episodes=100)
SMOKE_ITERATIONS = [2, 2]
WORLDS, STEPS = 16, 4  # navtrain.recipe.SMOKE_WORLDS, runner.num_steps_per_env of SMOKE_OVERRIDES


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_recipe(folder: Path, **changes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump({**RECIPE, **changes}, sort_keys=False))
    return path


def run(recipe: Path, root: Path) -> int:
    return main(
        ["run", str(recipe), "--smoke", "--device", "cpu", "--work", str(root / "work"), "--out", str(root / "out")]
    )


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One torch thread throughout: nav-train's first PPO update of each part runs on every core
    (navtrain.runner.ThreadPhases measures them), which costs ~8 s on a busy 2-core machine; these
    tests are about the recipe, not the thread choice."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch, "set_num_threads", lambda n: None)
        yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    root = tmp_path_factory.mktemp("recipe")
    recipe = write_recipe(root)
    return recipe, root, run(recipe, root)


def test_a_smoke_run_writes_the_policy_with_its_provenance(smoke) -> None:
    recipe, root, code = smoke
    assert code == 0
    out = root / "out"
    for name in ("checkpoint.pt", "bundle/policy.onnx", "bundle/contract.json", "evaluation.json", "README.md"):
        assert (out / name).is_file(), name
    for suite in ("robustness", "families", "compare"):
        assert {p.name for p in out.glob(f"{suite}.*")} == {f"{suite}.json", f"{suite}.md", f"{suite}.png"}
    compared = json.loads((out / "compare.json").read_text())  # the bundle's drivers behind the node's gate
    assert list(compared["rows"]) == ["rooms"] and compared["node_gate"]
    assert compared["bundle"] == str(root / "work/final/bundle") and compared["seed"] == 1000003
    assert {r["episodes"] for r in compared["rows"]["rooms"]["results"].values()} == {2}
    prov = json.loads((out / "PROVENANCE.json").read_text())
    assert prov["recipe"]["sha256"] == sha256(recipe) and prov["recipe"]["path"] == str(recipe)
    assert len(prov["git"]["commit"]) == 40 and prov["smoke"] is True
    assert [s["iterations"] for s in prov["stages"]] == SMOKE_ITERATIONS
    assert [s["env_steps"] for s in prov["stages"]] == [n * WORLDS * STEPS for n in SMOKE_ITERATIONS]
    assert all(s["devices"] == [f"cpu (CPU, {os.cpu_count()} cores)"] and s["train_s"] > 0 for s in prov["stages"])
    # the checkpoint: named by hash in the provenance and the bundle, and fine-tunable
    digest = sha256(out / "checkpoint.pt")
    contract = json.loads((out / "bundle/contract.json").read_text())
    assert prov["checkpoint"]["sha256"] == digest == contract["source"]["checkpoint_sha256"]
    assert prov["checkpoint"]["bytes"] < 4_000_000
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert ckpt["iter"] == prov["checkpoint"]["iteration"] == prov["selection"]["chosen_iteration"]
    check_resume(out / "checkpoint.pt", load_recipe(recipe).stage_config(load_recipe(recipe).stages[-1], smoke=True))
    # the choice: every checkpoint of the last stage (every iteration in a smoke run), ties to the later
    table = prov["selection"]["table"]
    assert [r["iteration"] for r in table] == [2, 3] and sum(r["chosen"] for r in table) == 1
    best = max(r["score"] for r in table)
    assert [r for r in table if r["chosen"]][0]["iteration"] == max(r["iteration"] for r in table if r["score"] == best)
    assert prov["selection"]["validation_seed"] == 2000003 and prov["evaluation"]["seed"] == 1000003
    ev = prov["evaluation"]
    assert ev["episodes"] == 4 and ev["success_interval"][0] <= ev["success_rate"] <= ev["success_interval"][1]
    assert prov["bundle"]["files"]["policy.onnx"] == sha256(out / "bundle/policy.onnx")


def test_selection_behind_the_node_gate_exports_each_candidate(smoke, tmp_path: Path) -> None:
    """``selection.controller: node``: each candidate is exported to a bundle in the work folder and
    driven behind the node's gate; its result is what nav-evaluate --node gives for that bundle, and
    the choice records the controller."""
    from navdeploy.node_params import NodeParams
    from navtrain.evaluation import evaluate_controller
    from navtrain.recipe_finish import select
    from navtrain.recipe_work import Work

    recipe_path, root, code = smoke
    assert code == 0
    shutil.copytree(root / "work", tmp_path / "work")
    recipe = load_recipe(write_recipe(tmp_path, selection={**RECIPE["selection"], "controller": "node"}))
    plan = make_plan(recipe, smoke=True)
    work = Work(tmp_path / "work")
    chosen, table = select(recipe, plan, work, "cpu")
    bundles = sorted((tmp_path / "work/validation_bundles").iterdir())
    assert len(bundles) == len(table) == 2 and all((b / "policy.onnx").is_file() for b in bundles)
    cache = json.loads((tmp_path / "work/validation.json").read_text())
    assert {e["key"]["controller"] for e in cache.values()} == {"node"}
    row = table[-1]
    bundle = tmp_path / "work/validation_bundles" / row["sha256"][:12]
    again, _ = evaluate_controller(bundle, "policy", episodes=4, seed=2000003, plot_rooms=0, node=NodeParams())
    assert again.success_rate == row["success"] and "node's gate" in again.controller
    assert sum(r["chosen"] for r in table) == 1 and chosen.iteration in [r["iteration"] for r in table]


def test_evaluation_behind_the_node_gate_drives_the_exported_bundle(smoke, tmp_path: Path) -> None:
    """``evaluation.controller: node``: the evaluation and the robustness suite drive the exported
    bundle behind the node's gate; a rerun with the other controller evaluates again."""
    recipe_path, root, code = smoke
    assert code == 0
    shutil.copytree(root / "work", tmp_path / "work")
    suites = {"robustness": {"episodes": 2}}
    recipe = write_recipe(tmp_path, evaluation={**RECIPE["evaluation"], "controller": "node"}, suites=suites)
    assert run(recipe, tmp_path) == 0
    ev = json.loads((tmp_path / "out/evaluation.json").read_text())
    rob = json.loads((tmp_path / "out/robustness.json").read_text())
    assert "node's gate" in ev["controller"] and ev["episodes"] == 4
    assert all("node's gate" in label for label in rob["policies"])
    assert "node's gate" in (tmp_path / "out/README.md").read_text()
    plain = write_recipe(tmp_path, suites=suites)
    assert run(plain, tmp_path) == 0
    assert "checkpoint" in json.loads((tmp_path / "out/evaluation.json").read_text())["controller"]


def test_a_finished_recipe_run_again_trains_nothing_and_writes_the_same_policy(smoke, capsys) -> None:
    recipe, root, code = smoke
    assert code == 0
    state = json.loads((root / "work/state.json").read_text())
    before = sha256(root / "out/checkpoint.pt")
    assert run(recipe, root) == 0
    again = json.loads((root / "work/state.json").read_text())
    assert len(again["parts"]) == len(state["parts"]) == 2
    assert sha256(root / "out/checkpoint.pt") == before
    capsys.readouterr()
    assert main(["status", str(recipe), "--smoke", "--work", str(root / "work")]) == 0
    text = capsys.readouterr().out
    assert "finished" in text and "stage 1/2 first: 2/2 iterations" in text and "stage 2/2 second: 2/2" in text
    assert "validated 2 candidate(s)" in text and f"chose checkpoint sha256 {before[:12]}; evaluated" in text
    for suite, row in (("robustness", "nominal"), ("families", "rooms"), ("compare", "rooms")):
        assert f"suite {suite}: 1 row(s) kept ({row})" in text


def test_a_fine_tuning_recipe_goes_on_from_the_kept_policy(smoke, tmp_path: Path) -> None:
    """A recipe whose ``init`` names the smoke run's kept checkpoint trains on from it: its stages
    number their iterations after it, and the provenance names it by hash."""
    recipe, root, code = smoke
    assert code == 0
    kept = root / "out/checkpoint.pt"
    start = load_checkpoint(kept)["iter"]
    init = {"checkpoint": str(kept), "sha256": sha256(kept), "iteration": start}
    tuned = write_recipe(tmp_path, name="tiny_tuned", init=init)
    assert run(tuned, tmp_path) == 0
    prov = json.loads((tmp_path / "out/PROVENANCE.json").read_text())
    assert prov["init"] == init
    assert [s["first_iteration"] for s in prov["stages"]] == [start + 1, start + 1 + SMOKE_ITERATIONS[0]]
    state = json.loads((tmp_path / "work/state.json").read_text())
    assert state["parts"][0]["resume_from"] == str(kept) and state["parts"][0]["start_iteration"] == start + 1
    assert load_checkpoint(tmp_path / "out/checkpoint.pt")["iter"] > start
    assert f"Fine-tuned from `{kept}`" in (tmp_path / "out/README.md").read_text()


def test_an_interrupted_run_resumes_from_its_checkpoint(smoke, tmp_path: Path, monkeypatch, capsys) -> None:
    """SIGTERM while the first stage's first checkpoint is written: nav-train finishes the write,
    the run exits 130, and the next run trains only what is left of each stage."""
    reference = json.loads((smoke[1] / "out/PROVENANCE.json").read_text())
    recipe = write_recipe(tmp_path, suites={})
    save = navtrain.runner.atomic_torch_save
    sent = []

    def save_and_stop(obj, path):  # noqa: ANN001, ANN202
        save(obj, path)
        if Path(path).name == "model_0.pt" and not sent:
            sent.append(path)
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(navtrain.runner, "atomic_torch_save", save_and_stop)
    assert run(recipe, tmp_path) == 130
    assert sent and not (tmp_path / "out").exists()
    capsys.readouterr()
    assert main(["status", str(recipe), "--smoke", "--work", str(tmp_path / "work")]) == 0
    text = capsys.readouterr().out
    assert "stopped" in text and "stage 'first' at iteration 1" in text and "stage 1/2 first: 1/2 iterations" in text
    monkeypatch.setattr(navtrain.runner, "atomic_torch_save", save)
    assert run(recipe, tmp_path) == 0

    prov = json.loads((tmp_path / "out/PROVENANCE.json").read_text())
    first, second = prov["stages"]
    assert [(p["iterations"], p["first_iteration"], p["exit"]) for p in first["parts"]] == [(1, 0, 130), (1, 1, 0)]
    assert first["parts"][1]["resume_from"].endswith("model_0.pt")
    assert [s["iterations"] for s in prov["stages"]] == [s["iterations"] for s in reference["stages"]]
    assert [s["env_steps"] for s in prov["stages"]] == [s["env_steps"] for s in reference["stages"]]
    plan = make_plan(load_recipe(recipe), smoke=True)
    assert [r["iteration"] for r in prov["selection"]["table"]][-1] == plan.last_iteration
    assert load_checkpoint(tmp_path / "work/final/checkpoint.pt")["iter"] == prov["checkpoint"]["iteration"]
    assert not (tmp_path / "out/robustness.json").exists()


def test_the_policy_is_published_before_its_suites_and_again_as_each_ends(
    smoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped in its last suite, a run has already written the bundle, the checkpoint and a
    provenance that names that suite pending (and the earlier one done); run again, it runs that
    suite (and rebuilds the earlier one's files from its kept rows where they are gone) and ends
    with the same policy."""
    import navtrain.recipe_finish as finish

    recipe = write_recipe(tmp_path, suites={"robustness": RECIPE["suites"]["robustness"], "compare": {"episodes": 100}})
    real = finish.run_suite

    def stop_at_compare(name, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if name == "compare":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(finish, "run_suite", stop_at_compare)
    assert run(recipe, tmp_path) == 130
    out = tmp_path / "out"
    prov = json.loads((out / "PROVENANCE.json").read_text())
    assert {k: s["status"] for k, s in prov["suites"].items()} == {"robustness": "done", "compare": "pending"}
    assert (out / "bundle/policy.onnx").is_file() and (out / "robustness.md").is_file()
    assert not (out / "compare.json").exists()
    assert (
        "Suite `compare`: 2 worlds per row" in (out / "README.md").read_text()
        and "still to run" in (out / "README.md").read_text()
    )
    bundle = sha256(out / "bundle/policy.onnx")
    (tmp_path / "work/final/robustness.json").unlink()  # a checkout that keeps only the suite's rows
    ran = []
    monkeypatch.setattr(finish, "run_suite", lambda name, *a, **k: (ran.append(name), real(name, *a, **k)))
    assert run(recipe, tmp_path) == 0
    prov = json.loads((out / "PROVENANCE.json").read_text())
    assert ran == ["robustness", "compare"] and {s["status"] for s in prov["suites"].values()} == {"done"}
    assert sha256(out / "bundle/policy.onnx") == bundle and (out / "compare.json").is_file()


def test_nav_recipe_runs_as_a_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "navtrain.recipe_cli", "--help"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0 and "nav-recipe run RECIPE.yaml" in proc.stdout


def test_status_shows_a_row_s_kept_part_until_the_row_is_whole(tmp_path: Path) -> None:
    """A comparison keeps each driver's half of a row: the status counts whole rows and names the
    parts of rows still in progress."""
    from navtrain.recipe_cli import after_training

    (tmp_path / "final").mkdir()
    rows = {"rooms": {}, "rooms#policy": {}, "rooms#dwa": {}, "clutter#policy": {}}
    (tmp_path / "final" / "compare_rows.json").write_text(json.dumps({"key": {}, "rows": rows}))
    assert after_training(tmp_path) == ["suite compare: 1 row(s) kept (rooms); parts of rows: clutter#policy"]
