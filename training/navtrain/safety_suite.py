"""The safety suite: what the robot runs, driven through thin-post clutter, counted for collisions
and for getting stuck where the world is passable.

    python training/evaluate.py --suite safety --bundle DIR --controller policy|dwa [--episodes 1000]
    python training/evaluate.py --suite safety --bundle DIR --controller dwa --rows posts270 --num-envs 100 \
        --replay 426 --out STEM

Every episode runs behind the node's own command gate (:class:`navtrain.evaluation.NodeActor`:
``policy_node``'s defaults, a 720-beam lidar, the scan map, stuck handling, the smoother and the
guard last; the simulator's guard off), with the bundle's training randomisation on (delays,
actuator lag, acceleration limits, scan and odometry errors), in clutter fields of posts of radius
0.075 m and no wall pieces, at the top level of the family. The posts sit on a 0.5 m grid with
0.08 m of jitter, so neighbouring posts leave gaps from a few centimetres narrower to a few wider
than the robot. The start heading is drawn at random, so robots set off sideways and backwards.

Rows:

* ``posts``: a 360-degree lidar;
* ``posts270``: a 270-degree lidar centred on forward (the 90 degrees behind the robot unseen).

Per row: success, collision and timeout rates with Wilson intervals, and the timeouts among the
worlds that are **passable for the guard as its lidar reads them**: the grid planner
(:mod:`navsim.grid_planner`) finds a path that keeps the guard's passing clearance
(:meth:`navcontract.guard.GuardRule.passing_clearance` on the contract's beams) from every surface,
plus that world's lidar error (:func:`lidar_error`). A lidar that reads a post 2 cm short shows every
gap 2 cm narrower, to the guard and to the map alike: a gap wider than the guard's clearance by less
than that is one the guard rightly refuses, on that robot. The worlds passable with a perfect lidar
(``passable_nominal``) and the timeouts among them are reported beside. The bars: no collision at
all; timeouts in at most 0.5 % of the passable worlds. Those timeouts are split into *stalled* (no progress toward the goal
for :data:`STALLED_S` before the end) and *slow* (still getting closer). Writes ``STEM.json``
(with each episode's outcome, time and distance driven), ``STEM.md`` and ``STEM.png``.

Each batch of ``num_envs`` worlds has seeds of its own (:data:`navtrain.kept_batches.BATCH_SEED_STRIDE`), so one episode
the JSON names runs again by itself: ``--replay EPISODE`` with one ``--rows`` and the run's
``--num-envs`` writes ``STEM.json`` with the trace of its gate, tick by tick (state, reason, pose,
command, sub-goal, the guard's scale), and prints its state changes.

A row of 1,000 episodes of 60 s takes hours on a 2-core CPU. ``--batch-log FILE`` keeps each
finished batch in FILE (:class:`navtrain.row_log.RowLog`, keyed by the driver, the bundle's hash
and the seed; each batch by its row, overrides, batch size and index), so that a run stopped part
way (a signal, the end of a working session) goes on from the next batch when run again with the
same FILE. Like the recipes' row logs it does not know the code that drove a batch: after a change
to the gate or the simulator, start a new FILE.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from navcontract.guard import GUARD_REVISION
from navsim.outcomes import OUTCOMES, Outcome
from navsim.world_pool import plan_worlds
from navtrain.evaluation import (
    PROGRESS_STEP,
    STALLED_S,
    Evaluator,
    NodeActor,
    eval_env,
    run_episodes,
    wilson_interval,
    with_overrides,
)
from navtrain.families_suite import Row
from navtrain.kept_batches import BatchKeep, add_counts, kept_or_run, start_batch
from navtrain.row_log import RowLog
from navtrain.suite_files import write_suite_files

SUITE = "safety"
POST_RADIUS = 0.075
"""[m] The posts' radius: thin, as table legs and poles are."""

WORLDS = (
    "env.worlds.families={clutter: 1.0}",
    "env.worlds.path_following=0.0",
    "env.worlds.curriculum.enabled=false",
    f"env.worlds.clutter.post_radius=[{POST_RADIUS},{POST_RADIUS}]",
    "env.worlds.clutter.piece_share=0.0",
    "env.worlds.certify=radius",  # gaps narrower than the guard passes stay in the stream; passable() says which
)
EPISODE_S = 60.0
"""[s] How long ``nav-evaluate --suite safety`` lets an episode run (unless its overrides set
``env.episode_length_s``): twice the training episode. The suite counts robots that stay stuck, not
slow ones; at 30 s a detour round a closed gap at the DWA's speed in thin posts still ran out of
time while getting closer (the successes' time reached 29.9 s), and such timeouts counted as stuck.
Time to goal is :mod:`navtrain.compare`'s measure."""
MAX_COLLISION_RATE = 0.0
MAX_STUCK_RATE = 0.005
"""The bars: collisions over all episodes, timeouts over the episodes in worlds passable for the guard."""


ROWS = (
    Row("posts", "thin posts, 360-degree lidar", ("env.lidar.fov_deg=360.0",)),
    Row("posts270", "thin posts, 270-degree lidar", ("env.lidar.fov_deg=270.0",)),
)


def passable_clearance(act: NodeActor, env: Any) -> float:
    """[m] The clearance a passable world keeps: the guard's passing one (no guard: the robot's radius)."""
    clearance = act.settings.plan_clearance
    return float(env.radius) if clearance is None else float(clearance)


LIDAR_ERROR_STEP = 0.005
"""[m] A world's lidar error is rounded up to a multiple of this for the passable check (one grid
planner run per multiple that occurs)."""


def lidar_error(env: Any, clearance: float) -> np.ndarray:
    """(n,) [m] How much nearer than they are each world's lidar shows surfaces at the guard's
    passing distance ``clearance``: the short reading of its calibration (``lidar_bias``'s
    ``scale * range + offset`` below the true range, none where it reads long) plus one standard
    deviation of its range noise (``lidar_noise``'s std, else ``env.lidar.noise_std``). The node's
    sector minimum of n noisy beams reads about 1.5 standard deviations short on average for n = 10;
    one is the smaller allowance. The values are those of the episode the env was last reset to."""
    rand = env.randomization
    n = env.num_envs
    short = np.zeros(n)
    if rand.enabled("lidar_bias"):
        scale = rand.value("lidar_bias", "scale").cpu().numpy().astype(np.float64)
        offset = rand.value("lidar_bias", "offset").cpu().numpy().astype(np.float64)
        short = np.maximum(0.0, -((scale - 1.0) * clearance + offset))
    if rand.enabled("lidar_noise"):
        std = rand.value("lidar_noise", "std").cpu().numpy().astype(np.float64)
    else:
        std = np.full(n, float(env.env_cfg.lidar.noise_std))
    return short + std


def passable_for_lidar(env: Any, rooms: Any, clearance: float, error: np.ndarray) -> np.ndarray:
    """(n,) bool: :func:`passable` at ``clearance`` plus each world's ``error`` (rounded up to
    :data:`LIDAR_ERROR_STEP`)."""
    levels = np.ceil(np.round(np.asarray(error) / LIDAR_ERROR_STEP, 6)) * LIDAR_ERROR_STEP
    out = np.zeros(len(levels), dtype=bool)
    for level in np.unique(levels):
        chosen = levels == level
        out[chosen] = passable(env, rooms, clearance + float(level))[chosen]
    return out


def row_names() -> list[str]:
    return [r.name for r in ROWS]


def passable(env: Any, rooms: Any, clearance: float) -> np.ndarray:
    """(n,) bool: the grid planner finds a path from start to goal keeping ``clearance`` from every
    surface in each world of ``rooms`` (one family, so one grid)."""
    return np.asarray(plan_worlds(rooms, env.env_cfg, env.geometry, clearance).feasible, dtype=bool)


def row_overrides(row: Row, episode_s: float | None) -> list[str]:
    """The suite's worlds, the row's lidar and (when given) the episodes' length."""
    length = [] if episode_s is None else [f"env.episode_length_s={float(episode_s)}"]
    return [*WORLDS, *row.overrides, *length]


BATCH_KEYS = ("outcome", "time_s", "path_m", "lidar_error_m", "passable", "passable_nominal", "idle_s")
"""What a kept batch holds for each of its worlds (and ``gate_states``, its gate's state counts)."""


def run_batch(
    env: Any, act: NodeActor, gen: torch.Generator, seed: int, batch: int, row: Row, clearance: float
) -> dict:
    """Batch ``batch`` of the row's stream: each world's outcome (:data:`BATCH_KEYS`) and the gate's
    state counts over the batch."""
    before = dict(act.states)
    rooms = start_batch(env, act, gen, seed, batch)
    res, _ = run_episodes(env, act, rooms, label=f"safety {row.name}")
    error = lidar_error(env, clearance)  # the randomisation of the batch just run
    return {
        "outcome": [int(c) for c in res["outcome"]],
        "time_s": [float(t) for t in res["time_s"]],
        "path_m": [float(d) for d in res["path_len"]],
        "lidar_error_m": [float(e) for e in error],
        "passable": [bool(b) for b in passable_for_lidar(env, rooms, clearance, error)],
        "passable_nominal": [bool(b) for b in passable(env, rooms, clearance)],
        "idle_s": [float(t) for t in act.idle_seconds()],
        "gate_states": {k: int(v - before.get(k, 0)) for k, v in act.states.items() if v != before.get(k, 0)},
    }


def run_row(
    evaluator: Evaluator,
    row: Row,
    episodes: int,
    seed: int,
    num_envs: int | None,
    episode_s: float | None = None,
    log: RowLog | None = None,
) -> dict[str, Any]:
    """One row: ``episodes`` worlds of the seed's stream behind the node's gate; batches kept in
    ``log`` are taken from it, each new one is put there as it ends."""
    cfg = with_overrides(evaluator.cfg, row_overrides(row, episode_s))
    env, seed = eval_env(cfg, episodes, seed, num_envs, evaluator.device)
    act = evaluator.make_act(env)
    if not isinstance(act, NodeActor):
        raise ValueError("the safety suite runs behind the node's gate: evaluate a bundle with --node")
    clearance = passable_clearance(act, env)
    columns, states = row_batches(env, act, row, episodes, seed, episode_s, clearance, log)
    entry = row_entry(columns, clearance)
    return {
        "name": row.name,
        "description": row.description,
        "overrides": row_overrides(row, episode_s),
        "episode_s": float(cfg.env.episode_length_s),
        "num_envs": env.num_envs,  # worlds per batch: --replay needs the same
        **entry,
        "gate_states": dict(sorted(states.items())),
    }


def row_batches(
    env: Any,
    act: NodeActor,
    row: Row,
    episodes: int,
    seed: int,
    episode_s: float | None,
    clearance: float,
    log: RowLog | None,
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The row's episodes, batch by batch (kept ones from ``log``): each world's
    :data:`BATCH_KEYS` in the stream's order, and the gate's state counts over them all."""
    gen = torch.Generator(device=env.device)
    columns: dict[str, list] = {k: [] for k in BATCH_KEYS}
    states: dict[str, int] = {}
    definition = {"row": row.name, "overrides": row_overrides(row, episode_s), "num_envs": env.num_envs}
    keep = None if log is None else BatchKeep(log, row.name, definition)

    def run(batch: int) -> dict[str, Any]:
        return run_batch(env, act, gen, seed, batch, row, clearance)

    for kept, take in kept_or_run(keep, episodes, env.num_envs, run, f"[safety] {row.name}"):
        for k in BATCH_KEYS:
            columns[k].append(np.asarray(kept[k][:take]))
        add_counts(states, kept["gate_states"])
        print(f"[safety] {row.name} so far: {running_summary(columns)}", flush=True)
    return {k: np.concatenate(v) for k, v in columns.items()}, states


def running_summary(columns: dict[str, list]) -> str:
    """One line on a row's batches so far (each :data:`BATCH_KEYS` column a list of per-batch arrays,
    in the stream's order): episodes, success, collisions and stuck in the passable worlds against
    the bars, with the episodes' numbers."""
    oc = np.concatenate(columns["outcome"])
    ok = np.concatenate(columns["passable"]).astype(bool)
    hit = np.nonzero(oc == OUTCOMES.index(Outcome.COLLISION))[0]
    stuck = np.nonzero((oc == OUTCOMES.index(Outcome.TIMEOUT)) & ok)[0]
    passable = int(ok.sum())

    def named(found: np.ndarray) -> str:
        return f" (episode {', '.join(str(int(i)) for i in found)})" if len(found) else ""

    share = f", {100.0 * len(stuck) / passable:.2f} %" if passable else ""
    return (
        f"{len(oc)} episodes, success {100.0 * float((oc == OUTCOMES.index(Outcome.SUCCESS)).mean()):.1f} %, "
        f"{len(hit)} collisions{named(hit)}, stuck in {len(stuck)} of {passable} passable{share}{named(stuck)} "
        f"(bars: {MAX_COLLISION_RATE:g} collisions, at most {100.0 * MAX_STUCK_RATE:g} % stuck)"
    )


def row_entry(columns: dict[str, np.ndarray], clearance: float) -> dict[str, Any]:
    """A row's counts and rates against the bars, from each world's :data:`BATCH_KEYS`."""
    oc, times, driven = columns["outcome"], columns["time_s"], columns["path_m"]
    error_m, idle_s = columns["lidar_error_m"], columns["idle_s"]
    ok, ok_nominal = columns["passable"].astype(bool), columns["passable_nominal"].astype(bool)
    code = {o: OUTCOMES.index(o) for o in (Outcome.SUCCESS, Outcome.COLLISION, Outcome.TIMEOUT)}
    n = len(oc)
    collisions = int((oc == code[Outcome.COLLISION]).sum())
    stuck_mask = (oc == code[Outcome.TIMEOUT]) & ok
    stuck = int(stuck_mask.sum())
    stalled = int((stuck_mask & (idle_s >= STALLED_S)).sum())
    stuck_nominal = int(((oc == code[Outcome.TIMEOUT]) & ok_nominal).sum())
    return {
        "episodes": n,
        "success_rate": float((oc == code[Outcome.SUCCESS]).mean()),
        "success_interval": wilson_interval(int((oc == code[Outcome.SUCCESS]).sum()), n),
        "collisions": collisions,
        "collision_rate": collisions / n,
        "collision_interval": wilson_interval(collisions, n),
        "timeout_rate": float((oc == code[Outcome.TIMEOUT]).mean()),
        "passable": int(ok.sum()),
        "passable_clearance_m": clearance,
        "passable_rule": "the guard's passing clearance plus the world's lidar error",
        "passable_nominal": int(ok_nominal.sum()),  # with a perfect lidar
        "stuck_in_passable_nominal": stuck_nominal,
        "stuck_rate_nominal": stuck_nominal / max(1, int(ok_nominal.sum())),
        "stuck_in_passable": stuck,
        "stuck_rate": stuck / max(1, int(ok.sum())),
        "stalled_in_passable": stalled,  # of stuck_in_passable: no progress for STALLED_S before the end
        "slow_in_passable": stuck - stalled,  # of stuck_in_passable: still getting closer
        "stuck_interval": wilson_interval(stuck, max(1, int(ok.sum()))),
        # Which worlds (their index in the row's stream) to trace: each stuck one, and each collision.
        "stuck_worlds": [
            {
                "episode": int(i),
                "stalled": bool(idle_s[i] >= STALLED_S),
                "idle_s": round(float(idle_s[i]), 1),
                "lidar_error_m": round(float(error_m[i]), 4),
            }
            for i in np.flatnonzero(stuck_mask)
        ],
        "collision_worlds": [int(i) for i in np.flatnonzero(oc == code[Outcome.COLLISION])],
        # Each episode's outcome and time, in the row's stream order (--replay EPISODE runs one again).
        "episode_outcomes": [str(OUTCOMES[int(c)]) for c in oc],
        "episode_time_s": [round(float(t), 2) for t in times],
        "episode_path_m": [round(float(d), 3) for d in driven],
        "episode_lidar_error_m": [round(float(e), 4) for e in error_m],
        "meets_bar": collisions / n <= MAX_COLLISION_RATE and stuck / max(1, int(ok.sum())) <= MAX_STUCK_RATE,
    }


def run_suite(
    evaluator: Evaluator,
    episodes: int = 1000,
    seed: int | None = None,
    num_envs: int | None = None,
    rows: list[str] | None = None,
    episode_s: float | None = None,
    log: str | Path | None = None,
    log_key: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every row (or those named in ``rows``) with the same seed stream; each episode runs for
    ``episode_s`` seconds (None: the evaluator's ``env.episode_length_s``; the CLI's default is
    :data:`EPISODE_S`). ``log``: a file that keeps each finished batch (its key ``log_key``, naming
    the bundle, added to the suite's own), so that a run stopped part way goes on from the next batch."""
    chosen = [r for r in ROWS if rows is None or r.name in rows]
    used_seed = evaluator.cfg.runner.eval_seed if seed is None else seed
    kept = None
    if log is not None:
        key = {"suite": SUITE, "driver": evaluator.label, "seed": used_seed, "guard_revision": GUARD_REVISION}
        kept = RowLog(log, {**key, **(log_key or {})})
    entries = []
    for k, row in enumerate(chosen, 1):
        t0 = time.perf_counter()
        entry = run_row(evaluator, row, episodes, used_seed, num_envs, episode_s, log=kept)
        print(
            f"[safety] {k}/{len(chosen)} {row.name}: collisions {entry['collisions']}/{entry['episodes']}, stuck "
            f"{entry['stuck_in_passable']}/{entry['passable']} passable ({entry['stalled_in_passable']} stalled), "
            f"success {100 * entry['success_rate']:.1f} % ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        entries.append(entry)
    return {
        "suite": SUITE,
        "episodes": episodes,
        "seed": used_seed,
        "driver": evaluator.label,
        "guard_revision": GUARD_REVISION,
        "bars": {"collision_rate": MAX_COLLISION_RATE, "stuck_rate_in_passable": MAX_STUCK_RATE},
        "rows": entries,
    }


def markdown(payload: dict[str, Any]) -> str:
    def pct(v: float) -> str:
        return f"{100 * v:.1f} %"

    def span(iv: list[float]) -> str:
        return f"{100 * iv[0]:.1f}–{100 * iv[1]:.1f} %"

    lines = [
        f"Safety suite: {payload['driver']}, {payload['episodes']} thin-post clutter fields per row, seed "
        f"{payload['seed']}, training randomisation on, episodes of "
        f"{payload['rows'][0]['episode_s'] if payload['rows'] else '-'} s. Bars: no collision; timeouts in at most "
        f"{100 * MAX_STUCK_RATE:.1f} % of the worlds passable for the guard.",
        "",
        "| row | success | collisions | collision (95 %) | passable worlds | stuck in passable (stalled / slow) "
        "| stuck (95 %) | bar | passable, perfect lidar | stuck there |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in payload["rows"]:
        lines.append(
            f"| {r['name']} | {pct(r['success_rate'])} | {r['collisions']}/{r['episodes']} | "
            f"{span(r['collision_interval'])} | {r['passable']} | {r['stuck_in_passable']} "
            f"({r['stalled_in_passable']} / {r['slow_in_passable']}) | "
            f"{span(r['stuck_interval'])} | {'met' if r['meets_bar'] else 'not met'} | "
            f"{r.get('passable_nominal', '-')} | {r.get('stuck_in_passable_nominal', '-')} |"
        )
    lines += [
        "",
        "Passable: the grid planner's path keeps the guard's passing clearance "
        f"({payload['rows'][0]['passable_clearance_m']:.3f} m) plus the world's lidar error (its calibration's "
        "short reading and one standard deviation of its noise) from every surface; with a perfect lidar, the "
        "clearance alone. Stalled: no "
        f"{PROGRESS_STEP:g} m of progress toward the goal in the last {STALLED_S:g} s; slow: still getting closer "
        "when time ran out."
        if payload["rows"]
        else "",
    ]
    return "\n".join(lines) + "\n"


def plot(payload: dict[str, Any], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = payload["rows"]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(2.2 * len(rows) + 2, 3.6))
    bars = (
        ("success", [100 * r["success_rate"] for r in rows], "tab:green"),
        ("collision", [100 * r["collision_rate"] for r in rows], "tab:red"),
        ("stuck in passable", [100 * r["stuck_rate"] for r in rows], "tab:orange"),
    )
    for k, (label, values, colour) in enumerate(bars):
        ax.bar(x + (k - 1) * 0.27, values, 0.27, label=f"{label} %", color=colour)
        for xi, v in zip(x, values, strict=True):
            ax.text(xi + (k - 1) * 0.27, v + 1, f"{v:.1f}", ha="center", fontsize=8)
    ax.set_xticks(x, [r["name"] for r in rows])
    ax.set_ylim(0, 105)
    ax.set_title(f"safety suite: {payload['driver']} ({payload['episodes']} worlds per row)", fontsize=9)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_outputs(payload: dict[str, Any], stem: str | Path) -> list[Path]:
    """``STEM.json``, ``STEM.md`` and ``STEM.png`` of ``payload``."""
    return write_suite_files(payload, stem, markdown, plot)
