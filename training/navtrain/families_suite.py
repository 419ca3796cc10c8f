"""The families suite: one policy on unseen worlds of every world family, in both goal modes.

    python training/evaluate.py --suite families --checkpoint PATH [--episodes 500] [--out STEM]
    python training/evaluate.py --suite families --bundle DIR [--rows clutter,corridors+path]

Rows (nominal conditions: randomisation off; curriculum off, so every family at its top level;
the followed paths keep the default ``env.worlds.path_clearance`` whatever the policy trained with):

* ``rooms``: today's rooms (``env.room`` with 4-12 obstacles, drawn as in training before
  families existed: the historical numbers compare with this row);
* ``rooms16``: the same rooms with 16 obstacles each;
* ``clutter``, ``arenas``: planned worlds of that family, the policy driving to the goal;
* ``corridors``: corridors with dead ends, driving to the goal;
* ``rooms16+path``, ``clutter+path``, ``corridors+path``: the family of the row without
  ``+path``, the policy fed a sub-goal along the planner's path (``navcontract.subgoal``, the
  node's rule). Clutter and corridors are the very same worlds; ``rooms16+path`` draws planned
  rooms (a path needs the planner), so its worlds are the same kind, not the same ones.

Per row: success, collision, timeout, mean time to goal and SPL. For planned worlds SPL's
reference is the shortest feasible path at the certified clearance (``navsim.grid_planner``); for
the two unplanned rooms rows it is the straight start-goal line (today's rooms are not planned). Every row
uses the same seed stream (``runner.eval_seed``). Writes ``STEM.json``, ``STEM.md``, ``STEM.png``
(success and collision per row) and ``STEM_<row>.png`` (a few worlds per row with the driven
paths, failures first).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from navsim.config import WorldsCfg
from navtrain.evaluation import Evaluator, format_metric, plot_trace, with_overrides
from navtrain.row_log import RowLog
from navtrain.suite_files import write_suite_files

SUITE = "families"
# Every policy is fed the same paths: the planner's, with the configured default clearance (a
# checkpoint trained before env.worlds.path_clearance existed would otherwise get shortest paths).
NOMINAL = [
    "randomization.enabled=false",
    "env.worlds.curriculum.enabled=false",
    f"env.worlds.path_clearance={WorldsCfg().path_clearance}",
]


@dataclass(frozen=True)
class Row:
    """A suite's row: its name, what it is, and the config overrides that make its worlds."""

    name: str
    description: str
    overrides: tuple[str, ...]


ROWS = (
    Row(
        "rooms",
        "today's rooms",
        ("env.worlds.families={rooms: 1.0}", "env.worlds.path_following=0.0", "env.room.num_obstacles=[4,12]"),
    ),
    Row(
        "rooms16",
        "rooms with 16 obstacles",
        ("env.worlds.families={rooms: 1.0}", "env.worlds.path_following=0.0", "env.room.num_obstacles=[16,16]"),
    ),
    Row(
        "rooms16+path",
        "rooms with 16 obstacles, following the planned path",
        ("env.worlds.families={rooms: 1.0}", "env.worlds.path_following=1.0", "env.room.num_obstacles=[16,16]"),
    ),
    Row(
        "clutter",
        "clutter fields, start and goal at opposite ends",
        ("env.worlds.families={clutter: 1.0}", "env.worlds.path_following=0.0"),
    ),
    Row(
        "clutter+path",
        "clutter fields, following the planned path",
        ("env.worlds.families={clutter: 1.0}", "env.worlds.path_following=1.0"),
    ),
    Row(
        "corridors",
        "corridors with dead ends, goal mode",
        ("env.worlds.families={corridors: 1.0}", "env.worlds.path_following=0.0"),
    ),
    Row(
        "corridors+path",
        "corridors with dead ends, following the planned path",
        ("env.worlds.families={corridors: 1.0}", "env.worlds.path_following=1.0"),
    ),
    Row("arenas", "large arenas, long goals", ("env.worlds.families={arenas: 1.0}", "env.worlds.path_following=0.0")),
)

METRICS = (
    ("success", "success_rate", "{:.1f} %", 100.0),
    ("success, 95 % interval", "success_interval", "{:.1f}–{:.1f} %", 100.0),
    ("collision", "collision_rate", "{:.1f} %", 100.0),
    ("timeout", "timeout_rate", "{:.1f} %", 100.0),
    ("time to goal", "mean_time_to_goal_s", "{:.1f} s", 1.0),
    ("SPL", "spl", "{:.3f}", 1.0),
)


def row_names() -> list[str]:
    return [r.name for r in ROWS]


def run_suite(
    evaluator: Evaluator,
    episodes: int = 500,
    seed: int | None = None,
    num_envs: int | None = None,
    rows: list[str] | None = None,
    out: str | Path | None = None,
    log: str | Path | None = None,
    log_key: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every row (or those named in ``rows``); with ``out`` also each row's picture. ``log``: a file
    that keeps each finished row (:class:`navtrain.row_log.RowLog`, its key ``log_key`` added to the
    suite's own), so that a run stopped part way goes on from the next row."""
    chosen = [r for r in ROWS if rows is None or r.name in rows]
    used_seed = evaluator.cfg.runner.eval_seed if seed is None else seed
    entries = []
    kept = RowLog(
        log, {"suite": SUITE, "policy": evaluator.label, "episodes": episodes, "seed": used_seed, **(log_key or {})}
    )
    for k, row in enumerate(chosen, 1):
        definition = {
            "name": row.name,
            "description": row.description,
            "overrides": list(row.overrides),
            "out": str(out),
        }
        done = kept.get(row.name, definition)
        if done is not None:
            print(f"[families] {k}/{len(chosen)} {row.name}: kept from an earlier run ({kept.path})", flush=True)
            entries.append(done)
            continue
        cfg = with_overrides(evaluator.cfg, [*NOMINAL, *row.overrides])
        t0 = time.perf_counter()
        result, trace = evaluator.run(cfg, episodes=episodes, seed=used_seed, num_envs=num_envs, plot_rooms=6)
        print(
            f"[families] {k}/{len(chosen)} {row.name}: success {100 * result.success_rate:.1f} % "
            f"({format_metric(result.success_interval, '{:.1f}–{:.1f}', 100.0)}), collision "
            f"{100 * result.collision_rate:.1f} %, timeout {100 * result.timeout_rate:.1f} %, SPL {result.spl:.3f} "
            f"({result.episodes} episodes, {time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        entry = {"name": row.name, "description": row.description, "overrides": list(row.overrides)}
        entry["results"] = {evaluator.label: asdict(result)}
        if out is not None and trace is not None:
            picture = Path(f"{out}_{row.name.replace('+', '_')}.png")
            title = (
                f"{row.description}: success {100 * result.success_rate:.1f} %, collision "
                f"{100 * result.collision_rate:.1f} % ({result.episodes} worlds; failures first)"
            )
            plot_trace(trace, cfg.env, picture, title=title)
            entry["picture"] = picture.name
        kept.put(row.name, definition, entry)
        entries.append(entry)
    return {"suite": SUITE, "episodes": episodes, "seed": used_seed, "policies": [evaluator.label], "rows": entries}


def markdown(payload: dict[str, Any]) -> str:
    policies = payload["policies"]
    head = (
        "| row | " + " | ".join(f"{h} ({p})" if len(policies) > 1 else h for p in policies for h, *_ in METRICS) + " |"
    )
    lines = [
        f"Families suite: {payload['episodes']} unseen worlds per row, seed {payload['seed']}, randomisation off.",
        "",
        head,
        "|" + "---|" * (1 + len(METRICS) * len(policies)),
    ]
    for row in payload["rows"]:
        cells = []
        for p in policies:
            res = row["results"].get(p)
            for _, key, fmt, factor in METRICS:
                cells.append(format_metric(None if res is None else res.get(key), fmt, factor))
        lines.append(f"| {row['name']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "SPL: against the planner's shortest feasible path for planned worlds, the straight line for the rooms rows.",
    ]
    return "\n".join(lines) + "\n"


def plot(payload: dict[str, Any], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = payload["rows"]
    label = payload["policies"][0]
    names = [r["name"] for r in rows]
    succ = [100 * r["results"][label]["success_rate"] for r in rows]
    # 95 % intervals as error bars (results written before they existed have none: no bar)
    spans = [r["results"][label].get("success_interval") or [s / 100, s / 100] for r, s in zip(rows, succ, strict=True)]
    err = np.array([[s - 100 * lo, 100 * hi - s] for s, (lo, hi) in zip(succ, spans, strict=True)]).T
    coll = [100 * r["results"][label]["collision_rate"] for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(1.4 * len(rows) + 2, 4))
    ax.bar(x - 0.2, succ, 0.4, yerr=err, capsize=3, label="success % (95 % interval)", color="tab:green")
    ax.bar(x + 0.2, coll, 0.4, label="collision %", color="tab:red")
    for xi, s, above in zip(x, succ, err[1], strict=True):
        ax.text(xi - 0.2, s + above + 1, f"{s:.1f}", ha="center", fontsize=8)
    ax.axhline(95, color="0.5", ls=":", lw=1)
    ax.set_xticks(x, names, rotation=20)
    ax.set_ylim(0, 105)
    ax.set_title(f"{label}: {payload['episodes']} unseen worlds per family")
    ax.legend(loc="center right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_outputs(payload: dict[str, Any], stem: str | Path) -> list[Path]:
    """``STEM.json``, ``STEM.md`` and ``STEM.png`` of ``payload``."""
    return write_suite_files(payload, stem, markdown, plot)
