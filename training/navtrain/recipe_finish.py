"""After a recipe's last stage: choose the checkpoint, export it, evaluate it, write the result.

1. **Choose** (:func:`select`): the last stage's checkpoints every ``selection.every`` iterations
   (those at least ``every`` iterations into the stage) and its last one each run
   ``selection.validation_episodes`` worlds of the validation stream, driven by their actor or, with
   ``selection.controller: node``, exported and behind the node's gate; the highest score wins, ties
   going to the later checkpoint. Each result is kept in the work folder's ``validation.json``
   (by the checkpoint's sha256), so an interrupted choice goes on where it stopped.
2. **Export** the chosen checkpoint, copied to ``checkpoint.pt``, to ``bundle/``
   (``navtrain.export.export_bundle``; the contract names ``checkpoint.pt`` by its sha256).
3. **Evaluate** it on ``evaluation.episodes`` worlds of the evaluation stream, with 95 % Wilson
   intervals (``evaluation.json``, ``evaluation.png``), and run the listed suites on the same
   stream, driven by its actor or, with ``evaluation.controller: node``, its bundle behind the
   node's gate (``robustness.*``, ``families.*``; ``compare.*``: what the robot runs, the exported
   bundle's policy and the DWA behind the node's gate, :mod:`navtrain.compare`).
4. **Write** ``PROVENANCE.json`` (the recipe file and its sha256, the git commit, each stage's
   iterations, env steps, time and device, the checkpoint by sha256, the validation table, the
   evaluation and suite numbers) and ``README.md`` (the same in words), then copy the result into
   ``out``: the files named here are replaced, anything else in ``out`` is left alone. This is done
   once the checkpoint is evaluated, with every suite ``pending`` in the provenance, and again as
   each suite ends: the bundle can be shipped while a long suite still runs, and its provenance
   says which suites it had passed through.

Steps 2-3 are kept in the work folder's ``final/`` with the checkpoint's sha256 and their sizes
(``final/steps.json``): a rerun after an interruption does only what is missing. Every suite keeps
each finished row (``final/<suite>_rows.json``, :mod:`navtrain.row_log`), so a rerun stopped inside
a suite goes on from the row it was running.

The checkpoint is the training checkpoint as nav-train saved it (actor, critic, normalisers,
optimizer state, iteration, config; about 2.3 MB for the 256x256 networks), so
``nav-train --resume checkpoint.pt`` fine-tunes it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from navsim.config_load import REPO_ROOT
from navtrain.recipe import (
    SMOKE_EPISODES,
    SMOKE_EXPORT_WORLDS,
    SMOKE_SUITE_EPISODES,
    Plan,
    Recipe,
    evaluation_seed,
    resolve,
    score,
)
from navtrain.recipe_provenance import provenance, readme
from navtrain.recipe_work import Checkpoint, Work, atomic_write_text, git_commit, now, rel, say, sha256

SUITES = ("robustness", "families", "compare")
PRODUCTS = ("checkpoint.pt", "bundle", "evaluation.json", "evaluation.png", "PROVENANCE.json", "README.md") + tuple(
    f"{s}.{ext}" for s in SUITES for ext in ("json", "md", "png")
)
"""What a recipe writes into ``out`` (and replaces there on a rerun)."""


def sizes(recipe: Recipe, plan: Plan) -> dict[str, Any]:
    """Episodes (and suite rows) of validation, evaluation and suites; ``--smoke`` shrinks them to a
    few worlds and each suite to one row (robustness: ``nominal``)."""
    first_row = {"robustness": ["nominal"], "families": ["rooms"], "compare": ["rooms"]}
    out: dict[str, Any] = {
        "validation": recipe.selection.validation_episodes,
        "evaluation": recipe.evaluation.episodes,
        "suites": {},
    }
    for name in SUITES:
        suite = getattr(recipe.suites, name)
        if suite is not None:
            out["suites"][name] = {"episodes": suite.episodes, "rows": suite.rows}
    if plan.smoke:
        out["validation"] = min(out["validation"], SMOKE_EPISODES)
        out["evaluation"] = min(out["evaluation"], SMOKE_EPISODES)
        for name, s in out["suites"].items():
            first = (
                first_row[name] if name == "robustness" else (s["rows"] or first_row[name])[:1]
            )  # rows may be patterns
            s.update(episodes=min(s["episodes"], SMOKE_SUITE_EPISODES), rows=first)
    return out


# ------------------------------------------------------------------------------------------------
# 1. Choose


def candidates(plan: Plan, work: Work) -> list[Checkpoint]:
    stage = plan.stages[-1]
    every = plan.every
    return [
        c
        for it, c in work.checkpoints(stage).items()
        if it == stage.last or (it % every == 0 and it - stage.first + 1 >= every)
    ]


def select(recipe: Recipe, plan: Plan, work: Work, device: str) -> tuple[Checkpoint, list[dict[str, Any]]]:
    """The chosen checkpoint and the validation table (one row per candidate, in iteration order)."""
    sel = recipe.selection
    episodes = sizes(recipe, plan)["validation"]
    path = work.root / "validation.json"
    cache = json.loads(path.read_text()) if path.is_file() else {}
    found = candidates(plan, work)
    driver = "behind the node's gate" if sel.controller == "node" else "the checkpoint's actor"
    say(
        f"choosing among {len(found)} checkpoint(s) on {episodes} validation worlds "
        f"(seed {sel.validation_seed}, {driver})"
    )
    table = []
    for k, ckpt in enumerate(found, 1):
        digest = sha256(ckpt.path)
        key = {
            "episodes": episodes,
            "seed": sel.validation_seed,
            "overrides": sel.overrides,
            **driven_by(sel.controller),
        }
        entry = cache.get(digest)
        if entry is None or entry.get("key") != key:
            result = validate(ckpt, digest, episodes, sel.validation_seed, sel.overrides, sel.controller, work, device)
            entry = {"key": key, "result": asdict(result)}
            cache[digest] = entry
            atomic_write_text(path, json.dumps(cache, indent=2) + "\n")
        res = entry["result"]
        row = validation_row(ckpt, digest, res, plan, work, score(res, sel.score))
        table.append(row)
        say(
            f"validation {k}/{len(found)}: iteration {ckpt.iteration} success {100 * res['success_rate']:.1f} % "
            f"collision {100 * res['collision_rate']:.1f} % score {row['score']:.4f}{per_family(res)}"
        )
    best = max(range(len(table)), key=lambda i: (table[i]["score"], table[i]["iteration"]))  # ties: the later
    table[best]["chosen"] = True
    return found[best], table


def per_family(res: dict[str, Any]) -> str:
    """`` (rooms 99.0, clutter 95.2 ...)``: success % per family of a result with several ("" else)."""
    fams = res.get("by_family") or {}
    if not fams:
        return ""
    return " (" + ", ".join(f"{name} {100 * r['success_rate']:.1f}" for name, r in fams.items()) + ")"


def driven_by(controller: str) -> dict[str, str]:
    """What a step's cache key adds for its controller: nothing for ``policy`` (keys written before
    the controller existed stay valid), else the controller."""
    return {} if controller == "policy" else {"controller": controller}


def validate(
    ckpt: Checkpoint,
    digest: str,
    episodes: int,
    seed: int,
    overrides: list[str],
    controller: str,
    work: Work,
    device: str,
) -> Any:
    """One candidate's ``EvalResult`` on the validation stream: its actor (``policy``), or its bundle
    behind the node's gate (``node``; exported to ``validation_bundles/<sha256[:12]>`` in the work
    folder, kept for a rerun)."""
    from navtrain.evaluation import evaluate_checkpoint, evaluate_controller

    if controller == "policy":
        result, _ = evaluate_checkpoint(
            ckpt.path, episodes=episodes, seed=seed, device=device, overrides=overrides, plot_rooms=0
        )
        return result
    from navdeploy.node_params import NodeParams
    from navtrain.export import export_bundle

    bundle = work.root / "validation_bundles" / digest[:12]
    if not (bundle / "policy.onnx").is_file():
        say(f"exporting iteration {ckpt.iteration} to {rel(bundle, work.root)} for the node's gate")
        export_bundle(ckpt.path, bundle, device=device, force=True)
    result, _ = evaluate_controller(
        bundle, "policy", episodes=episodes, seed=seed, overrides=overrides, plot_rooms=0, node=NodeParams()
    )
    return result


def validation_row(ckpt: Checkpoint, digest: str, res: dict, plan: Plan, work: Work, value: float) -> dict[str, Any]:
    return {
        "iteration": ckpt.iteration,
        "stage_iteration": ckpt.iteration - plan.stages[-1].first + 1,
        "checkpoint": rel(ckpt.path, work.root),
        "sha256": digest,
        "success": res["success_rate"],
        "success_interval": res["success_interval"],
        "collision": res["collision_rate"],
        "collision_interval": res["collision_interval"],
        "timeout": res["timeout_rate"],
        "score": value,
        "chosen": False,
    }


# ------------------------------------------------------------------------------------------------
# 2-3. Export, evaluate, suites (kept in final/ by the checkpoint's sha256)


class Steps:
    """``final/steps.json``: the steps done for the checkpoint in ``final/`` and their sizes."""

    def __init__(self, folder: Path, digest: str) -> None:
        self.path = folder / "steps.json"
        data = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.data = data if data.get("checkpoint_sha256") == digest else {"checkpoint_sha256": digest}

    def done(self, name: str, key: Any) -> dict[str, Any] | None:
        entry = self.data.get(name)
        return entry if entry is not None and entry.get("key") == key else None

    def record(self, name: str, key: Any, **values: Any) -> dict[str, Any]:
        self.data[name] = {"key": key, **values}
        atomic_write_text(self.path, json.dumps(self.data, indent=2) + "\n")
        return self.data[name]


def stage_final(chosen: Checkpoint, folder: Path) -> tuple[Path, str]:
    """``final/checkpoint.pt``: a copy of the chosen checkpoint (replaced when another is chosen)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "checkpoint.pt"
    digest = sha256(chosen.path)
    if not target.is_file() or sha256(target) != digest:
        tmp = folder / f".checkpoint.pt.tmp-{os.getpid()}"
        shutil.copyfile(chosen.path, tmp)
        os.replace(tmp, target)
    return target, digest


def export_and_evaluate(
    recipe: Recipe, plan: Plan, folder: Path, digest: str, device: str
) -> tuple[dict[str, Any], Any, Steps]:
    """Steps 2 and 3 for ``folder/checkpoint.pt``, up to the suites: what they produced, the
    evaluator the suites run, and the steps kept for the checkpoint."""
    from navtrain.evaluation import checkpoint_evaluator, plot_trace, write_json
    from navtrain.export import export_bundle

    ckpt = folder / "checkpoint.pt"
    steps = Steps(folder, digest)
    size = sizes(recipe, plan)
    evaluator = checkpoint_evaluator(ckpt, device=device)
    seed = evaluation_seed(recipe, evaluator.cfg)
    if steps.done("export", {}) is None or not (folder / "bundle" / "policy.onnx").is_file():
        say(f"exporting {rel(ckpt, REPO_ROOT)} to bundle/")
        worlds = {"num_envs": SMOKE_EXPORT_WORLDS} if plan.smoke else {}
        export_bundle(ckpt, folder / "bundle", device=device, force=True, **worlds)
        steps.record("export", {})
    controller = recipe.evaluation.controller
    if controller == "node":
        from navdeploy.node_params import NodeParams
        from navtrain.evaluation import bundle_evaluator

        evaluator = bundle_evaluator(folder / "bundle", "policy", node=NodeParams())
    where = driven_by(controller)
    key = {"episodes": size["evaluation"], "seed": seed, **where}
    if steps.done("evaluation", key) is None:
        say(f"evaluating on {size['evaluation']} evaluation worlds (seed {seed}, {evaluator.label})")
        result, trace = evaluator.run(episodes=size["evaluation"], seed=seed)
        write_json(result, folder / "evaluation.json")
        if trace is not None:
            plot_trace(trace, evaluator.cfg.env, folder / "evaluation.png", title=f"{recipe.name}: evaluation worlds")
        steps.record("evaluation", key)
    done = {"evaluation_seed": seed, "sizes": size, "controller": evaluator.label, "where": where}
    return done, evaluator, steps


def suite_key(name: str, done: dict[str, Any]) -> dict[str, Any]:
    """What a suite's entry in ``final/steps.json`` is kept under: its size, the seed and the driver."""
    where = done["where"] if name != "compare" else {}
    return {**done["sizes"]["suites"][name], "seed": done["evaluation_seed"], **where}


def suites_done(steps: Steps, done: dict[str, Any], folder: Path) -> list[str]:
    """The recipe's suites that have ended for the checkpoint and whose results are in ``folder``,
    in the recipe's order (a suite whose files are gone, as in a checkout that keeps only its rows,
    runs again: from its kept rows, in moments)."""
    return [
        name
        for name in done["sizes"]["suites"]
        if steps.done(name, suite_key(name, done)) is not None and (folder / f"{name}.json").is_file()
    ]


def clear_suite_files(folder: Path, keep: list[str]) -> None:
    """Remove the files of every suite but ``keep`` from ``folder``: those of a suite the recipe no
    longer lists, or one still to run for this checkpoint (left by an earlier one)."""
    for name in SUITES:
        if name not in keep:
            for ext in ("json", "md", "png"):
                (folder / f"{name}.{ext}").unlink(missing_ok=True)


def run_suite(name: str, evaluator: Any, suite: dict[str, Any], seed: int, folder: Path, key: dict[str, Any]) -> None:
    """One suite on the chosen checkpoint; each keeps its finished rows in ``<name>_rows.json``
    (``key``: the checkpoint's hash and the driver), so that a run stopped part way goes on from the
    next row."""
    log = folder / f"{name}_rows.json"
    if name == "compare":
        from navtrain import compare

        rows = compare.parse_rows(suite["rows"])
        payload = compare.run_compare(folder / "bundle", rows, suite["episodes"], seed, log=log, log_key=key)
        compare.write_outputs(payload, folder / "compare")
    elif name == "robustness":
        from navtrain import robustness

        payload = robustness.run_suite(
            evaluator, episodes=suite["episodes"], seed=seed, rows=suite["rows"], log=log, log_key=key
        )
        robustness.write_outputs(payload, folder / "robustness")
    else:
        from navtrain import families_suite

        payload = families_suite.run_suite(
            evaluator, episodes=suite["episodes"], seed=seed, rows=suite["rows"], log=log, log_key=key
        )
        families_suite.write_outputs(payload, folder / "families")


# ------------------------------------------------------------------------------------------------
# 4. Provenance, publish


def finish(recipe: Recipe, plan: Plan, work: Work, device: str, out: Path) -> None:
    """Steps 1-4 (see the module docstring). The result is published once the checkpoint is
    evaluated, with its suites pending, and again as each suite ends."""
    chosen, table = select(recipe, plan, work, device)
    folder = work.root / "final"
    ckpt, digest = stage_final(chosen, folder)
    say(f"chose iteration {chosen.iteration} ({rel(chosen.path, work.root)}, sha256 {digest[:12]})")
    done, evaluator, steps = export_and_evaluate(recipe, plan, folder, digest, device)

    def write_result() -> dict[str, Any]:
        ended = suites_done(steps, done, folder)
        clear_suite_files(folder, keep=ended)
        payload = provenance(recipe, plan, work, chosen, ckpt, digest, table, done, ended)
        atomic_write_text(folder / "PROVENANCE.json", json.dumps(payload, indent=2) + "\n")
        atomic_write_text(folder / "README.md", readme(payload))
        publish(folder, out)
        return payload

    payload = write_result()
    for name, suite in done["sizes"]["suites"].items():
        key = suite_key(name, done)
        if name not in suites_done(steps, done, folder):
            seed = done["evaluation_seed"]
            say(f"{name} suite: {suite['episodes']} worlds per row (seed {seed})")
            run_suite(name, evaluator, suite, seed, folder, {"checkpoint": digest, **done["where"]})
            steps.record(name, key)
            payload = write_result()
    work.state["finished"] = {"at": now(), "out": str(out), "checkpoint_sha256": digest, "git": git_commit()}
    work.save()
    ev = payload["evaluation"]
    say(
        f"evaluation ({ev['episodes']} worlds): success {100 * ev['success_rate']:.1f} % "
        f"[{100 * ev['success_interval'][0]:.1f}, {100 * ev['success_interval'][1]:.1f}], collision "
        f"{100 * ev['collision_rate']:.1f} % [{100 * ev['collision_interval'][0]:.1f}, "
        f"{100 * ev['collision_interval'][1]:.1f}]"
    )


def publish(folder: Path, out: Path) -> None:
    """Copy the products of ``folder`` into ``out``, each replaced whole (the bundle folder by a
    rename); a product ``folder`` does not have is removed from ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = f"{os.getpid()}-{time.time_ns()}"
    for name in PRODUCTS:
        src, dst = folder / name, out / name
        if src.is_dir():
            tmp = out / f".{name}.tmp-{stamp}"
            shutil.copytree(src, tmp)
            old = out / f".{name}.old-{stamp}"
            if dst.exists():
                os.replace(dst, old)
            os.replace(tmp, dst)
            shutil.rmtree(old, ignore_errors=True)
        elif src.is_file():
            tmp = out / f".{name}.tmp-{stamp}"
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        elif dst.is_dir():
            shutil.rmtree(dst)
        elif dst.exists():
            dst.unlink()
    say(f"wrote {', '.join(n for n in PRODUCTS if (out / n).exists())} to {out}")


def default_out(recipe: Recipe) -> Path:
    return resolve(recipe.out)
