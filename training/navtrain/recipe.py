"""A recipe: the configuration that makes a shipped policy, read strictly.

A recipe file (YAML; ``recipes/*.yaml``) names the training config, the stages that train the
policy one after the other (each resumes from the last checkpoint of the one before), how the
checkpoint to ship is chosen on validation worlds, the evaluation worlds and suites it is measured
on, and the folder the result goes to. :func:`load_recipe` reads it into :class:`Recipe` with the
rules of the training config (``navsim.config_load.build``): a key no field declares is an error
naming it and where it sits (``stages[1].overides``), a missing required key too. Every check that
needs no world runs here, before anything is built: each stage's config with its overrides loads
(``navsim.config_load.load_config``), the overrides leave alone the keys the recipe sets itself, the
suite rows exist, and the validation, evaluation and training seeds are disjoint streams
(:func:`check_seeds`). A bad recipe is a :class:`RecipeError` with one line.

Relative paths in a recipe (``config``, ``out``) are relative to the repository root
(``navsim.config_load.REPO_ROOT``), wherever the command runs.

Seeds. A world stream is fixed by one seed: evaluation (``navtrain.evaluation.eval_env``) seeds the
world generator with it, the sensor noise with it + 7919, the randomisation with it + 104729 (and a
robot-side controller's map noise with it + 7); training seeds the same generators from
``env.seed``. Two streams share no generator when their seed sets (seed + :data:`SEED_OFFSETS`) are
disjoint; :func:`check_seeds` requires that of the validation, evaluation and training seeds, so a
checkpoint is never chosen on a world it is then evaluated on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from navsim.config import ConfigError, NavConfig
from navsim.config_load import REPO_ROOT, build, load_config

SEED_OFFSETS = (0, 7, 7919, 104_729)
"""What a stream's seed is offset by for each generator it seeds (see the module docstring)."""

SCORE_METRICS = {
    "success": "success_rate",
    "collision": "collision_rate",
    "timeout": "timeout_rate",
    "out_of_bounds": "out_of_bounds_rate",
    "spl": "spl",
}
"""Names a selection score may weigh -> the ``navtrain.evaluation.EvalResult`` field."""

SELECTION_CONTROLLERS = ("policy", "node")
"""What may drive the validation and evaluation worlds (:class:`Selection`, :class:`Evaluation`)."""

MANAGED_KEYS = ("runner.log_root", "runner.save_interval", "runner.run_name", "env.seed", "env.num_envs")
"""Config keys the recipe runner sets itself (work folder, ``selection.every``, part names,
``seed``, ``num_envs``): a stage override may not name them."""

SMOKE_ITERATIONS = 2
SMOKE_WORLDS = 16
SMOKE_EPISODES = 4
SMOKE_SUITE_EPISODES = 2
SMOKE_EXPORT_WORLDS = 256
SMOKE_OVERRIDES = (
    "runner.num_steps_per_env=4",
    "env.episode_length_s=1.0",
    "env.worlds.pool_size=2",
    "env.worlds.refresh_size=1",
)
"""What ``--smoke`` adds to every stage: short rollouts and 10-step episodes (which validation and
evaluation keep: they use the checkpoint's config), tiny planned-world pools. The export's
self-check then records its observations on :data:`SMOKE_EXPORT_WORLDS` worlds (4 steps)."""


class RecipeError(ValueError):
    """The recipe cannot be run; the message is one line naming the key or file."""


@dataclass
class NumEnvs:
    """Parallel worlds of a stage on each kind of device."""

    cpu: int
    cuda: int


@dataclass
class Stage:
    """One training run: ``iterations`` PPO iterations from where the previous stage ended."""

    name: str
    iterations: int
    num_envs: NumEnvs
    overrides: list[str] = field(default_factory=list)


@dataclass
class Selection:
    """How the checkpoint to ship is chosen: every ``every`` iterations of the last stage a
    checkpoint is kept; each runs ``validation_episodes`` worlds of ``validation_seed``'s stream
    (its training config, plus ``overrides``); the highest ``score`` (the sum of weight x rate of
    :data:`SCORE_METRICS`) wins, ties going to the later checkpoint.

    ``controller`` says what drives the validation worlds (:data:`SELECTION_CONTROLLERS`):
    ``policy``, the checkpoint's actor with the simulator's guard and smoother of training;
    ``node``, the checkpoint exported to a bundle and driven behind the node's own gate with
    ``policy_node``'s default parameters (scan rules, scan map, smoother, guard last), which is
    what a robot runs and costs a few times more CPU per world."""

    every: int
    validation_episodes: int
    validation_seed: int
    score: dict[str, float] = field(default_factory=lambda: {"success": 1.0, "collision": -3.0})
    overrides: list[str] = field(default_factory=list)
    controller: str = "policy"


@dataclass
class Evaluation:
    """The chosen policy's evaluation: ``episodes`` worlds of ``seed``'s stream (None: the config's
    ``runner.eval_seed``), with Wilson 95 % intervals. ``controller`` (:data:`SELECTION_CONTROLLERS`)
    says what drives the evaluation and the robustness and families suites: ``policy``, the
    checkpoint's actor with the simulator's guard and smoother; ``node``, the exported bundle behind
    the node's own gate (what the robot runs). The compare suite always runs behind the node's gate."""

    episodes: int
    seed: int | None = None
    controller: str = "policy"


@dataclass
class Suite:
    """A suite run on the chosen policy: ``episodes`` worlds per row, its rows (None: all of the
    suite's; for ``compare``, :data:`navtrain.compare.DEFAULT_ROWS`; robustness rows may be shell
    patterns, ``*@high``: every term at its trained end)."""

    episodes: int
    rows: list[str] | None = None


@dataclass
class Suites:
    robustness: Suite | None = None
    families: Suite | None = None
    compare: Suite | None = None
    """nav-compare on the exported bundle: policy and DWA behind the node's gate, family rows."""


@dataclass
class Init:
    """A kept checkpoint the first stage goes on from (fine-tuning a policy; a recipe without one
    trains from scratch): its path (relative to the repository root), its sha256 and the iteration
    it holds. The run refuses a file of another hash, so the policy is rebuilt from what was kept."""

    checkpoint: str
    sha256: str
    iteration: int

    @property
    def path(self) -> Path:
        return resolve(self.checkpoint)


@dataclass
class Recipe:
    name: str
    config: str
    seed: int
    stages: list[Stage]
    selection: Selection
    evaluation: Evaluation
    out: str
    base: str | None = None
    overrides: list[str] = field(default_factory=list)
    """Dotted config overrides of every stage (before the stage's own)."""
    description: str = ""
    init: Init | None = None
    """The checkpoint the first stage fine-tunes (None: from scratch)."""
    suites: Suites = field(default_factory=Suites)
    path: str = field(default="", metadata={"loaded": True})
    """The file it was read from (set by :func:`load_recipe`, not a key of the file)."""
    sha256: str = field(default="", metadata={"loaded": True})

    @property
    def config_path(self) -> Path:
        return resolve(self.config)

    @property
    def out_path(self) -> Path:
        return resolve(self.out)

    def base_overrides(self) -> list[str]:
        return [f"env.robot.base={self.base}"] if self.base else []

    def stage_overrides(self, stage: Stage, smoke: bool = False) -> list[str]:
        """The dotted overrides of a stage's training (the recipe's own keys are added by the runner)."""
        return [*self.base_overrides(), *self.overrides, *stage.overrides, *(SMOKE_OVERRIDES if smoke else ())]

    def stage_config(self, stage: Stage, smoke: bool = False) -> NavConfig:
        return load_config(self.config_path, self.stage_overrides(stage, smoke))


def resolve(path: str | Path) -> Path:
    """A recipe path: absolute as given, else relative to the repository root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else REPO_ROOT / p


FILE_KEYS = [f.name for f in dataclasses.fields(Recipe) if not f.metadata.get("loaded")]


def load_recipe(path: str | Path, check: bool = True) -> Recipe:
    """The recipe in ``path``, every key checked (and, with ``check``, its configs and seeds)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RecipeError(f"recipe file not found: {path}") from None
    except OSError as err:
        raise RecipeError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise RecipeError(
            f"{path}: not valid YAML{at}: {getattr(err, 'problem', None) or type(err).__name__}"
        ) from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of {', '.join(FILE_KEYS)}")
    loaded = [k for k in data if k not in FILE_KEYS]
    if loaded:
        raise RecipeError(f"{path}: unknown key '{loaded[0]}' (known here: {', '.join(sorted(FILE_KEYS))})")
    try:
        recipe = build(Recipe, data)
    except ConfigError as err:
        raise RecipeError(f"{path}: {err}") from None
    recipe.path = str(path)
    recipe.sha256 = hashlib.sha256(text.encode()).hexdigest()
    try:
        check_fields(recipe)
        if check:
            check_configs(recipe)
    except (RecipeError, ConfigError) as err:
        raise RecipeError(f"{path}: {err}") from None
    return recipe


def check_fields(recipe: Recipe) -> None:
    """Values a recipe needs in range, before any config is read."""
    if not recipe.name or not all(c.isalnum() or c in "_-." for c in recipe.name):
        raise RecipeError(f"name must be letters, digits, '_', '-' or '.', got {recipe.name!r}")
    if not recipe.stages:
        raise RecipeError("stages: at least one stage")
    names = [s.name for s in recipe.stages]
    check_managed("overrides", recipe.overrides)
    for i, stage in enumerate(recipe.stages):
        where = f"stages[{i}]"
        if not stage.name or not all(c.isalnum() or c in "_-" for c in stage.name):
            raise RecipeError(f"{where}.name must be letters, digits, '_' or '-', got {stage.name!r}")
        if names.count(stage.name) > 1:
            raise RecipeError(f"{where}.name '{stage.name}' names two stages")
        positive(f"{where}.iterations", stage.iterations)
        positive(f"{where}.num_envs.cpu", stage.num_envs.cpu)
        positive(f"{where}.num_envs.cuda", stage.num_envs.cuda)
        check_managed(f"{where}.overrides", stage.overrides)
    sel = recipe.selection
    positive("selection.every", sel.every)
    positive("selection.validation_episodes", sel.validation_episodes)
    if sel.controller not in SELECTION_CONTROLLERS:
        raise RecipeError(
            f"selection.controller must be one of {', '.join(SELECTION_CONTROLLERS)}, got {sel.controller!r}"
        )
    if not sel.score:
        raise RecipeError("selection.score: at least one weight")
    for name, weight in sel.score.items():
        if name not in SCORE_METRICS:
            raise RecipeError(f"selection.score: unknown metric '{name}' (known: {', '.join(SCORE_METRICS)})")
        if not math.isfinite(weight):
            raise RecipeError(f"selection.score.{name}: must be a finite number, got {weight}")
    if recipe.init is not None:
        if recipe.init.iteration < 0:
            raise RecipeError(f"init.iteration must be >= 0, got {recipe.init.iteration}")
        digest = recipe.init.sha256
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise RecipeError(f"init.sha256 must be 64 lowercase hex digits, got {digest!r}")
    positive("evaluation.episodes", recipe.evaluation.episodes)
    if recipe.evaluation.controller not in SELECTION_CONTROLLERS:
        raise RecipeError(
            f"evaluation.controller must be one of {', '.join(SELECTION_CONTROLLERS)}, "
            f"got {recipe.evaluation.controller!r}"
        )
    for name in ("robustness", "families", "compare"):
        suite = getattr(recipe.suites, name)
        if suite is not None:
            positive(f"suites.{name}.episodes", suite.episodes)
    if not recipe.out:
        raise RecipeError("out: the folder of the result is needed")


def check_managed(where: str, overrides: list[str]) -> None:
    for ov in overrides:
        key = ov.partition("=")[0].strip()
        if key in MANAGED_KEYS or key == "env.robot.base":
            what = (
                "the recipe's base" if key == "env.robot.base" else "the recipe runner (navtrain.recipe.MANAGED_KEYS)"
            )
            raise RecipeError(f"{where}: '{key}' is set by {what}")


def positive(where: str, value: int) -> None:
    if value < 1:
        raise RecipeError(f"{where} must be >= 1, got {value}")


def check_configs(recipe: Recipe) -> None:
    """Every stage's config loads with its overrides, the suites' rows exist, the seeds are disjoint."""
    if not recipe.config_path.is_file():
        raise RecipeError(f"config: no such file {recipe.config_path}")
    cfg = None
    for i, stage in enumerate(recipe.stages):
        try:
            cfg = recipe.stage_config(stage)
        except ConfigError as err:
            raise RecipeError(f"stages[{i}] ({stage.name}): {err}") from None
    assert cfg is not None
    check_init(recipe)
    check_rows(recipe, cfg)
    check_seeds(recipe, cfg)


def check_init(recipe: Recipe) -> None:
    """The checkpoint a fine-tuning recipe starts from exists and is the one the recipe names."""
    init = recipe.init
    if init is None:
        return
    if not init.path.is_file():
        raise RecipeError(f"init.checkpoint: no such file {init.path}")
    digest = hashlib.sha256(init.path.read_bytes()).hexdigest()
    if digest != init.sha256:
        raise RecipeError(
            f"init.checkpoint {init.checkpoint} has sha256 {digest[:12]}..., the recipe names "
            f"{init.sha256[:12]}...: not the checkpoint this recipe fine-tunes"
        )


def check_rows(recipe: Recipe, cfg: NavConfig) -> None:
    from navtrain import families_suite, robustness

    suite = recipe.suites.robustness
    if suite is not None and suite.rows:
        try:
            robustness.select_rows(robustness.suite_rows(cfg), suite.rows)
        except ValueError as err:
            raise RecipeError(f"suites.robustness.rows: {err}") from None
    known = {"families": families_suite.row_names(), "compare": families_suite.row_names()}
    for name, rows in known.items():
        suite = getattr(recipe.suites, name)
        for row in (suite.rows or []) if suite is not None else []:
            if row not in rows:
                raise RecipeError(f"suites.{name}.rows: unknown row '{row}' (known: {', '.join(rows)})")


def stream(seed: int) -> set[int]:
    """The generator seeds a world stream of ``seed`` uses."""
    return {int(seed) + o for o in SEED_OFFSETS}


def evaluation_seed(recipe: Recipe, cfg: NavConfig) -> int:
    return int(cfg.runner.eval_seed if recipe.evaluation.seed is None else recipe.evaluation.seed)


def check_seeds(recipe: Recipe, cfg: NavConfig) -> None:
    """The validation, evaluation and training streams share no generator seed."""
    streams = {
        "selection.validation_seed": recipe.selection.validation_seed,
        "evaluation.seed" if recipe.evaluation.seed is not None else "runner.eval_seed": evaluation_seed(recipe, cfg),
        "seed (training)": recipe.seed,
    }
    names = list(streams)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = stream(streams[a]) & stream(streams[b])
            if shared:
                raise RecipeError(
                    f"{a} {streams[a]} and {b} {streams[b]} share generator seeds {sorted(shared)} "
                    f"(a stream of seed s uses s + {', '.join(map(str, SEED_OFFSETS))}); pick seeds further apart"
                )


def score(result: Any, weights: dict[str, float]) -> float:
    """The selection score of an ``EvalResult`` (or its dict): the sum of weight x metric."""
    get = result.get if isinstance(result, dict) else lambda k: getattr(result, k)
    return float(sum(w * float(get(SCORE_METRICS[name])) for name, w in weights.items()))


# --------------------------------------------------------------------------------------------
# The plan: the stages as they run (scaled, smoke).


@dataclass
class PlannedStage:
    """A stage as it runs: its iterations and worlds, and where its iterations sit in the run's
    count (rsl_rl numbers iterations from 0 across stages: the stage runs ``first``..``last``)."""

    index: int
    name: str
    iterations: int
    num_envs: dict[str, int]
    overrides: list[str]
    first: int
    last: int

    @property
    def folder(self) -> str:
        return f"{self.index + 1}_{self.name}"


@dataclass
class Plan:
    """The training a work folder holds; a run resumes only a work folder of the same plan."""

    recipe: str
    config: str
    seed: int
    every: int
    smoke: bool
    scale: float
    stages: list[PlannedStage]
    init: dict[str, Any] | None = None
    """The recipe's ``init`` (checkpoint path, sha256, iteration): the first stage resumes from it."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def last_iteration(self) -> int:
        return self.stages[-1].last


def make_plan(recipe: Recipe, smoke: bool = False, scale: float = 1.0) -> Plan:
    """The stages of ``recipe``; ``smoke``: :data:`SMOKE_ITERATIONS` iterations on
    :data:`SMOKE_WORLDS` worlds each, a checkpoint every iteration; ``scale``: every stage's
    iterations times ``scale`` (rounded up)."""
    stages, first = [], 0 if recipe.init is None else recipe.init.iteration + 1
    for i, stage in enumerate(recipe.stages):
        its = max(1, math.ceil(stage.iterations * scale))
        worlds = {"cpu": stage.num_envs.cpu, "cuda": stage.num_envs.cuda}
        if smoke:
            its = min(its, SMOKE_ITERATIONS)
            worlds = {k: min(v, SMOKE_WORLDS) for k, v in worlds.items()}
        overrides = recipe.stage_overrides(stage, smoke)
        stages.append(PlannedStage(i, stage.name, its, worlds, overrides, first, first + its - 1))
        first += its
    every = 1 if smoke else recipe.selection.every
    init = None if recipe.init is None else {**dataclasses.asdict(recipe.init), "checkpoint": str(recipe.init.path)}
    return Plan(recipe.name, recipe.config, recipe.seed, every, smoke, scale, stages, init)


def changes_before_start(a: dict[str, Any], b: dict[str, Any], started: set[str]) -> tuple[list[str], list[str]]:
    """``(refused, allowed)``: how plan ``b`` (the recipe now) differs from plan ``a`` (the one a work
    folder holds), given the names of the stages that have run a part. Stages after the last one
    that has started may change, be added or be removed (``allowed``); the plan's own keys and every
    stage up to that one may not (``refused``): what ran was trained by them."""
    stages_a, stages_b = a.get("stages", []), b.get("stages", [])
    ran = [i for i, st in enumerate(stages_a) if st.get("name") in started]
    k = ran[-1] + 1 if ran else 0
    refused = plan_differences({**a, "stages": stages_a[:k]}, {**b, "stages": stages_b[:k]})
    allowed = plan_differences({"stages": stages_a[k:]}, {"stages": stages_b[k:]})
    return refused, allowed


def plan_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between two plans (as dicts), named by key."""
    out = []
    for key in sorted(set(a) | set(b)):
        if key == "stages":
            continue
        if a.get(key) != b.get(key):
            out.append(f"{key} {a.get(key)!r} vs {b.get(key)!r}")
    sa, sb = a.get("stages", []), b.get("stages", [])
    if len(sa) != len(sb):
        out.append(f"{len(sa)} stages vs {len(sb)}")
    for x, y in zip(sa, sb, strict=False):
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                out.append(f"stage '{x.get('name')}' {key} {x.get(key)!r} vs {y.get(key)!r}")
    return out
