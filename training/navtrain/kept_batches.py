"""Evaluation in batches that carry their own seeds, each kept in a file as it ends.

A long evaluation behind the node's gate (hundreds of worlds, hours on a 2-core CPU) is run as
batches of ``num_envs`` worlds. Batch ``b`` of the stream of ``seed`` draws its worlds, the sensor
noise, the randomisation and the robot lidar's noise from ``seed + b * BATCH_SEED_STRIDE``
(:func:`start_batch`), so what a batch gives does not depend on the batches run before it. Each
finished batch goes into a :class:`navtrain.row_log.RowLog` under ``NAME#b``; the same run started
again takes the kept batches from the file and runs only the others, and ends with the numbers an
uninterrupted run gives.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from navsim.env import NavEnv
from navsim.families.rooms import RoomBatch
from navtrain.evaluation import (
    ActFn,
    EvalResult,
    Evaluator,
    NodeActor,
    RobotSideActor,
    eval_env,
    run_episodes,
    summarize,
)
from navtrain.row_log import RowLog, part_name

BATCH_SEED_STRIDE = 1_000_000
"""Batch ``b`` runs on seed ``seed + b * BATCH_SEED_STRIDE``. Larger than every offset a stream adds
to its seed (``NavEnv.reseed``: 104,729 at most), so no two batches share a stream."""


def batch_seed(seed: int, batch: int) -> int:
    """The seed of batch ``batch`` of the stream of ``seed``."""
    return int(seed) + BATCH_SEED_STRIDE * int(batch)


def start_batch(env: NavEnv, act: ActFn, gen: torch.Generator, seed: int, batch: int) -> RoomBatch:
    """Seed the env, the robot-side controllers' lidar noise and the world generator ``gen`` for batch
    ``batch`` of the stream of ``seed``, and draw its worlds."""
    s = batch_seed(seed, batch)
    gen.manual_seed(s)
    env.reseed(s)
    if isinstance(act, RobotSideActor):
        act.reseed(s)
    return env.new_rooms(env.num_envs, gen)


@dataclass(frozen=True)
class BatchKeep:
    """Where a run keeps its batches: the log, the name its batches go under (``NAME#b``), and the
    definition a kept batch must have been made from to be taken (with the log's key)."""

    log: RowLog
    name: str
    definition: dict[str, Any]


def kept_or_run(
    keep: BatchKeep | None, episodes: int, num_envs: int, run: Callable[[int], dict[str, Any]], tag: str
) -> Iterator[tuple[dict[str, Any], int]]:
    """The batches of ``episodes`` worlds, ``num_envs`` at a time, in order: each batch's kept form
    and how many of its worlds count (the last batch may count fewer than it ran). A batch ``keep``
    holds (under ``NAME#b``, made from ``keep.definition``) is taken from it; any other is
    ``run(b)`` and put there as it ends. Prints ``TAG: done/episodes episodes`` after each."""
    done = 0
    while done < episodes:
        batch = done // num_envs
        how = ""
        if keep is None:
            kept = run(batch)
        else:
            name = part_name(keep.name, batch)
            kept = keep.log.get(name, keep.definition)
            if kept is None:
                kept = run(batch)
                keep.log.put(name, keep.definition, kept)
            else:
                how = f" (batch {batch} kept from an earlier run: {keep.log.path})"
        take = min(num_envs, episodes - done)
        done += take
        yield kept, take
        print(f"{tag}: {done}/{episodes} episodes{how}", flush=True)


def add_counts(total: dict[str, int], more: dict[str, Any]) -> None:
    """Add the counts ``more`` (a batch's gate states) into ``total``."""
    for k, v in more.items():
        total[k] = total.get(k, 0) + int(v)


def run_batch(env: NavEnv, act: ActFn, gen: torch.Generator, seed: int, batch: int, label: str) -> dict[str, Any]:
    """Batch ``batch``, as a log keeps it: each episode's numbers (:func:`navtrain.evaluation.run_episodes`'
    keys, as lists), the gate's state counts over the batch, and the robot-side controllers' calls and
    their seconds."""
    states = dict(act.states) if isinstance(act, NodeActor) else {}
    calls, seconds = (act.calls, act.seconds) if isinstance(act, RobotSideActor) else (0, 0.0)
    rooms = start_batch(env, act, gen, seed, batch)
    res, _ = run_episodes(env, act, rooms, label=label)
    out: dict[str, Any] = {"episodes": {k: np.asarray(v).tolist() for k, v in res.items()}}
    if isinstance(act, NodeActor):
        out["gate_states"] = {k: int(v - states.get(k, 0)) for k, v in act.states.items() if v != states.get(k, 0)}
    if isinstance(act, RobotSideActor):
        out["calls"], out["seconds"] = int(act.calls - calls), float(act.seconds - seconds)
    return out


def run_batched(
    evaluator: Evaluator, episodes: int, seed: int | None, num_envs: int | None, keep: BatchKeep | None = None
) -> tuple[EvalResult, dict[str, np.ndarray]]:
    """``episodes`` worlds of ``evaluator``'s config in batches of ``num_envs`` (default: up to 500),
    each on its own seeds; batches kept in ``keep`` are taken from it, each new one is put there as it
    ends. Returns the summary and the per-episode arrays in world order. The summary is made from the
    kept form of every batch, so a resumed run gives the numbers of an uninterrupted one."""
    cfg = copy.deepcopy(evaluator.cfg)
    env, seed = eval_env(cfg, episodes, seed, num_envs, evaluator.device, controller=evaluator.cfg)
    act = evaluator.make_act(env)
    gen = torch.Generator(device=env.device)
    if keep is not None:
        keep = BatchKeep(keep.log, keep.name, {**keep.definition, "num_envs": env.num_envs})
    parts: list[dict[str, np.ndarray]] = []
    states: dict[str, int] = {}
    calls, seconds = 0, 0.0

    def run(batch: int) -> dict[str, Any]:
        return run_batch(env, act, gen, seed, batch, evaluator.label)

    for kept, take in kept_or_run(keep, episodes, env.num_envs, run, f"[evaluate] {evaluator.label}"):
        parts.append({k: np.asarray(v)[:take] for k, v in kept["episodes"].items()})
        add_counts(states, kept.get("gate_states", {}))
        calls, seconds = calls + kept.get("calls", 0), seconds + kept.get("seconds", 0.0)
    allr = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    result = summarize(allr, cfg, seed, evaluator.label, planned=env.planned, control_period=env.env_cfg.control_period)
    if isinstance(act, RobotSideActor):
        result.compute_ms_per_step = 1e3 * seconds / calls if calls else None
    if isinstance(act, NodeActor):
        result.gate_states = dict(sorted(states.items()))
    return result, allr
