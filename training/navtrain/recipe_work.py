"""The work folder of a recipe run: what has been trained, where it stands, where it resumes.

Layout (``runs/recipes/<name>/`` by default; ``runs/`` is ignored by git)::

    state.json            the plan (navtrain.recipe.Plan) and every training part run so far
    lock                  held (flock) by the nav-recipe process working here
    stages/<k>_<stage>/   nav-train's run folders of that stage, one per part
                          (<experiment>/<stamp>_part<j>/model_<it>.pt, model_<it>_interrupted.pt)
    validation.json       the validation result of every candidate checkpoint (kept across runs)
    final/                the chosen policy: checkpoint.pt, bundle/, evaluation and suites, provenance

A *part* is one nav-train process of a stage; a stage that was interrupted (SIGINT, SIGTERM, a killed
process) continues in a new part from its checkpoint of the highest iteration
(:meth:`Work.resume_point`). Iterations are numbered across stages as rsl_rl numbers them (a stage
resumes the previous stage's last checkpoint), so stage k runs iterations ``first``..``last`` of
its :class:`navtrain.recipe.PlannedStage`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from navsim.config_load import REPO_ROOT
from navtrain.recipe import Plan, PlannedStage, RecipeError, changes_before_start

STATE_FORMAT = "nav_policy.recipe_state"
LOG = "[recipe]"
CHECKPOINT = re.compile(r"^model_(\d+)(_interrupted)?\.pt$")


@dataclass(frozen=True)
class Checkpoint:
    iteration: int
    path: Path
    interrupted: bool


@dataclass(frozen=True)
class ResumePoint:
    """Where a stage goes on: ``remaining`` iterations from ``resume_from`` (None: a fresh run);
    ``remaining`` 0 when the stage is done."""

    remaining: int
    resume_from: Path | None
    done_iterations: int


def say(message: str) -> None:
    """A progress line of nav-recipe."""
    print(f"{LOG} {message}", flush=True)


def rel(path: str | Path, root: Path) -> str:
    """``path`` relative to ``root`` where it lies below it, else as it is."""
    path = Path(path)
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def git_commit() -> dict[str, Any]:
    """The repository's commit and whether tracked files differ from it (None where git cannot tell)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class Work:
    """A recipe's work folder (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()
        self.state_path = self.root / "state.json"
        self.state: dict[str, Any] = {}

    # State ----------------------------------------------------------------------------------
    def read_state(self) -> dict[str, Any] | None:
        if not self.state_path.is_file():
            return None
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError) as err:
            raise RecipeError(f"{self.state_path} is not readable state ({err}); give another --work") from None
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise RecipeError(f"{self.state_path} is not a recipe state file; give another --work")
        return state

    def open(self, plan: Plan, recipe_path: str, recipe_sha256: str) -> None:
        """Start or continue this folder for ``plan``; a folder of another plan is refused, except for
        stages that have not started (:func:`navtrain.recipe.changes_before_start`): those take
        ``plan``'s, and the state keeps what changed (``plan_changes``)."""
        state = self.read_state()
        if state is None:
            self.root.mkdir(parents=True, exist_ok=True)
            state = {"format": STATE_FORMAT, "plan": plan.to_dict(), "started": now(), "parts": []}
        else:
            started = {part["stage"] for part in state.get("parts", [])}
            refused, allowed = changes_before_start(state.get("plan", {}), plan.to_dict(), started)
            if refused:
                raise RecipeError(
                    f"the work folder {self.root} holds another plan ({'; '.join(refused[:3])}); "
                    "give another --work or remove that folder"
                )
            if allowed:  # stages that have not started yet take the recipe as it is now
                say(f"stages not started yet changed: {'; '.join(allowed)}")
                state.setdefault("plan_changes", []).append({"at": now(), "changes": allowed})
                state["plan"] = plan.to_dict()
            for part in state["parts"]:
                if part.get("ended") is None:
                    part["ended"], part["exit"] = "unknown (the process was killed)", None
        state["recipe"] = {"path": recipe_path, "sha256": recipe_sha256}
        self.state = state
        self.save()

    def save(self) -> None:
        atomic_write_text(self.state_path, json.dumps(self.state, indent=2) + "\n")

    def parts(self, stage: PlannedStage) -> list[dict[str, Any]]:
        return [p for p in self.state.get("parts", []) if p["stage"] == stage.name]

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's lock; another nav-recipe working here is a RecipeError."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "lock", "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = f.read().strip() or "?"
                raise RecipeError(f"another nav-recipe (pid {holder}) works in {self.root}") from None
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def running_pid(self) -> int | None:
        """The pid of a nav-recipe holding the lock, None when none does."""
        lock = self.root / "lock"
        if not lock.is_file():
            return None
        with open(lock, "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                text = f.read().strip()
                return int(text) if text.isdigit() else -1
            fcntl.flock(f, fcntl.LOCK_UN)
        return None

    # Checkpoints ----------------------------------------------------------------------------
    def stage_dir(self, stage: PlannedStage) -> Path:
        return self.root / "stages" / stage.folder

    def checkpoints(self, stage: PlannedStage) -> dict[int, Checkpoint]:
        """The stage's checkpoints by iteration (a regular one before an interrupted one of the same
        iteration); ``model_0_interrupted.pt`` of the first stage is left out (it may hold the
        untrained state of a run stopped before its first update)."""
        found: dict[int, Checkpoint] = {}
        folder = self.stage_dir(stage)
        if not folder.is_dir():
            return found
        for path in sorted(folder.glob("*/*/model_*.pt")):
            m = CHECKPOINT.match(path.name)
            if m is None:
                continue
            it, interrupted = int(m.group(1)), m.group(2) is not None
            if not stage.first <= it <= stage.last or (interrupted and it == 0):
                continue
            if it not in found or (found[it].interrupted and not interrupted):
                found[it] = Checkpoint(it, path, interrupted)
        return dict(sorted(found.items()))

    def latest(self, stage: PlannedStage) -> Checkpoint | None:
        found = self.checkpoints(stage)
        return found[max(found)] if found else None

    def final(self, stage: PlannedStage) -> Checkpoint | None:
        """The stage's checkpoint of its last iteration, once it has one."""
        return self.checkpoints(stage).get(stage.last)

    def resume_point(self, plan: Plan, index: int) -> ResumePoint:
        """Where stage ``index`` goes on (see :class:`ResumePoint`)."""
        stage = plan.stages[index]
        latest = self.latest(stage)
        if latest is not None:
            done = latest.iteration - stage.first + 1
            return ResumePoint(stage.last - latest.iteration, latest.path, done)
        if index == 0:  # from scratch, or from the checkpoint a fine-tuning recipe names
            return ResumePoint(stage.iterations, None if plan.init is None else Path(plan.init["checkpoint"]), 0)
        before = self.final(plan.stages[index - 1])
        if before is None:
            raise RecipeError(f"stage '{stage.name}' cannot start: stage '{plan.stages[index - 1].name}' has not ended")
        return ResumePoint(stage.iterations, before.path, 0)

    def current(self, plan: Plan) -> tuple[int, ResumePoint] | None:
        """The first stage that is not done and where it resumes; None when every stage is done."""
        for i in range(len(plan.stages)):
            point = self.resume_point(plan, i)
            if point.remaining > 0:
                return i, point
        return None
