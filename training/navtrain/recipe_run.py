"""Running a recipe: its stages with nav-train, then the choice, export, evaluation and provenance.

:func:`run_recipe` is ``nav-recipe run``. It takes the work folder's lock, checks that the folder
holds the same plan (:class:`navtrain.recipe.Plan`), and trains each stage that is not done in one
or more *parts*: ``navtrain.train_cli.main`` in this process, with ``--resume`` from the stage's
checkpoint of the highest iteration (or the previous stage's last one) and ``--max-iterations``
the iterations the stage still lacks, ``--no-eval --no-export``, and the recipe's keys
(``runner.log_root`` in the work folder, ``runner.save_interval`` = ``selection.every``,
``--seed``, ``--num-envs`` of the device). A SIGINT or SIGTERM stops nav-train at a consistent
point (it saves ``model_<it>_interrupted.pt``) and the run exits 130; the next ``nav-recipe run``
goes on from there. After the last stage :mod:`navtrain.recipe_finish` chooses, exports, evaluates
and writes the result.
"""

from __future__ import annotations

import gc
import signal
import time
from pathlib import Path
from typing import Any

from navtrain.cli import EXIT_INTERRUPTED, CliError
from navtrain.recipe import Plan, PlannedStage, Recipe
from navtrain.recipe_work import ResumePoint, Work, git_commit, now, rel, say, sha256


def device_kind(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def device_name(device: str) -> str:
    """The device in words: the GPU's name, or the CPU's core count."""
    import os

    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU, {os.cpu_count()} cores"


def train_argv(recipe: Recipe, plan: Plan, stage: PlannedStage, work: Work, device: str, point: ResumePoint) -> list:
    """nav-train's arguments for the next part of ``stage``."""
    part = len(work.parts(stage)) + 1
    argv = [
        "--config", str(recipe.config_path), "--device", device_kind(device),
        "--num-envs", str(stage.num_envs[device_kind(device)]), "--max-iterations", str(point.remaining),
        "--seed", str(plan.seed), "--run-name", f"part{part}", "--no-eval", "--no-export",
    ]  # fmt: skip
    if point.resume_from is not None:
        argv += ["--resume", str(point.resume_from)]
    argv += [*stage.overrides, f"runner.log_root={work.stage_dir(stage)}", f"runner.save_interval={plan.every}"]
    return argv


def train_stage(recipe: Recipe, plan: Plan, work: Work, index: int, point: ResumePoint, device: str) -> int:
    """One part of stage ``index``: nav-train from ``point``; its exit code."""
    from navtrain import train_cli

    stage = plan.stages[index]
    argv = train_argv(recipe, plan, stage, work, device, point)
    worlds = stage.num_envs[device_kind(device)]
    where = "from the start" if point.resume_from is None else f"from {rel(point.resume_from, work.root)}"
    say(
        f"stage {index + 1}/{len(plan.stages)} '{stage.name}': {point.done_iterations}/{stage.iterations} iterations "
        f"done; training {point.remaining} more on {worlds} worlds ({device}) {where}"
    )
    part: dict[str, Any] = {
        "stage": stage.name,
        "part": len(work.parts(stage)) + 1,
        "device": device,
        "device_name": device_name(device),
        "num_envs": worlds,
        "start_iteration": stage.last - point.remaining + 1,
        "resume_from": None if point.resume_from is None else rel(point.resume_from, work.root),
        "git": git_commit(),
        "config_sha256": sha256(recipe.config_path),
        "recipe_sha256": recipe.sha256,
        "started": now(),
        "started_unix": time.time(),
        "ended": None,
        "exit": None,
        "wall_s": None,
        "argv": argv,
    }
    work.state["parts"].append(part)
    work.save()
    t0 = time.time()
    code = None
    try:
        code = train_cli.main(argv)
    finally:
        part.update(ended=now(), exit=code if code is not None else "exception", wall_s=round(time.time() - t0, 1))
        work.save()
        gc.collect()  # the part's worlds and networks, before the next part builds its own
    return code


class Interrupts:
    """SIGINT and SIGTERM as KeyboardInterrupt outside nav-train (which installs its own handlers while
    it trains), so that choosing, evaluating and writing stop as training does. Both are installed
    whatever the process started with: a shell that starts a command in the background without job
    control (``nohup nav-recipe run ... &`` in a script) starts it with SIGINT ignored, and Python
    then leaves SIGINT ignored."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self) -> Interrupts:
        self.previous = {sig: signal.signal(sig, self._raise) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    @staticmethod
    def _raise(signum: int, frame: object) -> None:
        raise KeyboardInterrupt


def run_recipe(recipe: Recipe, plan: Plan, work: Work, device: str, out: Path) -> int:
    """``nav-recipe run``: train what is left, then choose, export, evaluate and write ``out``."""
    from navtrain.recipe_finish import finish

    t0 = time.time()
    with work.locked(), Interrupts():
        try:
            work.open(plan, recipe.path, recipe.sha256)
            say(
                f"{recipe.name}: {len(plan.stages)} stage(s), {plan.last_iteration + 1} iterations; work folder {work.root}"
            )
            while (current := work.current(plan)) is not None:
                index, point = current
                code = train_stage(recipe, plan, work, index, point, device)
                if code != 0:
                    if code == EXIT_INTERRUPTED:
                        say(f"interrupted; `nav-recipe run {recipe.path}` goes on from the last checkpoint")
                    return code
                if work.current(plan) == current:
                    raise CliError(f"stage '{plan.stages[index].name}' made no progress (see nav-train's output above)")
            say(f"every stage trained ({plan.last_iteration + 1} iterations)")
            finish(recipe, plan, work, device, out)
        except KeyboardInterrupt:
            say(f"interrupted; `nav-recipe run {recipe.path}` goes on where it stopped (what is done is kept)")
            return EXIT_INTERRUPTED
    say(f"done in {(time.time() - t0) / 60:.1f} min: {out}")
    return 0
