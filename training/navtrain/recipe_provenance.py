"""The provenance of a recipe's policy: ``PROVENANCE.json`` and ``README.md`` beside its bundle.

Per stage (:func:`stage_records`), from the work folder's parts and checkpoints: the iterations
each part kept (from its first iteration to the checkpoint the next part resumed from, or the
stage's last), the env steps they are (iterations x worlds x ``runner.num_steps_per_env``), the
training seconds (``train_elapsed_s`` of that checkpoint: rollouts and updates, no world building),
each part's wall time (None for a part whose process was killed) and device. ``plan_changes``: the
stages the recipe changed before they started (the work folder's ``state.json``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from navsim.config_load import REPO_ROOT
from navtrain.evaluation import format_metric
from navtrain.recipe import Plan, Recipe
from navtrain.recipe_work import Checkpoint, Work, git_commit, rel, sha256

PROVENANCE_FORMAT = "nav_policy.recipe_provenance"


def checkpoint_infos(path: Path) -> dict[str, Any]:
    from navtrain.checkpoint import load_checkpoint

    infos = load_checkpoint(path).get("infos") or {}
    return infos if isinstance(infos, dict) else {}


def part_records(stage: Any, work: Work) -> list[dict[str, Any]]:
    parts = work.parts(stage)
    ckpts = work.checkpoints(stage)
    out = []
    for j, part in enumerate(parts):
        end = parts[j + 1]["start_iteration"] - 1 if j + 1 < len(parts) else stage.last
        kept = max(0, end - part["start_iteration"] + 1)
        train_s = env_steps = None
        if kept and end in ckpts:
            infos = checkpoint_infos(ckpts[end].path)
            elapsed = infos.get("train_elapsed_s")
            train_s = None if elapsed is None else round(float(elapsed), 1)
            steps = ((infos.get("nav_config") or {}).get("runner") or {}).get("num_steps_per_env")
            env_steps = None if steps is None else kept * int(part["num_envs"]) * int(steps)
        out.append(
            {
                "part": part["part"],
                "iterations": kept,
                "first_iteration": part["start_iteration"],
                "env_steps": env_steps if kept else 0,
                "train_s": train_s if kept else 0.0,
                "wall_s": part.get("wall_s"),
                "device": part["device"],
                "device_name": part.get("device_name"),
                "num_envs": part["num_envs"],
                "resume_from": part.get("resume_from"),
                "git": part.get("git"),
                "config_sha256": part.get("config_sha256"),
                "recipe_sha256": part.get("recipe_sha256"),
                "started": part.get("started"),
                "exit": part.get("exit"),
            }
        )
    return out


def total(values: list[Any]) -> Any:
    """The sum, or None when a value is unknown."""
    return None if any(v is None for v in values) else round(sum(values), 1)


def stage_records(plan: Plan, work: Work) -> list[dict[str, Any]]:
    out = []
    for stage in plan.stages:
        parts = part_records(stage, work)
        kept = [p for p in parts if p["iterations"]]
        out.append(
            {
                "name": stage.name,
                "iterations": stage.iterations,
                "first_iteration": stage.first,
                "last_iteration": stage.last,
                "overrides": stage.overrides,
                "num_envs": stage.num_envs,
                "env_steps": total([p["env_steps"] for p in kept]),
                "train_s": total([p["train_s"] for p in kept]),
                "wall_s": total([p["wall_s"] for p in parts]),
                "devices": sorted({f"{p['device']} ({p['device_name']})" for p in kept}),
                "parts": parts,
            }
        )
    return out


def suite_records(folder: Path, done: dict[str, Any], ended: list[str]) -> dict[str, Any]:
    """PROVENANCE.json's ``suites``: each of the recipe's suites with its size and seed; those in
    ``ended`` ``done``, with their files and the rows they ran (from ``folder/<suite>.json``), the
    others ``pending``."""
    suites = {}
    for name, size in done["sizes"]["suites"].items():
        if name not in ended:
            suites[name] = {**size, "seed": done["evaluation_seed"], "status": "pending"}
            continue
        payload = json.loads((folder / f"{name}.json").read_text())
        suites[name] = {**size, "seed": payload["seed"], "status": "done"}
        suites[name]["files"] = [f"{name}.{e}" for e in ("json", "md", "png")]
        rows = payload["rows"]  # a list of rows (robustness, families) or rows by name (compare)
        suites[name]["rows_run"] = list(rows) if isinstance(rows, dict) else [r["name"] for r in rows]
    return suites


def provenance(
    recipe: Recipe,
    plan: Plan,
    work: Work,
    chosen: Checkpoint,
    ckpt: Path,
    digest: str,
    table: list[dict[str, Any]],
    done: dict[str, Any],
    ended: list[str],
) -> dict[str, Any]:
    """PROVENANCE.json's content (see the module docstring); of the recipe's suites, those in
    ``ended`` with their results, the others ``pending``."""
    folder = ckpt.parent
    sel = recipe.selection
    recipe_path = Path(recipe.path).absolute()
    evaluation = json.loads((folder / "evaluation.json").read_text())
    suites = suite_records(folder, done, ended)
    bundle = folder / "bundle"
    command = f"nav-recipe run {rel(recipe_path, REPO_ROOT)}" + (" --smoke" if plan.smoke else "")
    if plan.scale != 1.0:
        command += f" --stage-iterations-scale {plan.scale:g}"
    return {
        "format": PROVENANCE_FORMAT,
        "format_version": 1,
        "name": recipe.name,
        "description": recipe.description,
        "command": command,
        "recipe": {"path": rel(recipe_path, REPO_ROOT), "sha256": recipe.sha256},
        "config": {"path": recipe.config, "sha256": sha256(recipe.config_path), "base": recipe.base},
        "smoke": plan.smoke,
        "stage_iterations_scale": plan.scale,
        "git": git_commit(),
        "date": time.strftime("%Y-%m-%d"),
        "seed": plan.seed,
        "init": None
        if recipe.init is None
        else {
            "checkpoint": recipe.init.checkpoint,
            "sha256": recipe.init.sha256,
            "iteration": recipe.init.iteration,
        },  # fmt: skip
        "stages": stage_records(plan, work),
        "plan_changes": list(work.state.get("plan_changes", [])),  # stages changed before they started
        "checkpoint": {
            "file": ckpt.name,
            "sha256": digest,
            "iteration": chosen.iteration,
            "bytes": ckpt.stat().st_size,
            "source": rel(chosen.path, work.root),
            "contents": "nav-train's training checkpoint (actor, critic, normalisers, optimizer state, config): "
            "nav-train --resume checkpoint.pt fine-tunes it",
        },
        "selection": {
            "every": plan.every,
            "validation_episodes": done["sizes"]["validation"],
            "validation_seed": sel.validation_seed,
            "score": sel.score,
            "overrides": sel.overrides,
            "controller": sel.controller,
            "rule": "the highest score (sum of weight x rate); ties go to the later checkpoint",
            "table": table,
            "chosen_iteration": chosen.iteration,
        },
        "evaluation": {**evaluation, "file": "evaluation.json"},
        "suites": suites,
        "bundle": {
            "folder": "bundle",
            "files": {p.name: sha256(p) for p in sorted(bundle.iterdir()) if p.is_file()},
            "fingerprint": json.loads((bundle / "contract.json").read_text()).get("fingerprint"),
        },
    }


def pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def interval(values: list[float]) -> str:
    return f"{100 * values[0]:.1f}–{100 * values[1]:.1f} %" if values else "—"


def hours(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def score_text(weights: dict[str, float]) -> str:
    """``success - 3 x collision`` for ``{success: 1, collision: -3}``."""
    text = ""
    for k, (name, w) in enumerate(weights.items()):
        sign = "-" if w < 0 else ("+" if k else "")
        size = "" if abs(w) == 1 else f"{abs(w):g} x "
        text += f"{' ' if k else ''}{sign}{' ' if k else ''}{size}{name}"
    return text


def readme(p: dict[str, Any]) -> str:
    """README.md of the result: the command, the stages, the choice and the numbers, in words."""
    ev = p["evaluation"]
    lines = [
        f"# {p['name']}",
        "",
        *([p["description"], ""] if p["description"] else []),
        f"Rebuilt by `{p['command']}` (recipe `{p['recipe']['path']}`, sha256 {p['recipe']['sha256'][:12]}; "
        f"git {str(p['git']['commit'])[:12]}). `bundle/` is what the robot runs; `checkpoint.pt` "
        f"(sha256 {p['checkpoint']['sha256'][:12]}, iteration {p['checkpoint']['iteration']}) fine-tunes with "
        "`nav-train --resume`. Every number is in `PROVENANCE.json`.",
        "",
        *(
            [
                f"Fine-tuned from `{p['init']['checkpoint']}` (sha256 {p['init']['sha256'][:12]}, iteration "
                f"{p['init']['iteration']}).",
                "",
            ]
            if p.get("init")
            else []
        ),
        "| stage | iterations | env steps | training time | device |",
        "|---|---|---|---|---|",
    ]
    for s in p["stages"]:
        steps = "—" if s["env_steps"] is None else f"{s['env_steps'] / 1e6:.1f} M"
        lines.append(
            f"| {s['name']} | {s['iterations']} | {steps} | {hours(s['train_s'])} | {', '.join(s['devices'])} |"
        )
    sel = p["selection"]
    lines += [
        "",
        f"Chosen on {sel['validation_episodes']} validation worlds (seed {sel['validation_seed']}"
        f"{', behind the node' + chr(39) + 's gate' if sel.get('controller') == 'node' else ''}) by "
        f"{score_text(sel['score'])}, ties to the later:",
        "",
        "| iteration | success | collision | timeout | score |",
        "|---|---|---|---|---|",
    ]
    for r in sel["table"]:
        mark = " (chosen)" if r["chosen"] else ""
        lines.append(
            f"| {r['iteration']}{mark} | {pct(r['success'])} | {pct(r['collision'])} | {pct(r['timeout'])} | {r['score']:.4f} |"
        )
    lines += [
        "",
        f"Evaluation on {ev['episodes']} unseen worlds (seed {ev['seed']}"
        f"{'; ' + ev['controller'] if ev.get('controller') else ''}): success {pct(ev['success_rate'])} "
        f"(95 % interval {interval(ev['success_interval'])}), collision {pct(ev['collision_rate'])} "
        f"({interval(ev['collision_interval'])}), timeout {pct(ev['timeout_rate'])}, mean time to goal "
        f"{format_metric(ev['mean_time_to_goal_s'], '{:.1f} s', 1.0)}.",
    ]
    for name, s in p["suites"].items():
        where = f"`{name}.md`" if s.get("status", "done") == "done" else f"still to run (`{p['command']}` runs it)"
        lines.append(f"Suite `{name}`: {s['episodes']} worlds per row, seed {s['seed']}: {where}.")
    return "\n".join(lines) + "\n"
