"""nav-recipe: rebuild a shipped policy from its recipe, resumably.

    nav-recipe run RECIPE.yaml [--device auto|cpu|cuda] [--work DIR] [--out DIR]
                               [--smoke | --stage-iterations-scale F]
    nav-recipe status RECIPE.yaml [--work DIR] [--smoke | --stage-iterations-scale F]

``run`` trains the recipe's stages in order (nav-train in this process), then chooses the
checkpoint on validation worlds, exports it, evaluates it, runs the recipe's suites and writes the
bundle, ``checkpoint.pt``, the evaluation and ``PROVENANCE.json`` into the recipe's ``out`` folder
(``--out`` another). Its state lives in the work folder (default ``runs/recipes/<name>/``); after
any interruption (SIGINT, SIGTERM, a killed process) the same command goes on from the last
checkpoint of the stage it was in. ``status`` prints where a run stands. ``--smoke`` runs every
stage for 2 iterations on 16 worlds and validates, evaluates and runs each suite's first row on a
few worlds (its own work folder, ``<name>_smoke``): the whole pipeline in a minute.
``--stage-iterations-scale F`` multiplies every stage's iterations by F (work folder
``<name>_x<F>``). The recipe format is ``navtrain.recipe``'s; ``docs/training.md`` (Recipes) says
which recipe makes which policy and how long it takes.

A bad recipe, a work folder of another plan, or one another nav-recipe works in is one line on
stderr and exit code 2; an interruption exits 130 and keeps everything done.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from navsim.config_load import REPO_ROOT
from navtrain.cli import EXIT_USAGE, CliError, OneLineParser, check_can_create, positive_float, report
from navtrain.recipe import Plan, Recipe, RecipeError, changes_before_start, load_recipe, make_plan, resolve
from navtrain.row_log import whole_and_parts

TOOL = "nav-recipe"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = OneLineParser(prog=TOOL, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    run = sub.add_parser("run", help="train, choose, export, evaluate; resumes", prog=f"{TOOL} run")
    status = sub.add_parser("status", help="where a run stands", prog=f"{TOOL} status")
    for q in (run, status):
        q.add_argument("recipe", help="the recipe file, e.g. recipes/jackal_default.yaml")
        q.add_argument("--work", default=None, help="work folder (default runs/recipes/<name>[_smoke|_x<F>])")
        size = q.add_mutually_exclusive_group()
        size.add_argument("--smoke", action="store_true", help="every stage 2 iterations on 16 worlds, few episodes")
        size.add_argument("--stage-iterations-scale", type=positive_float, default=1.0, metavar="F")
    run.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    run.add_argument("--out", default=None, help="result folder (default: the recipe's out)")
    return p.parse_args(argv)


def work_folder(recipe: Recipe, args: argparse.Namespace) -> Path:
    if args.work is not None:
        return Path(args.work).absolute()
    suffix = (
        "_smoke" if args.smoke else (f"_x{args.stage_iterations_scale:g}" if args.stage_iterations_scale != 1 else "")
    )
    return REPO_ROOT / "runs" / "recipes" / f"{recipe.name}{suffix}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        recipe = load_recipe(args.recipe, check=args.command == "run")
        plan = make_plan(recipe, smoke=args.smoke, scale=args.stage_iterations_scale)
        if args.command == "status":
            return status(recipe, plan, work_folder(recipe, args))
        return run(recipe, plan, args)
    except (RecipeError, CliError) as err:
        report(TOOL, err)
        return EXIT_USAGE


def run(recipe: Recipe, plan: Plan, args: argparse.Namespace) -> int:
    from navtrain.recipe_run import run_recipe
    from navtrain.recipe_work import Work
    from navtrain.train_cli import pick_device

    device = pick_device(args.device)
    out = Path(args.out).absolute() if args.out is not None else resolve(recipe.out)
    check_can_create(out, "the result folder")
    work = Work(work_folder(recipe, args))
    check_can_create(work.root, "the work folder")
    return run_recipe(recipe, plan, work, device, out)


def status(recipe: Recipe, plan: Plan, root: Path) -> int:
    """Print where the run of ``plan`` in ``root`` stands."""
    from navtrain.recipe_work import Work

    work = Work(root)
    print(f"recipe {recipe.name} ({recipe.path}); work folder {root}")
    state = work.read_state()
    if state is None:
        print(f"not started: `{TOOL} run {recipe.path}` starts it")
        return 0
    work.state = state
    started = {part["stage"] for part in state.get("parts", [])}
    diffs, later = changes_before_start(state.get("plan", {}), plan.to_dict(), started)
    if diffs:
        print(f"the work folder holds another plan: {'; '.join(diffs[:3])}")
        return 0
    if later:
        print(f"stages not started yet changed in the recipe (taken at the next run): {'; '.join(later)}")
    pid = work.running_pid()
    finished = state.get("finished")
    if pid is not None:
        print(f"running (pid {pid})")
    elif finished:
        print(f"finished {finished['at']}: {finished['out']}")
    else:
        current = work.current(plan)
        where = (
            "choosing, exporting and evaluating"
            if current is None
            else (
                f"stage '{plan.stages[current[0]].name}' at iteration {plan.stages[current[0]].last - current[1].remaining + 1}"
            )
        )
        print(f"stopped: `{TOOL} run {recipe.path}` goes on with {where}")
    for i, stage in enumerate(plan.stages):
        latest = work.latest(stage)
        done = 0 if latest is None else latest.iteration - stage.first + 1
        where = "" if latest is None else f", last checkpoint {latest.path.relative_to(root)} ({age(latest.path)})"
        print(f"stage {i + 1}/{len(plan.stages)} {stage.name}: {done}/{stage.iterations} iterations{where}")
    parts = state.get("parts", [])
    wall = sum(p["wall_s"] for p in parts if p.get("wall_s") is not None)
    running = [p for p in parts if p.get("ended") is None and pid is not None]
    wall += sum(time.time() - p["started_unix"] for p in running if "started_unix" in p)
    killed = sum(1 for p in parts if p.get("exit") is None and (p.get("ended") is not None or pid is None))
    note = f" ({killed} part(s) killed: time unknown)" if killed else ""
    spent = f"{wall / 3600:.2f} h" if wall >= 3600 else f"{wall / 60:.1f} min"
    print(f"elapsed training {spent} in {len(parts)} part(s) since {state.get('started')}{note}")
    for line in after_training(root):
        print(line)
    return 0


def after_training(root: Path) -> list[str]:
    """What the work folder holds of the steps after training: candidates validated, the choice,
    the evaluation, and each suite's rows kept so far (a suite stopped part way goes on from them)."""
    from navtrain.recipe_finish import SUITES

    lines = []
    found = {}
    for name, path in (("validation", root / "validation.json"), ("steps", root / "final" / "steps.json")):
        try:
            found[name] = json.loads(path.read_text())
        except (OSError, ValueError):
            found[name] = None
    if isinstance(found["validation"], dict) and found["validation"]:
        lines.append(f"validated {len(found['validation'])} candidate(s) (validation.json)")
    steps = found["steps"] if isinstance(found["steps"], dict) else {}
    if steps.get("checkpoint_sha256"):
        done = "evaluated" if "evaluation" in steps else "not evaluated yet"
        ended = [name for name in SUITES if name in steps]
        if ended:
            done += f"; suites ended: {', '.join(ended)}"
        lines.append(f"chose checkpoint sha256 {str(steps['checkpoint_sha256'])[:12]}; {done}")
    for path in sorted((root / "final").glob("*_rows.json")):
        try:
            rows = json.loads(path.read_text()).get("rows", {})
        except (OSError, ValueError, AttributeError):
            continue
        suite = path.name.removesuffix("_rows.json")
        whole, parts = whole_and_parts(list(rows))
        line = f"suite {suite}: {len(whole)} row(s) kept ({', '.join(whole)})"
        lines.append(line + (f"; parts of rows: {', '.join(parts)}" if parts else ""))
    return lines


def age(path: Path) -> str:
    minutes = (time.time() - path.stat().st_mtime) / 60
    return f"saved {minutes:.0f} min ago" if minutes < 120 else f"saved {minutes / 60:.1f} h ago"


if __name__ == "__main__":
    sys.exit(main())
