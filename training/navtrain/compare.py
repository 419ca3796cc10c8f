"""What the robot runs: the learned policy against the dynamic-window baseline, family by family.

    nav-compare --bundle DIR [--episodes 500] [--seed S] [--rows rooms,rooms16,clutter,corridors+path,arenas]
                [--bare] [--num-envs N] [--dwa-params YAML] [--out docs/results/compare] [--log FILE]
                [KEY=VALUE ...]
    nav-compare --bundle DIR --rows ROW --driver policy|dwa --replay EPISODE --num-envs N [--seed S] --out STEM

Each row is a world family at its top level, as the families suite makes it
(:data:`navtrain.families_suite.ROWS`; by default :data:`DEFAULT_ROWS`: rooms, 16-obstacle rooms,
clutter fields in goal mode, corridors following the planned path, arenas), with the bundle's
training randomisation. Both drivers are robot-side code built from the same bundle (the policy
through its ONNX runtime, the DWA from its contract) and run behind the node's own command gate
with ``policy_node``'s default parameters (:class:`navtrain.evaluation.NodeActor`: the scan rules on
a 720-beam lidar, the scan map in goal mode, blocked and stuck handling, the smoother, the guard
last), on the same worlds, starts and goals (one seed stream). ``--bare`` drives them without the
gate (the runtime alone, the simulator's guard).

Per row and driver: success, collision and timeout with 95 % Wilson intervals; mean time to goal
and mean path length on the worlds **both** drivers reach (a driver that solves only the easy worlds
is not faster for it); mean |change of w| and of |(vx, vy)| per control tick. Each row's verdict
checks issue 30's bar (:data:`BAR`): the policy's success at least the DWA's, its collision at most
0.5 %, its time on the worlds both reach at most 0.9 x the DWA's, its |change of w| at most
0.8 rad/s. Beside the times, the least time any driver can take on those worlds
(:mod:`navtrain.time_bound`: the straight line at the base's full speed and acceleration), so that
a row whose time bar is below it says so.

Each driver's worlds run in batches of ``--num-envs`` (default :data:`BATCH_WORLDS`), each on seeds
of its own (:mod:`navtrain.kept_batches`); ``--log FILE`` keeps every batch as it ends, so the same
command stopped part way (the end of a working session) goes on from the batch it was in. Writes
``OUT.json`` (every number, and each episode's outcome, time, path length and start-goal distance),
``OUT.md`` (the table) and ``OUT.png`` (success with its interval, collision, time on the worlds
both reach), and prints the table. Dotted overrides after the options apply to every row, after
the row's own (e.g. ``env.episode_length_s=20``).

``--replay EPISODE`` runs one episode of one driver's half of one row again (its batch, on that
batch's seeds: the run's ``--seed``, overrides and ``worlds_per_batch`` as ``--num-envs``) and writes
the gate's trace tick by tick to ``OUT.json`` and its picture to ``OUT.png``
(:mod:`navtrain.episode_replay`), printing its state and path changes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from navtrain.row_log import RowLog, bundle_digest, part_name
from navtrain.time_bound import KinematicLimits, bound_of_contract, least_time

CONTROLLERS = ("policy", "dwa")
DEFAULT_ROWS = ("rooms", "rooms16", "clutter", "corridors+path", "arenas")
TOP_LEVEL = ("env.worlds.curriculum.enabled=false",)
EPISODE_KEYS = ("outcome", "time_s", "path_len", "straight")
"""What the payload keeps of each episode (``straight``: its start-goal distance)."""
BATCH_WORLDS = 100
"""Worlds per batch unless ``--num-envs`` says otherwise: a batch behind the node's gate takes minutes
on a 2-core CPU, and a run stopped part way loses at most the batch it was in."""
GATE_EPISODE_KEYS = ("idle_s", "path_changes")
"""Kept too when the drivers ran behind the node's gate: how long each robot had come no closer to its
goal at the end, and how often the scan map's path in use changed (:class:`navtrain.evaluation.NodeActor`)."""


@dataclass(frozen=True)
class Bar:
    """Issue 30's bar for the policy against the DWA in one row."""

    max_collision: float = 0.005
    max_time_ratio: float = 0.9  # mean time to goal on the worlds both reach, policy / DWA
    max_turn_change: float = 0.8  # [rad/s] mean |change of w| per control tick
    min_worlds: int = 500  # worlds per row the bar is judged on


BAR = Bar()


def both_reached(outcomes: dict[str, np.ndarray], success_code: int) -> np.ndarray:
    """(n,) bool: the worlds every driver reached (``outcomes``: driver -> (n,) outcome codes, the
    same worlds in the same order)."""
    flags = [np.asarray(o) == success_code for o in outcomes.values()]
    return np.logical_and.reduce(flags) if flags else np.zeros(0, dtype=bool)


def on_worlds(values: np.ndarray, mask: np.ndarray) -> float:
    """Mean of ``values`` over ``mask`` (NaN when it selects nothing)."""
    return float(np.asarray(values)[mask].mean()) if mask.any() else math.nan


def row_summary(
    results: dict[str, dict[str, Any]],
    episodes: dict[str, dict[str, np.ndarray]],
    limits: KinematicLimits | None = None,
) -> dict[str, Any]:
    """A row's paired numbers: the worlds both drivers reached, each driver's mean time and path
    length on them, and the verdicts against :data:`BAR`. With ``limits`` (and each world's
    ``straight`` start-goal distance in ``episodes``): the least time any driver can take on those
    worlds (:func:`navtrain.time_bound.least_time`), beside the time the bar asks of the policy."""
    from navtrain.evaluation import SUCCESS

    mask = both_reached({k: v["outcome"] for k, v in episodes.items()}, SUCCESS)
    paired = {
        name: {
            "time_s": on_worlds(episodes[name]["time_s"], mask),
            "path_m": on_worlds(episodes[name]["path_len"], mask),
        }
        for name in episodes
    }
    p, d = results["policy"], results["dwa"]
    ratio = paired["policy"]["time_s"] / paired["dwa"]["time_s"] if mask.any() else math.nan
    checks = {
        "success_at_least_dwa": p["success_rate"] >= d["success_rate"],
        "collision_at_most": p["collision_rate"] <= BAR.max_collision,
        "time_ratio_at_most": bool(ratio <= BAR.max_time_ratio),  # NaN (no world both reach) fails
        "turn_change_at_most": p["command_change_angular"] <= BAR.max_turn_change,
    }
    out = {"both_reached": int(mask.sum()), "paired": paired, "time_ratio": ratio, "checks": checks}
    split = {name: timeout_split(ep) for name, ep in episodes.items() if "idle_s" in ep}
    if split:
        out["timeouts"] = split
    straight = episodes.get("dwa", {}).get("straight")
    if limits is not None and straight is not None and mask.any():
        out["least_time_s"] = on_worlds(least_time(np.asarray(straight), limits), mask)
        out["bar_time_s"] = BAR.max_time_ratio * paired["dwa"]["time_s"]
    return out


def timeout_split(episodes: dict[str, np.ndarray]) -> dict[str, Any]:
    """A driver's timeouts behind the node's gate: how many were *stalled* (no progress toward the goal
    for :data:`navtrain.evaluation.STALLED_S` before the end) and how many *slow* (still getting
    closer), and the mean number of path changes in the timeouts and in the successes."""
    from navtrain.evaluation import STALLED_S, SUCCESS, TIMEOUT

    outcome = np.asarray(episodes["outcome"])
    timeout, success = outcome == TIMEOUT, outcome == SUCCESS
    stalled = timeout & (np.asarray(episodes["idle_s"]) >= STALLED_S)
    out: dict[str, Any] = {"stalled": int(stalled.sum()), "slow": int((timeout & ~stalled).sum())}
    if "path_changes" in episodes:
        changes = np.asarray(episodes["path_changes"], dtype=np.float64)
        out["path_changes_in_timeouts"] = on_worlds(changes, timeout)
        out["path_changes_in_successes"] = on_worlds(changes, success)
    return out


def verdict(row: str, s: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    """One line: whether the policy meets :data:`BAR` in ``row`` and each check's numbers; a row of
    fewer than ``BAR.min_worlds`` worlds says so."""
    p, d = results["policy"], results["dwa"]
    c = s["checks"]
    parts = [
        f"success {100 * p['success_rate']:.1f} % vs {100 * d['success_rate']:.1f} % "
        f"({'ok' if c['success_at_least_dwa'] else 'below the DWA'})",
        f"collision {100 * p['collision_rate']:.1f} % ({'ok' if c['collision_at_most'] else 'over 0.5 %'})",
        f"time on the {s['both_reached']} worlds both reach {s['time_ratio']:.2f}x the DWA's "
        f"({'ok' if c['time_ratio_at_most'] else f'over {BAR.max_time_ratio}x'})",
        f"|dw| {p['command_change_angular']:.2f} rad/s per tick "
        f"({'ok' if c['turn_change_at_most'] else f'over {BAR.max_turn_change}'})",
    ]
    if "least_time_s" in s:
        least, asked = s["least_time_s"], s["bar_time_s"]
        below = " (below it: no driver can)" if asked < least else ""
        parts.append(
            f"there no driver takes less than {least:.2f} s (straight line, full speed and acceleration): "
            f"the DWA took {s['paired']['dwa']['time_s'] / least:.2f}x that, the bar asks {asked:.2f} s{below}"
        )
    met = "meets" if all(c.values()) else "does NOT meet"
    n = int(p.get("episodes", BAR.min_worlds))
    size = "" if n >= BAR.min_worlds else f" on {n} worlds (the bar is judged on {BAR.min_worlds})"
    return f"{row}: the policy {met} the bar{size}: " + "; ".join(parts)


def pct(v: float) -> str:
    return "—" if v is None or math.isnan(v) else f"{100 * v:.1f} %"


def span(iv: list[float]) -> str:
    return f"{100 * iv[0]:.1f}–{100 * iv[1]:.1f}" if iv else "—"


def num(v: float, fmt: str) -> str:
    return "—" if v is None or math.isnan(v) else fmt.format(v)


def table(payload: dict[str, Any]) -> str:
    lines = [
        "| row | driver | success [95 % CI] | collision [95 % CI] | timeout | worlds both reach | "
        "time to goal on them | path on them | \\|Δw\\| per tick | \\|Δv\\| per tick |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row, data in payload["rows"].items():
        for name in CONTROLLERS:
            r, pr = data["results"][name], data["summary"]["paired"][name]
            split = data["summary"].get("timeouts", {}).get(name)
            stalled = f" ({split['stalled']} stalled)" if split and split["stalled"] + split["slow"] else ""
            lines.append(
                f"| {row} | {name} | {pct(r['success_rate'])} [{span(r['success_interval'])}] | "
                f"{pct(r['collision_rate'])} [{span(r['collision_interval'])}] | {pct(r['timeout_rate'])}{stalled} | "
                f"{data['summary']['both_reached']} | {num(pr['time_s'], '{:.2f} s')} | "
                f"{num(pr['path_m'], '{:.2f} m')} | {num(r['command_change_angular'], '{:.2f} rad/s')} | "
                f"{num(r['command_change_linear'], '{:.2f} m/s')} |"
            )
    return "\n".join(lines) + "\n"


def plot(payload: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(payload["rows"])
    x = np.arange(len(rows))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for k, name in enumerate(CONTROLLERS):
        off = (k - 0.5) * 0.38
        res = [payload["rows"][r]["results"][name] for r in rows]
        succ = np.array([100 * r["success_rate"] for r in res])
        lo = np.array([100 * r["success_interval"][0] for r in res])
        hi = np.array([100 * r["success_interval"][1] for r in res])
        bars = axes[0].bar(x + off, succ, 0.38, yerr=[succ - lo, hi - succ], capsize=3, label=name)
        axes[0].bar_label(bars, fmt="%.1f", fontsize=7, padding=6)
        bars = axes[1].bar(x + off, [100 * r["collision_rate"] for r in res], 0.38, label=name)
        axes[1].bar_label(bars, fmt="%.1f", fontsize=7)
        times = [payload["rows"][r]["summary"]["paired"][name]["time_s"] for r in rows]
        bars = axes[2].bar(x + off, np.nan_to_num(times), 0.38, label=name)
        axes[2].bar_label(bars, fmt="%.1f", fontsize=7)
    bounded = [i for i, r in enumerate(rows) if "least_time_s" in payload["rows"][r]["summary"]]
    for i in bounded:  # no driver can be faster (navtrain.time_bound)
        summary = payload["rows"][rows[i]]["summary"]
        least = summary["least_time_s"]
        axes[2].hlines(
            summary["bar_time_s"],
            i - 0.45,
            i + 0.45,
            colors="0.4",
            lw=1.0,
            ls="--",
            label=f"bar ({BAR.max_time_ratio}x DWA)" if i == bounded[0] else None,
        )
        axes[2].hlines(
            least, i - 0.45, i + 0.45, colors="k", lw=1.2, label="least possible" if i == bounded[0] else None
        )
    labels = [f"{r}\n({payload['rows'][r]['summary']['both_reached']} both)" for r in rows]
    for ax, title, unit in (
        (axes[0], "success (95 % interval)", "%"),
        (axes[1], "collision", "%"),
        (axes[2], "time to goal on worlds both reach", "s"),
    ):
        ax.set_xticks(x, labels if ax is axes[2] else rows, fontsize=7)
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=9)
    axes[1].axhline(100 * BAR.max_collision, color="k", lw=0.8, ls="--")
    axes[0].legend(loc="lower left", fontsize=8)
    if bounded:
        axes[2].legend(loc="lower left", fontsize=7)
    fig.suptitle(payload["title"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def parse_rows(text: str | list[str] | None) -> list[Any]:
    """The families suite's rows named in ``text`` (comma-separated, or a list; None: :data:`DEFAULT_ROWS`)."""
    from navtrain.families_suite import ROWS

    by_name = {r.name: r for r in ROWS}
    if isinstance(text, list):
        names = list(text)
    else:
        names = list(DEFAULT_ROWS) if not text else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown or not names:
        raise ValueError(f"--rows: unknown row '{unknown[0] if unknown else text}' (known: {', '.join(by_name)})")
    return [by_name[n] for n in names]


def contract_limits(bundle: str | Path) -> KinematicLimits | None:
    """The bundle's :class:`KinematicLimits`; None for a contract that states no base."""
    from navcontract.bundle import read_contract

    return bound_of_contract(read_contract(bundle))


def drive_row(
    bundle: str | Path,
    name: str,
    definition: dict[str, Any],
    kept: RowLog,
    episodes: int,
    seed: int | None,
    num_envs: int | None,
    dwa_params: str | Path | None,
    params: Any,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, np.ndarray]]]:
    """Both drivers on row ``name``'s worlds, in batches of ``num_envs`` (default :data:`BATCH_WORLDS`)
    with seeds of their own (:func:`navtrain.kept_batches.run_batched`): each driver's result and its
    episodes (:data:`EPISODE_KEYS`). Each batch is kept in ``kept`` (a :class:`navtrain.row_log.RowLog`)
    as it ends, under ``NAME#DRIVER#BATCH``, and each driver's half under ``NAME#DRIVER``: a run stopped
    part way goes on from the batch it was in."""
    from navtrain.evaluation import bundle_evaluator
    from navtrain.kept_batches import BatchKeep, run_batched

    results: dict[str, dict[str, Any]] = {}
    runs: dict[str, dict[str, np.ndarray]] = {}
    for driver in CONTROLLERS:
        half, key = {**definition, "driver": driver}, part_name(name, driver)
        done = kept.get(key, half)
        if done is not None:
            results[driver] = done["results"]
            runs[driver] = {k: np.asarray(v) for k, v in done["episodes"].items()}
            print(f"[compare] {name}, {driver}: kept from an earlier run ({kept.path})", flush=True)
            continue
        evaluator = bundle_evaluator(bundle, driver, definition["overrides"], dwa_params, node=params)
        res, every = run_batched(evaluator, episodes, seed, num_envs or BATCH_WORLDS, BatchKeep(kept, key, half))
        results[driver] = asdict(res)
        keys = [*EPISODE_KEYS, *(k for k in GATE_EPISODE_KEYS if k in every)]
        runs[driver] = {k: every[k] for k in keys}
        kept.put(key, half, {"results": results[driver], "episodes": {k: v.tolist() for k, v in runs[driver].items()}})
        kept.drop_parts(key)
    return results, runs


def run_compare(
    bundle: str | Path,
    rows: list[Any],
    episodes: int,
    seed: int | None = None,
    node: bool = True,
    num_envs: int | None = None,
    dwa_params: str | Path | None = None,
    overrides: list[str] | None = None,
    log: str | Path | None = None,
    log_key: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Both drivers of ``bundle`` on ``episodes`` worlds of each row (:func:`parse_rows`), behind the
    node's gate unless ``node`` is false: the payload :func:`write_outputs` writes. Each driver runs
    ``episodes`` worlds in batches of ``num_envs`` (default :data:`BATCH_WORLDS`), each batch on seeds
    of its own. ``log``: a file that keeps each finished batch, driver's half and row
    (:class:`navtrain.row_log.RowLog`, its key ``log_key`` added to the comparison's own), so that a
    run stopped part way goes on from the batch it was in."""
    from navcontract.guard import GUARD_REVISION
    from navdeploy.node_params import NodeParams
    from navtrain.kept_batches import BATCH_SEED_STRIDE

    params = NodeParams() if node else None
    limits = contract_limits(bundle)
    extra = list(overrides or [])
    where = "behind the node's gate" if node else "bare (runtime alone, the simulator's guard)"
    payload: dict[str, Any] = {
        "bundle": str(bundle),
        "episodes_per_row": episodes,
        "worlds_per_batch": min(episodes, num_envs or BATCH_WORLDS),  # --replay needs it
        "guard_revision": GUARD_REVISION,  # navcontract.guard's rule
        "node_gate": node,
        "overrides": extra,
        "bar": asdict(BAR),
        "title": f"{bundle}: policy vs DWA, {where}, {episodes} worlds per row",
        "seed": None,
        "rows": {},
    }
    key = {
        "suite": "compare",
        "bundle": bundle_digest(Path(bundle)),
        "episodes": episodes,
        "seed": seed,
        "node": node,
        "dwa_params": None if dwa_params is None else str(dwa_params),
        "batch_seed_stride": BATCH_SEED_STRIDE,  # batches with seeds of their own (navtrain.kept_batches)
        "guard_revision": GUARD_REVISION,  # a rule changed since: every batch runs again
        **(log_key or {}),
    }
    by_path = [{**key, "bundle": str(p)} for p in (bundle, Path(bundle).resolve())]  # logs that named the folder
    kept = RowLog(log, key, legacy=by_path)
    for row in rows:
        row_overrides = [*row.overrides, *TOP_LEVEL, *extra]
        definition = {"description": row.description, "overrides": row_overrides}
        done = kept.get(row.name, definition)
        if done is not None:
            payload["rows"][row.name] = done
            payload["seed"] = done["results"]["policy"]["seed"]
            print(f"[compare] {row.name}: kept from an earlier run ({kept.path})", flush=True)
            continue
        results, runs = drive_row(bundle, row.name, definition, kept, episodes, seed, num_envs, dwa_params, params)
        payload["seed"] = results["policy"]["seed"]
        summary = row_summary(results, runs, limits)
        payload["rows"][row.name] = {
            "description": row.description,
            "overrides": row_overrides,
            "results": results,
            "summary": summary,
            "verdict": verdict(row.name, summary, results),
            "episodes": {name: {k: np.asarray(v).tolist() for k, v in runs[name].items()} for name in CONTROLLERS},
        }
        kept.put(row.name, definition, payload["rows"][row.name])
        print(f"[compare] {payload['rows'][row.name]['verdict']}", flush=True)
    return payload


def replay_episode(
    bundle: str | Path,
    row: Any,
    driver: str,
    episode: int,
    seed: int | None,
    num_envs: int,
    dwa_params: str | Path | None = None,
    overrides: list[str] | None = None,
    png: Path | None = None,
) -> dict[str, Any]:
    """Episode ``episode`` of ``driver``'s half of row ``row`` again, behind the node's gate, with the
    gate's trace tick by tick (:func:`navtrain.episode_replay.replay`): ``num_envs`` is the run's
    ``worlds_per_batch``, ``seed`` and ``overrides`` the run's."""
    from navdeploy.node_params import NodeParams
    from navtrain.episode_replay import replay
    from navtrain.evaluation import bundle_evaluator

    row_overrides = [*row.overrides, *TOP_LEVEL, *(overrides or [])]
    evaluator = bundle_evaluator(bundle, driver, row_overrides, dwa_params, node=NodeParams())
    seed = evaluator.cfg.runner.eval_seed if seed is None else seed
    return replay(evaluator, f"{row.name}, {driver}", row_overrides, episode, seed, num_envs, png=png)


def write_outputs(payload: dict[str, Any], stem: str | Path) -> list[Path]:
    """``STEM.json`` (everything), ``STEM.md`` (the table and verdicts), ``STEM.png``."""
    out = Path(stem)
    out.parent.mkdir(parents=True, exist_ok=True)
    notes = [data["verdict"] for data in payload["rows"].values()]
    if any("timeouts" in data["summary"] for data in payload["rows"].values()):
        from navtrain.evaluation import PROGRESS_STEP, STALLED_S

        notes.append(
            f"stalled: a timeout whose robot came no {PROGRESS_STEP:g} m closer to its goal in the last "
            f"{STALLED_S:g} s; the others were still getting closer when time ran out"
        )
    paths = [out.with_suffix(".json"), out.with_suffix(".md"), out.with_suffix(".png")]
    paths[0].write_text(json.dumps(payload, indent=1) + "\n")
    paths[1].write_text(f"{payload['title']}.\n\n" + table(payload) + "\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    plot(payload, paths[2])
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", required=True, help="exported bundle folder (policy.onnx + contract.json)")
    p.add_argument("--episodes", type=int, default=500, help="worlds per row")
    p.add_argument("--seed", type=int, default=None, help="world seed (default: runner.eval_seed of the bundle)")
    p.add_argument("--rows", default=None, help=f"comma-separated family rows (default: {','.join(DEFAULT_ROWS)})")
    p.add_argument("--bare", action="store_true", help="without the node's gate: the runtime alone, the sim's guard")
    p.add_argument(
        "--num-envs",
        type=int,
        default=None,
        help=f"worlds per batch, stepped at once and kept in --log as the batch ends (default: {BATCH_WORLDS})",
    )
    p.add_argument("--dwa-params", default=None, help="DWA parameters YAML (default: navdeploy/dwa.yaml)")
    p.add_argument("--out", default="compare", help="output stem: OUT.json, OUT.md, OUT.png")
    p.add_argument(
        "--log",
        default=None,
        help="a file that keeps each batch, each driver's half and each row as it ends: the same command "
        "stopped part way goes on from the batch it was in",
    )
    p.add_argument(
        "--replay",
        type=int,
        default=None,
        metavar="EPISODE",
        help="with one --rows, --driver and the run's --num-envs (its JSON's worlds_per_batch) and --seed: "
        "that episode again behind the node's gate, its gate's trace tick by tick in OUT.json and drawn in OUT.png",
    )
    p.add_argument("--driver", choices=CONTROLLERS, default=None, help="with --replay: whose episode")
    p.add_argument("overrides", nargs="*", help="dotted config overrides for every row, after the row's own")
    args = p.parse_args(argv)
    if not (Path(args.bundle) / "policy.onnx").is_file():
        print(f"nav-compare: no bundle (policy.onnx + contract.json) in {args.bundle}", file=sys.stderr)
        return 2
    if args.episodes < 1:
        print(f"nav-compare: --episodes must be >= 1, got {args.episodes}", file=sys.stderr)
        return 2
    try:
        rows = parse_rows(args.rows)
    except ValueError as err:
        print(f"nav-compare: {err}", file=sys.stderr)
        return 2
    if args.replay is not None:
        return replay_main(args, rows)
    payload = run_compare(
        args.bundle,
        rows,
        args.episodes,
        args.seed,
        not args.bare,
        args.num_envs,
        args.dwa_params,
        args.overrides,
        log=args.log,
    )
    paths = write_outputs(payload, args.out)
    print(table(payload))
    print(f"wrote {', '.join(str(p) for p in paths)}")
    return 0


def replay_main(args: argparse.Namespace, rows: list[Any]) -> int:
    """``nav-compare --replay EPISODE``: one episode of one driver's half of one row again."""
    missing = [
        flag
        for flag, bad in (
            ("exactly one --rows", args.rows is None or len(rows) != 1),
            ("--driver", args.driver is None),
            ("the run's --num-envs (its JSON's worlds_per_batch)", args.num_envs is None),
            ("no --bare (the trace is the gate's)", args.bare),
        )
        if bad
    ]
    if missing:
        print(f"nav-compare: --replay needs {', '.join(missing)}", file=sys.stderr)
        return 2
    png = Path(args.out).with_suffix(".png")
    out = replay_episode(
        args.bundle, rows[0], args.driver, args.replay, args.seed, args.num_envs, args.dwa_params, args.overrides, png
    )
    path = Path(args.out).with_suffix(".json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(
        f"[compare] {out['row']} episode {out['episode']} (batch of {out['num_envs']}): {out['outcome']} after "
        f"{out['time_s']:.1f} s, {out['path_m']:.1f} m driven, {out['idle_s']:.1f} s without progress at the end"
    )
    last = None
    for tick in out["ticks"]:
        if tick["state"] != last or "switch" in tick:
            what = f"{tick['state']}: {tick['reason']}" + (f"; new path ({tick['switch']})" if "switch" in tick else "")
            print(f"  t {tick['t']:6.1f} s  {what}")
            last = tick["state"]
    print(f"wrote {path} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
