"""The robustness matrix: one policy on the same unseen rooms under each randomisation term alone,
at the severe end of its trained range and beyond it, and under all of them together.

    python training/evaluate.py --suite robustness --checkpoint PATH [--episodes 1000] [--out STEM]
    python training/evaluate.py --suite robustness --bundle DIR [--baseline OTHER.json] [...]

Rows (built from the registry, ``navsim.randomization``; no term is named here):

* ``nominal``: randomisation off (the simulator with ``env.lidar.noise_std``);
* ``<term>@high``: that term alone at the severe end of its trained range (severity 1:
  ``ParamDef.at_severity``; a two-sided range at its full magnitude with a random sign per world;
  a limit at its low end);
* ``<term>@2x``: that term alone twice as far from "no perturbation" (severity 2, out of
  distribution: tau doubled, latency 4 substeps, bias +-0.04 m, scale 0.96 / 1.04, the
  acceleration limit halved...);
* ``all@high``: every term together at severity 1; ``all@train``: every term together, drawn
  over the trained ranges (the training distribution without its nominal share).

The terms and ranges are the policy's own (its config's ``randomization.terms``, the enabled
ones, even when it was trained with randomisation off). A row whose delays (latencies plus
jitter) would exceed one control step is skipped with a note. Every row runs the same rooms
(``runner.eval_seed``), starts and goals, and the same randomisation stream.

Per row: success, collision and timeout rates, mean time to goal, SPL and command smoothness
(``navtrain.evaluation``). Writes ``STEM.json`` (every number, the values each row used),
``STEM.md`` (a table, one column group per policy) and ``STEM.png`` (success and collision per
row); ``--baseline OTHER.json`` (an earlier suite's JSON) adds that policy's rows side by side.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from navsim.config import NavConfig
from navsim.randomization import DELAY_TERMS, RANDOMIZATION_TERMS, Range
from navtrain.evaluation import Evaluator, format_metric
from navtrain.row_log import RowLog

SUITE = "robustness"
SEVERE, BEYOND = 1.0, 2.0
METRICS = (
    ("success", "success_rate", "{:.1f} %", 100.0),
    ("success, 95 % interval", "success_interval", "{:.1f}–{:.1f} %", 100.0),
    ("collision", "collision_rate", "{:.1f} %", 100.0),
    ("timeout", "timeout_rate", "{:.1f} %", 100.0),
    ("time to goal", "mean_time_to_goal_s", "{:.2f} s", 1.0),
    ("SPL", "spl", "{:.3f}", 1.0),
    ("Δv per tick", "command_change_linear", "{:.3f} m/s", 1.0),
    ("Δω per tick", "command_change_angular", "{:.3f} rad/s", 1.0),
)
"""Table columns per policy: heading, EvalResult field, format, factor."""


@dataclass
class Row:
    """One condition of the matrix: the terms switched on and their severity (None: the trained
    ranges); ``values`` what each param is drawn from (two values at a severity, a range otherwise)."""

    name: str
    terms: list[str]
    severity: float | None
    values: dict[str, dict[str, Range]] = field(default_factory=dict)
    skipped: str | None = None


def suite_rows(cfg: NavConfig) -> list[Row]:
    """The rows for a policy with config ``cfg`` (see the module docstring)."""
    ranges = {
        name: dict(term.params)
        for name, term in cfg.randomization.terms.items()
        if term.enabled and name in RANDOMIZATION_TERMS
    }
    rows = [Row("nominal", [], None)]
    for name, params in ranges.items():
        tdef = RANDOMIZATION_TERMS[name]
        for tag, s in (("high", SEVERE), ("2x", BEYOND)):
            rows.append(Row(f"{name}@{tag}", [name], s, {name: tdef.at_severity(params, s)}))
    every = list(ranges)
    rows.append(
        Row("all@high", every, SEVERE, {n: RANDOMIZATION_TERMS[n].at_severity(p, SEVERE) for n, p in ranges.items()})
    )
    rows.append(Row("all@train", every, None, copy.deepcopy(ranges)))
    budget = cfg.env.physics_substeps
    for row in rows:
        delay = sum(max(row.values[t]["substeps"]) for t in DELAY_TERMS if t in row.values)
        if delay > budget:
            row.skipped = f"delays add up to {delay:g} substeps, more than env.physics_substeps ({budget})"
    return rows


def select_rows(rows: list[Row], patterns: list[str] | None) -> list[Row]:
    """The rows ``patterns`` name, in the suite's order (None: all). A pattern is a row's name or a
    shell pattern over the names: ``*@high`` is every term at its trained end. ValueError names a
    pattern that matches no row."""
    if patterns is None:
        return list(rows)
    names = [r.name for r in rows]
    unmatched = [p for p in patterns if not any(fnmatchcase(n, p) for n in names)]
    if unmatched:
        raise ValueError(f"unknown row(s) {', '.join(unmatched)} (known: {', '.join(names)})")
    return [r for r in rows if any(fnmatchcase(r.name, p) for p in patterns)]


def row_config(cfg: NavConfig, row: Row) -> NavConfig:
    """``cfg`` with only the row's terms switched on (trained ranges kept)."""
    out = copy.deepcopy(cfg)
    out.randomization.enabled = bool(row.terms)
    out.randomization.nominal_share = 0.0  # every world of a row under the row's conditions
    for name, term in out.randomization.terms.items():
        term.enabled = name in row.terms
    return out


def run_suite(
    evaluator: Evaluator,
    episodes: int = 1000,
    seed: int | None = None,
    num_envs: int | None = None,
    rows: list[str] | None = None,
    log: str | Path | None = None,
    log_key: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every row (or those ``rows`` names, :func:`select_rows`) for ``evaluator``; the suite's JSON payload. ``log``: a
    file that keeps each finished row (:class:`navtrain.row_log.RowLog`, its key ``log_key`` added to
    the suite's own), so that a run stopped part way goes on from the next row."""
    cfg = evaluator.cfg
    chosen = select_rows(suite_rows(cfg), rows)
    out_rows = []
    used_seed = cfg.runner.eval_seed if seed is None else seed
    kept = RowLog(
        log, {"suite": SUITE, "policy": evaluator.label, "episodes": episodes, "seed": used_seed, **(log_key or {})}
    )
    for k, row in enumerate(chosen, 1):
        definition = asdict(row)
        entry = dict(definition)
        done = kept.get(row.name, definition)
        if done is not None:
            print(f"[robustness] {k}/{len(chosen)} {row.name}: kept from an earlier run ({kept.path})", flush=True)
            out_rows.append(done)
            continue
        if row.skipped:
            print(f"[robustness] {k}/{len(chosen)} {row.name}: skipped ({row.skipped})", flush=True)
            entry["results"] = {}
            out_rows.append(entry)
            continue
        t0 = time.perf_counter()
        result, _ = evaluator.run(
            row_config(cfg, row),
            episodes=episodes,
            seed=used_seed,
            num_envs=num_envs,
            plot_rooms=0,
            severity=row.severity,
        )
        print(
            f"[robustness] {k}/{len(chosen)} {row.name}: success {100 * result.success_rate:.1f} %, collision "
            f"{100 * result.collision_rate:.1f} %, timeout {100 * result.timeout_rate:.1f} % "
            f"({result.episodes} episodes, {time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        entry["results"] = {evaluator.label: asdict(result)}
        kept.put(row.name, definition, entry)
        out_rows.append(entry)
    return {"suite": SUITE, "episodes": episodes, "seed": used_seed, "policies": [evaluator.label], "rows": out_rows}


def merge_baseline(payload: dict[str, Any], baseline: dict[str, Any], name: str = "baseline") -> list[str]:
    """Add ``baseline``'s (another suite JSON) results to ``payload`` row by row, in place; its
    policies keep their labels unless taken (then `` (<name>)`` is appended). Returns notes on
    what does not match (rooms, episode counts, rows only one side has)."""
    if baseline.get("suite") != SUITE or not isinstance(baseline.get("rows"), list):
        raise ValueError("not a robustness suite JSON (no 'suite': 'robustness' with 'rows')")
    rename = {}
    for label in baseline.get("policies", []):
        new = label if label not in payload["policies"] else f"{label} ({name})"
        rename[label] = new
        payload["policies"].append(new)
    notes = []
    for key in ("seed", "episodes"):
        if baseline.get(key) != payload.get(key):
            notes.append(f"{name} ran with {key} {baseline.get(key)}, this run with {payload.get(key)}")
    theirs = {r["name"]: r for r in baseline["rows"]}
    ours = {r["name"] for r in payload["rows"]}
    for row in payload["rows"]:
        for label, res in theirs.get(row["name"], {}).get("results", {}).items():
            row["results"][rename.get(label, label)] = res
    only = [n for n in theirs if n not in ours]
    if only:
        notes.append(f"rows only in {name}: {', '.join(only)}")
    return notes


def _cell(result: dict[str, Any] | None, key: str, fmt: str, factor: float) -> str:
    return "—" if result is None else format_metric(result.get(key), fmt, factor)


def _values(row: dict[str, Any]) -> str:
    if row["severity"] is None and row["terms"]:
        return "trained ranges"
    parts = []
    for term, params in row["values"].items():
        for p, (a, b) in params.items():
            v = f"{b:g}" if a == b else (f"±{b:g}" if a == -b else f"{a:g} / {b:g}")
            parts.append(f"{p} {v}" if len(row["values"]) == 1 else f"{term}.{p} {v}")
    return ", ".join(parts) if parts else "randomisation off"


def table(payload: dict[str, Any]) -> str:
    """The markdown table: one row per condition, one column group per policy ([1], [2], ...
    named under the table)."""
    policies = payload["policies"]
    head = ["row", "values"]
    for k, _ in enumerate(policies, 1):
        head += [f"{m[0]} [{k}]" for m in METRICS]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for row in payload["rows"]:
        cells = [row["name"], _values(row) if not row.get("skipped") else f"skipped: {row['skipped']}"]
        for label in policies:
            res = row["results"].get(label)
            cells += [_cell(res, key, fmt, factor) for _, key, fmt, factor in METRICS]
        lines.append("| " + " | ".join(cells) + " |")
    legend = ", ".join(f"[{k}] {label}" for k, label in enumerate(policies, 1))
    lines.append(f"\nPolicies: {legend}; {payload['episodes']} episodes per row, room seed {payload['seed']}.")
    return "\n".join(lines) + "\n"


def plot(payload: dict[str, Any], path: Path) -> None:
    """Success and collision per row (rows down the chart), one bar per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in payload["rows"] if not r.get("skipped")]
    policies = payload["policies"]
    y = np.arange(len(rows))
    height = 0.8 / max(1, len(policies))
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.32 * len(rows) * max(1, len(policies)) ** 0.5), sharey=True)
    for ax, key, title in ((axes[0], "success_rate", "success %"), (axes[1], "collision_rate", "collision %")):
        for k, label in enumerate(policies):
            vals = [100 * r["results"][label][key] if label in r["results"] else np.nan for r in rows]
            offset = (k - (len(policies) - 1) / 2) * height
            bars = ax.barh(y + offset, vals, height, label=label)
            ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=2)
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_xlim(0, 112)
    worst = [100 * r["results"][p]["collision_rate"] for r in rows for p in policies if p in r["results"]]
    axes[1].set_xlim(0, max([10.0, *(1.15 * w for w in worst)]))
    axes[0].set_yticks(y, [r["name"] for r in rows], fontsize=8)
    axes[0].invert_yaxis()
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=max(1, len(policies)), fontsize=8)
    fig.suptitle(f"robustness: {payload['episodes']} episodes per row, room seed {payload['seed']}", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_outputs(payload: dict[str, Any], stem: str | Path, notes: list[str] | None = None) -> list[Path]:
    """``STEM.json``, ``STEM.md`` and ``STEM.png``; returns their paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md"), stem.with_suffix(".png")]
    if notes:
        payload = {**payload, "notes": notes}
    paths[0].write_text(json.dumps(payload, indent=2) + "\n")
    text = table(payload) + "".join(f"\n- {n}" for n in notes or [])
    paths[1].write_text(text + "\n")
    plot(payload, paths[2])
    return paths
