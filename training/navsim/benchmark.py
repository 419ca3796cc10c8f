"""Throughput of the batched simulator: NavEnv.step (MuJoCo Warp + lidar) against C MuJoCo.

    nav-benchmark-sim                          # 64, 1024 and 4096 worlds
    nav-benchmark-sim --num-envs 4096 --steps 30 --json /tmp/bench.json
    nav-benchmark-sim --num-envs 512 --no-reference --families   # what each world family costs

For each world count N it measures, on the same rooms:

* ``env``: env-steps/s of ``NavEnv.step`` with random actions: physics substeps, collision
  check, the lidar, rewards, observations and auto-resets, i.e. what training pays per step.
  The physics and the lidar are also timed alone (``physics``, ``lidar`` columns).
* ``reference``: C MuJoCo on the very same rooms and start poses, built from the one-room C
  MuJoCo world of ``navsim.sim_world``: ``mujoco.rollout`` of the physics substeps for all N
  worlds (one MjModel per world, so each world has its own layout; the rollout runs on as many
  threads as the machine has cores) plus ``mujoco.mj_multiRay`` for the
  72 beams of every world at every control step (a Python loop over worlds, single-threaded:
  the call is too short for threads to pay off). The reference does physics and rays only: no
  resets, rewards or observations.

With ``--rays-per-beam K`` (repeatable) it also sweeps the lidar's sub-rays per sector
(``env.lidar.rays_per_beam``, see ``navsim.sectors``) and reports for each K:

* the **error** of the K-ray sector minimum against the exact sector minimum on the same rooms
  and poses (``--accuracy-worlds`` worlds, their start poses and the poses after the warm-up
  steps): mean, 99th percentile and max per-beam |difference|, and the share of beams off by more
  than 2 cm and 5 cm. The exact minimum is the same kernel with ``REFERENCE_RAYS_PER_BEAM`` rays
  per sector (0.0125 degree apart, edges included): the sector minimum of the walls and convex
  obstacles lies on an edge or at a smooth minimum inside, so that sampling is exact to far
  below a millimetre (tests/sim/test_lidar_parity.py checks the rule against an independent caster);
* the **cost**: NavEnv.step, physics and lidar env-steps/s for every world count.

With ``--families`` it also measures what each world family costs (``navsim.families``): for
every world count, NavEnv.step env-steps/s (and physics and lidar alone) with rooms, clutter
fields, corridors and arenas each alone and with the mix ``FAMILY_MIX``, side by side in one run
and as ratios against rooms (curriculum off, every world at its family's top level,
``--pool-size`` planned worlds per family so that set-up stays short). The timed steps are
rounded up to a multiple of ``env.worlds.refresh_interval``, so the timed window holds the pool
refreshes (planning ``refresh_size`` new worlds) at the rate training pays them; the rows are
timed ``--family-rounds`` times in turn and each measure keeps its best round (under a load that
comes and goes). Per family it also reports the model's obstacle slots, the mean active obstacles per world
(the four walls that close a small world not counted), and the grid planner's cost: one batch of
``--plan-worlds`` draws planned (time per draw, share refused) and
``navsim.world_pool.planned_worlds`` delivering that many feasible worlds (time per world,
redraws included).

Warm-up steps (Warp kernel compilation or cache loading, first allocations) are run before the
clock starts. Progress goes to stderr; the result table to stdout; ``--json`` writes the numbers.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import time
from pathlib import Path

import mujoco
import numpy as np
import torch
from mujoco import rollout

from navcontract.action import action_to_command
from navsim.config import NavConfig
from navsim.config_load import load_config
from navsim.robot import body_to_world, geom_ids
from navsim.sim_world import RayCaster, Room, compile_world_model, place_room, slot_frames

DEFAULT_NUM_ENVS = (64, 1024, 4096)
REFERENCE_RAYS_PER_BEAM = 401
FAMILY_MIX = {"rooms": 0.3, "clutter": 0.3, "corridors": 0.2, "arenas": 0.2}
"""The mix ``--families`` times beside each family alone."""
REFRESH_REPEATS = 3  # pool refreshes timed per family


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _sync(env) -> None:
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)


def memory_in_use(device: str) -> int:
    """Bytes in use: the device's used memory on CUDA, the process's resident memory on the CPU.
    The difference around building and stepping one env is its footprint (approximate: freed memory
    of an earlier, smaller env may be reused)."""
    if str(device).startswith("cuda"):
        free, total = torch.cuda.mem_get_info(torch.device(device))
        return int(total - free)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_warp(env, steps: int, warmup: int, seed: int) -> dict[str, float]:
    """env-steps/s of NavEnv.step, and of its physics and lidar alone."""
    n = env.num_envs
    gen = torch.Generator(device=env.device).manual_seed(seed)
    actions = [torch.rand(n, env.num_actions, generator=gen, device=env.device) * 2 - 1 for _ in range(steps + warmup)]
    for k in range(warmup):
        env.step(actions[k])
    _sync(env)
    log(f"  [warp N={n}] timing {steps} steps of NavEnv.step")
    t0 = time.perf_counter()
    for k in range(steps):
        env.step(actions[warmup + k])
        if (k + 1) % max(1, steps // 4) == 0:
            log(f"    step {k + 1}/{steps}")
    _sync(env)
    t_env = time.perf_counter() - t0

    t0 = time.perf_counter()
    for _ in range(steps):
        env._simulate()
    _sync(env)
    t_phys = time.perf_counter() - t0
    pose = env.pose()
    t0 = time.perf_counter()
    for _ in range(steps):
        env.lidar.scan(pose)
    _sync(env)
    t_lidar = time.perf_counter() - t0
    return {
        "env_steps_per_s": n * steps / t_env,
        "physics_steps_per_s": n * steps / t_phys,
        "lidar_steps_per_s": n * steps / t_lidar,
    }


def _spin(stop) -> None:  # noqa: ANN001 (a multiprocessing Event)
    """A competing busy process: holds one core until told to stop."""
    x = 0
    while not stop.is_set():
        for _ in range(10_000):
            x += 1


def bench_threads(env, steps: int, warmup: int, seed: int) -> list[dict[str, float]]:
    """NavEnv.step with 1 torch thread and with every core, on a quiet machine and with one
    competing busy process (what a laptop always has), side by side in one run."""
    import multiprocessing as mp

    rows = []
    cores = os.cpu_count() or 1
    before = torch.get_num_threads()
    ctx = mp.get_context("spawn")
    for busy in (False, True):
        stop = ctx.Event()
        proc = ctx.Process(target=_spin, args=(stop,), daemon=True) if busy else None
        if proc is not None:
            proc.start()
        try:
            for threads in sorted({1, cores}):
                torch.set_num_threads(threads)
                log(f"  [threads {threads}, {'one busy process' if busy else 'quiet'}]")
                r = bench_warp(env, steps, warmup, seed)
                rows.append({"torch_threads": threads, "busy_process": busy, "env_steps_per_s": r["env_steps_per_s"]})
        finally:
            if proc is not None:
                stop.set()
                proc.join(timeout=10)
    torch.set_num_threads(before)
    return rows


class CReference:
    """C MuJoCo on the rooms of ``env``: rollout for the physics, mj_multiRay for the lidar.

    Built from the one-room C MuJoCo world (``navsim.sim_world``): one model per world from
    :func:`compile_world_model` with that world's room placed in it, the body-frame command
    rotated by :func:`navsim.robot.body_to_world`, the rays cast by :class:`RayCaster`.
    """

    def __init__(self, env, nthread: int) -> None:
        ecfg = env.env_cfg
        self.n = env.num_envs
        self.nthread = nthread
        self.substeps = ecfg.physics_substeps
        self.scaling = env.scaling
        base = compile_world_model(ecfg)
        slots = geom_ids(base)["slots"]
        rooms = [Room.from_batch(env.rooms, i) for i in range(self.n)]
        self.models = []
        for room in rooms:
            m = copy.copy(base)
            place_room(m, slots, room)
            self.models.append(m)
        self.datas = [mujoco.MjData(base) for _ in range(nthread)]
        # Rays: one MjData whose slot geom poses are rewritten per world (walls come from mj_forward).
        self.ray_data = mujoco.MjData(base)
        mujoco.mj_forward(base, self.ray_data)
        self.lidar = RayCaster.from_config(ecfg, base.body("base").id)
        self.slots = slots
        r = env.rooms
        self.slot_xpos, _, self.slot_xmat = slot_frames(
            r.slot_pos.cpu().double().numpy(), r.slot_yaw.cpu().double().numpy(), r.slot_active.cpu().numpy()
        )
        self.spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        nstate = mujoco.mj_stateSize(base, self.spec)
        self.state = np.zeros((self.n, nstate))
        self.out_state = np.zeros((self.n, 1, nstate))
        self.out_sensor = np.zeros((self.n, 1, base.nsensordata))
        data = mujoco.MjData(base)
        for i, room in enumerate(rooms):
            data.qpos[:3] = room.start
            data.qvel[:] = 0
            mujoco.mj_getState(base, data, self.state[i], self.spec)
        qpos_adr = 1  # FULLPHYSICS state: [time, qpos, qvel, act, ...]
        self.qpos_slice = slice(qpos_adr, qpos_adr + base.nq)
        self.dist = np.zeros((self.n, self.lidar.beams.num_beams))
        self.runner = rollout.Rollout(nthread=nthread)

    def close(self) -> None:
        self.runner.close()

    def physics(self, actions: np.ndarray) -> None:
        """One control step: the body-frame command is rotated into the world-frame actuators at
        the current yaw before every substep, as NavEnv does (a held Twist drives an arc)."""
        cmd = action_to_command(actions, self.scaling)
        for _ in range(self.substeps):
            ctrl = body_to_world(cmd, self.state[:, self.qpos_slice][:, 2])
            self.runner.rollout(
                self.models,
                self.datas,
                self.state,
                np.ascontiguousarray(ctrl[:, None, :]),
                nstep=1,
                state=self.out_state,
                sensordata=self.out_sensor,
                skip_checks=True,  # outputs preallocated, inputs contiguous float64
            )
            self.state = np.ascontiguousarray(self.out_state[:, 0])

    def rays(self) -> np.ndarray:
        qpos = self.state[:, self.qpos_slice]
        rd, slots = self.ray_data, self.slots
        for i in range(self.n):
            rd.geom_xpos[slots] = self.slot_xpos[i]
            rd.geom_xmat[slots] = self.slot_xmat[i]
            self.dist[i] = self.lidar.cast(self.models[i], rd, qpos[i])
        return self.dist.copy()


def bench_reference(env, steps: int, warmup: int, nthread: int, seed: int) -> dict[str, float]:
    n = env.num_envs
    log(f"  [C MuJoCo N={n}] building {n} per-world models")
    ref = CReference(env, nthread)
    rng = np.random.default_rng(seed)
    actions = [rng.uniform(-1, 1, (n, env.num_actions)) for _ in range(steps + warmup)]
    try:
        for k in range(warmup):
            ref.physics(actions[k])
            ref.rays()
        log(f"  [C MuJoCo N={n}] timing {steps} steps (rollout on {nthread} threads + mj_multiRay)")
        t_phys = t_rays = 0.0
        for k in range(steps):
            t0 = time.perf_counter()
            ref.physics(actions[warmup + k])
            t1 = time.perf_counter()
            ref.rays()
            t_rays += time.perf_counter() - t1
            t_phys += t1 - t0
            if (k + 1) % max(1, steps // 4) == 0:
                log(f"    step {k + 1}/{steps}")
    finally:
        ref.close()
    return {
        "reference_env_steps_per_s": n * steps / (t_phys + t_rays),
        "reference_physics_steps_per_s": n * steps / t_phys,
        "reference_rays_steps_per_s": n * steps / t_rays,
    }


def lidar_accuracy(
    cfg: NavConfig, rays: list[int], num_envs: int, device: str, seed: int, steps: int = 3
) -> dict[str, dict[str, float]]:
    """Per-beam error of each sub-ray count against the exact sector minimum, same rooms and poses."""
    from navsim.env import NavEnv
    from navsim.lidar import BatchedLidar
    from navsim.sectors import SectorRays

    env = NavEnv(cfg, num_envs=num_envs, device=device, seed=seed)
    e = cfg.env.lidar

    def lidar(k: int) -> BatchedLidar:
        return BatchedLidar(
            env.mj_model,
            env.m,
            env.d,
            env.num_envs,
            e.num_beams,
            e.max_range,
            env.mj_model.body("base").id,
            env.device,
            rays=SectorRays(e.num_beams, k),
        )

    lidars = {k: lidar(k) for k in rays}
    exact_lidar = lidar(REFERENCE_RAYS_PER_BEAM)
    errors: dict[int, list[torch.Tensor]] = {k: [] for k in rays}
    gen = torch.Generator(device=env.device).manual_seed(seed)
    for step in range(steps + 1):
        pose = env.pose()
        exact = exact_lidar.scan(pose)
        for k in rays:
            errors[k].append((lidars[k].scan(pose) - exact).abs().flatten().cpu())
        if step < steps:
            env.step(torch.rand(env.num_envs, env.num_actions, generator=gen, device=env.device) * 2 - 1)
    out = {}
    for k in rays:
        err = torch.cat(errors[k]).double()
        out[str(k)] = {
            "beams": int(err.numel()),
            "mean_m": float(err.mean()),
            "p99_m": float(torch.quantile(err, 0.99)),
            "max_m": float(err.max()),
            "frac_over_2cm": float((err > 0.02).double().mean()),
            "frac_over_5cm": float((err > 0.05).double().mean()),
        }
    return out


def family_rows() -> dict[str, dict[str, float]]:
    """The rows of ``--families``: each family alone, then the mix (row name -> shares)."""
    from navsim.families import FAMILIES

    return {**{f: {f: 1.0} for f in FAMILIES}, "mix": dict(FAMILY_MIX)}


def family_overrides(shares: dict[str, float], pool_size: int, refresh_size: int) -> list[str]:
    """One row's worlds: its shares, curriculum off, a pool of ``pool_size`` per family (the refresh
    no larger than the pool)."""
    text = ", ".join(f"{name}: {share}" for name, share in shares.items())
    return [
        f"env.worlds.families={{{text}}}",
        "env.worlds.curriculum.enabled=false",
        f"env.worlds.pool_size={pool_size}",
        f"env.worlds.refresh_size={min(pool_size, refresh_size)}",
    ]


def active_obstacles(env) -> float:
    """Mean active obstacle slots per world of ``env``, without the ``bound`` walls."""
    active = env.rooms.slot_active.clone()
    bound = torch.as_tensor(env.sizes.role("bound"), dtype=torch.long, device=active.device)
    active[:, bound] = False
    return float(active.sum(dim=1).float().mean())


def planner_cost(cfg: NavConfig, family: str, worlds: int, device: str, seed: int) -> dict[str, float]:
    """The grid planner on ``worlds`` draws of ``family`` at its top level: one batch planned
    (time per draw, share refused), then ``planned_worlds`` delivering that many feasible worlds
    (time per world, redraws included)."""
    from navsim.families import family_half_extent
    from navsim.families.generate import generate_family
    from navsim.families.rooms import RoomGeometry
    from navsim.grid_planner import Grid
    from navsim.robot import slot_sizes
    from navsim.world_pool import plan_worlds, planned_worlds

    env_cfg = cfg.env
    top = env_cfg.worlds.curriculum.levels - 1
    geom = RoomGeometry(env_cfg, slot_sizes(env_cfg), device)
    gen = torch.Generator(device=device).manual_seed(seed)
    grid = Grid(*family_half_extent(env_cfg, family), env_cfg.worlds.grid_resolution)
    t0 = time.perf_counter()
    batch = generate_family(family, top, worlds, env_cfg, geom, gen)
    t1 = time.perf_counter()
    plan = plan_worlds(batch, env_cfg, geom)
    t2 = time.perf_counter()
    _, refused = planned_worlds(family, top, worlds, env_cfg, geom, gen)
    t3 = time.perf_counter()
    w = env_cfg.worlds
    for _ in range(REFRESH_REPEATS):  # what one pool refresh plans (at least world_pool.MIN_DRAW draws)
        planned_worlds(family, top, w.refresh_size, env_cfg, geom, gen)
    refresh_s = (time.perf_counter() - t3) / REFRESH_REPEATS
    return {
        "grid_cells": grid.shape[0] * grid.shape[1],
        "draw_ms_per_world": 1e3 * (t1 - t0) / worlds,
        "plan_ms_per_draw": 1e3 * (t2 - t1) / worlds,
        "refused_share": float(1.0 - plan.feasible.mean()),
        "planned_worlds_ms_per_world": 1e3 * (t3 - t2) / worlds,
        "planned_worlds_refused_draws": int(refused),
        "refresh_ms": 1e3 * refresh_s,
        "refresh_ms_per_step": 1e3 * refresh_s / w.refresh_interval,
    }


def bench_families(
    config: str | None,
    overrides: list[str],
    counts: list[int],
    steps: int,
    warmup: int,
    device: str,
    pool_size: int,
    rounds: int,
    plan_worlds: int,
) -> dict:
    """``--families``: NavEnv.step per family and for the mix at every world count, side by side,
    and the planner's cost per family (see the module docstring)."""
    rows = family_rows()
    refresh = load_config(config, overrides).env.worlds.refresh_size
    cfgs = {
        name: load_config(config, [*overrides, *family_overrides(sh, pool_size, refresh)]) for name, sh in rows.items()
    }
    interval = cfgs["mix"].env.worlds.refresh_interval
    timed = -(-steps // interval) * interval  # whole refresh intervals
    out: dict = {
        "mix": dict(FAMILY_MIX),
        "steps": timed,
        "rounds": rounds,
        "pool_size": pool_size,
        "refresh_interval": interval,
        "refresh_size": cfgs["mix"].env.worlds.refresh_size,
        "plan_worlds": plan_worlds,
        "rows": {name: {"shares": rows[name], "results": {}} for name in rows},
        "planner": {},
    }
    log(f"[families] {timed} timed steps per row (whole refresh intervals of {interval}), best of {rounds} round(s)")
    for n in counts:
        envs = _family_envs(cfgs, n, device, pool_size, out["rows"])
        _time_family_rows(envs, n, timed, warmup, rounds, out["rows"])
        base = out["rows"]["rooms"]["results"][str(n)]["env_steps_per_s"]
        for row in out["rows"].values():
            res = row["results"][str(n)]
            res["ratio_to_rooms"] = res["env_steps_per_s"] / base
        envs.clear()
        gc.collect()
    for family in rows:
        if family == "mix":
            continue
        log(f"[families] planner: {plan_worlds} worlds of {family}")
        out["planner"][family] = planner_cost(cfgs[family], family, plan_worlds, device, seed=cfgs[family].env.seed)
    return out


def _family_envs(cfgs: dict[str, NavConfig], n: int, device: str, pool_size: int, rows: dict) -> dict:
    """A NavEnv of ``n`` worlds per row; each row notes its set-up time at ``n``, whether its worlds come
    from planned pools, its obstacle slots (``bound`` walls apart) and mean active obstacles."""
    from navsim.env import NavEnv

    envs = {}
    for name, cfg in cfgs.items():
        log(f"[families N={n}] {name}: building NavEnv (pool of {pool_size} planned worlds per family)")
        t0 = time.perf_counter()
        env = NavEnv(cfg, num_envs=n, device=device, seed=cfg.env.seed)
        env.randomize_episode_lengths()
        row = rows[name]
        row["planned_pools"] = bool(env.planned)  # False: today's rooms from the spare ring
        row["obstacle_slots"] = int(env.sizes.num_slots)
        row["bound_slots"] = len(env.sizes.role("bound"))
        row["mean_active_obstacles"] = active_obstacles(env)
        row["results"][str(n)] = {"setup_s": time.perf_counter() - t0}
        envs[name] = env
    return envs


def _time_family_rows(envs: dict, n: int, timed: int, warmup: int, rounds: int, rows: dict) -> None:
    """Time every row ``rounds`` times in turn; each measure keeps its best round."""
    for r in range(rounds):
        for name, env in envs.items():
            log(f"[families N={n}] round {r + 1}/{rounds}: {name}")
            got = bench_warp(env, timed, warmup, seed=n)
            best = rows[name]["results"][str(n)]
            for key, value in got.items():
                best[key] = max(best.get(key, 0.0), value)


def print_families(fam: dict, counts: list[int]) -> None:
    spare = [name for name, row in fam["rows"].items() if not row["planned_pools"]]
    planned = f"{', '.join(spare) or 'no row'}: today's rooms from the spare ring, the others from planned pools"
    print(
        f"\nworld families: NavEnv.step env-steps/s (physics / lidar alone) and ratio to rooms, {fam['steps']} timed"
        f" steps per row (pool refreshes included: {fam['refresh_size']} worlds every {fam['refresh_interval']}"
        f" steps), best of {fam['rounds']}; {planned}"
    )
    head = f"{'row':>10} {'slots':>6} {'active':>7}"
    head += "".join(f" {'N=' + str(n) + ' step':>12} {'ratio':>6} {'physics':>9} {'lidar':>9}" for n in counts)
    print(head)
    for name, row in fam["rows"].items():
        line = f"{name:>10} {row['obstacle_slots']:>6} {row['mean_active_obstacles']:>7.1f}"
        for n in counts:
            r = row["results"][str(n)]
            line += (
                f" {r['env_steps_per_s']:>12,.0f} {r['ratio_to_rooms']:>6.2f} {r['physics_steps_per_s']:>9,.0f}"
                f" {r['lidar_steps_per_s']:>9,.0f}"
            )
        print(line)
    print(
        f"\ngrid planner, {fam['plan_worlds']} worlds per family at the top level: one batch of draws planned (ms per"
        " draw, share refused), planned_worlds delivering that many feasible worlds (ms per world), and one pool"
        f" refresh of {fam['refresh_size']} worlds (ms, and spread over the {fam['refresh_interval']} steps between"
        " refreshes)"
    )
    print(
        f"{'family':>10} {'cells':>8} {'draw ms':>8} {'plan ms':>8} {'refused':>8} {'ms/world':>9}"
        f" {'refresh ms':>11} {'per step':>9}"
    )
    for name, c in fam["planner"].items():
        print(
            f"{name:>10} {c['grid_cells']:>8,} {c['draw_ms_per_world']:>8.1f} {c['plan_ms_per_draw']:>8.1f}"
            f" {c['refused_share']:>8.0%} {c['planned_worlds_ms_per_world']:>9.1f} {c['refresh_ms']:>11.1f}"
            f" {c['refresh_ms_per_step']:>9.2f}"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, action="append", help="world count (repeatable)")
    parser.add_argument("--steps", type=int, default=20, help="timed control steps per world count")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (kernel compile/load)")
    parser.add_argument("--device", default=None, help="Warp device (default: env.device of the config)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads of the C rollout")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="torch intra-op threads (default 1: what training collects with)"
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="also time NavEnv.step at the first world count with 1 and all torch threads, quiet and with a "
        "competing busy process",
    )
    parser.add_argument("--no-reference", action="store_true", help="skip the C MuJoCo reference")
    parser.add_argument(
        "--rays-per-beam",
        type=int,
        action="append",
        help="sweep env.lidar.rays_per_beam: error against the exact sector minimum and cost (repeatable)",
    )
    parser.add_argument(
        "--randomization-cost",
        action="store_true",
        help="also time NavEnv.step with randomization.enabled=false: the cost of the randomisation terms",
    )
    parser.add_argument(
        "--guard-cost",
        action="store_true",
        help="also time NavEnv.step with env.guard.enabled=false: the cost of the collision guard",
    )
    parser.add_argument(
        "--launch-cost",
        action="store_true",
        help="also time NavEnv.step and its physics launching every physics kernel from Python instead of "
        "replaying the recorded Warp graph",
    )
    parser.add_argument("--accuracy-worlds", type=int, default=256, help="worlds of the error measurement")
    parser.add_argument(
        "--families",
        action="store_true",
        help="also time NavEnv.step for each world family alone and for the mix, with the planner's cost",
    )
    parser.add_argument("--pool-size", type=int, default=16, help="with --families: planned worlds per family pool")
    parser.add_argument(
        "--family-rounds",
        type=int,
        default=2,
        help="with --families: time the rows this many times in turn, keep the best",
    )
    parser.add_argument("--plan-worlds", type=int, default=32, help="with --families: worlds of the planner's timing")
    parser.add_argument("--config", default=None, help="config YAML (default conf/nav.yaml)")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. env.room.num_obstacles=[8,16]")
    return parser.parse_args(argv)


def load_average() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _timed_env(cfg: NavConfig, n: int, device: str, seed: int, args: argparse.Namespace) -> dict[str, float]:
    """``bench_warp`` on a fresh NavEnv of ``n`` worlds of ``cfg`` (episode lengths randomised)."""
    from navsim.env import NavEnv

    env = NavEnv(cfg, num_envs=n, device=device, seed=seed)
    env.randomize_episode_lengths()
    return bench_warp(env, args.steps, args.warmup, seed=n)


def bench_world_count(cfg: NavConfig, n: int, device: str, args: argparse.Namespace, first: bool) -> dict:
    """One row of the main table: NavEnv.step (physics and lidar alone) and the memory it grew by, with
    the C reference and, as asked, the step with randomisation or the guard off and the torch-thread
    comparison (``first``: the first world count only)."""
    from navsim.env import NavEnv

    log(f"[N={n}] building NavEnv and warming up ({args.warmup} steps)")
    gc.collect()
    before = memory_in_use(device)
    t0 = time.perf_counter()
    env = NavEnv(cfg, num_envs=n, device=device, seed=cfg.env.seed)
    env.randomize_episode_lengths()
    log(f"  built in {time.perf_counter() - t0:.1f} s")
    row = bench_warp(env, args.steps, args.warmup, seed=n)
    grown = max(0, memory_in_use(device) - before)
    row["memory_mib"] = grown / 2**20
    row["memory_kib_per_world"] = grown / 1024 / n
    if not args.no_reference:
        env.reset()  # the reference starts from the same rooms and start poses
        row.update(bench_reference(env, args.steps, args.warmup, args.threads, seed=n))
        row["ratio_env_to_reference"] = row["env_steps_per_s"] / row["reference_env_steps_per_s"]
    for asked, override, key in (
        (args.randomization_cost, "randomization.enabled=false", "env_steps_per_s_randomization_off"),
        (args.guard_cost, "env.guard.enabled=false", "env_steps_per_s_guard_off"),
    ):
        if asked:
            off_cfg = load_config(args.config, [*args.overrides, override])
            log(f"[N={n}] the same with {override}")
            row[key] = _timed_env(off_cfg, n, device, cfg.env.seed, args)["env_steps_per_s"]
    if args.launch_cost:
        log(f"[N={n}] the same launching every physics kernel from Python, then the recorded graph again")
        env._simulate = env._substeps  # type: ignore[method-assign]
        launched = bench_warp(env, args.steps, args.warmup, seed=n)
        del env._simulate
        again = bench_warp(env, args.steps, args.warmup, seed=n)
        for key in ("env_steps_per_s", "physics_steps_per_s"):
            row[key] = max(row[key], again[key])  # the better of two rounds around the launched one
            row[key.replace("_per_s", "_per_s_launched")] = launched[key]
    if args.busy and first:
        log(f"[N={n}] torch threads against a competing busy process")
        row["threads"] = bench_threads(env, args.steps, args.warmup, seed=n)
        torch.set_num_threads(args.torch_threads)
    return row


def bench_rays_per_beam(cfg: NavConfig, counts: list[int], device: str, args: argparse.Namespace) -> dict[str, dict]:
    """``--rays-per-beam``: for each sub-ray count K its error against the exact sector minimum and its
    throughput at every world count."""
    ks = sorted(set(args.rays_per_beam))
    log(f"[rays_per_beam {ks}] error against the exact sector minimum, {args.accuracy_worlds} worlds")
    accuracy = lidar_accuracy(cfg, ks, args.accuracy_worlds, device, seed=cfg.env.seed)
    sweep: dict[str, dict] = {}
    for k in ks:
        kcfg = load_config(args.config, [*args.overrides, f"env.lidar.rays_per_beam={k}"])
        cost = {}
        for n in counts:
            log(f"[rays_per_beam={k}, N={n}] timing")
            cost[str(n)] = _timed_env(kcfg, n, device, kcfg.env.seed, args)
        sweep[str(k)] = {"error": accuracy[str(k)], "throughput": cost}
    return sweep


def print_table(results: dict[str, dict], cfg: NavConfig, device: str, args: argparse.Namespace) -> None:
    """The main table: one line per world count (NavEnv.step, physics, lidar, memory; the C reference)."""
    print(
        f"\nenv-steps/s on {device} ({cfg.env.lidar.num_beams}-beam lidar, rays_per_beam "
        f"{cfg.env.lidar.rays_per_beam}, included), {args.steps} timed steps per row"
    )
    header = f"{'worlds':>7} {'NavEnv.step':>12} {'physics':>10} {'lidar':>10} {'MiB':>8} {'KiB/world':>10}"
    if not args.no_reference:
        header += f" {'C ref':>10} {'C physics':>10} {'C rays':>10} {'env/C':>7}"
    print(header)
    for n, r in results.items():
        line = (
            f"{n:>7} {r['env_steps_per_s']:>12,.0f} {r['physics_steps_per_s']:>10,.0f} {r['lidar_steps_per_s']:>10,.0f}"
            f" {r['memory_mib']:>8,.1f} {r['memory_kib_per_world']:>10,.1f}"
        )
        if not args.no_reference:
            line += (
                f" {r['reference_env_steps_per_s']:>10,.0f} {r['reference_physics_steps_per_s']:>10,.0f}"
                f" {r['reference_rays_steps_per_s']:>10,.0f} {r['ratio_env_to_reference']:>7.2f}"
            )
        print(line)
    if not args.no_reference:
        print(f"C ref: mujoco.rollout on {args.threads} threads + mj_multiRay (1 thread); physics and rays only")


def print_costs(results: dict[str, dict], cfg: NavConfig) -> None:
    """What randomisation and the guard cost: NavEnv.step with each on (as configured) and off."""
    for name, key, label, enabled in (
        ("randomisation", "env_steps_per_s_randomization_off", "randomisation", cfg.randomization.enabled),
        ("guard", "env_steps_per_s_guard_off", "the guard", cfg.env.guard.enabled),
    ):
        for n, r in results.items():
            if key in r:
                on, off = r["env_steps_per_s"], r[key]
                state = "on" if enabled else "off (config)"
                print(
                    f"{name} cost at {n} worlds: NavEnv.step {on:,.0f} env-steps/s with {label} {state}, "
                    f"{off:,.0f} with it off ({on / off:.0%})"
                )


def print_launch_cost(results: dict[str, dict]) -> None:
    """``--launch-cost``: NavEnv.step and its physics with the recorded graph and launching each kernel."""
    for n, r in results.items():
        if "env_steps_per_s_launched" in r:
            graph, launched = r["env_steps_per_s"], r["env_steps_per_s_launched"]
            pg, pl = r["physics_steps_per_s"], r["physics_steps_per_s_launched"]
            print(
                f"physics graph at {n} worlds: NavEnv.step {graph:,.0f} env-steps/s replaying the recorded graph, "
                f"{launched:,.0f} launching each kernel ({graph / launched:.2f}x); physics alone {pg:,.0f} "
                f"against {pl:,.0f} ({pg / pl:.2f}x)"
            )


def print_threads(results: dict[str, dict]) -> None:
    """NavEnv.step by torch threads, quiet and with one competing busy process (``--busy``)."""
    for n, r in results.items():
        if "threads" in r:
            print(f"\nNavEnv.step env-steps/s at {n} worlds by torch threads, quiet / with one competing busy process")
            by = {(t["torch_threads"], t["busy_process"]): t["env_steps_per_s"] for t in r["threads"]}
            for threads in sorted({t for t, _ in by}):
                q, b = by[(threads, False)], by[(threads, True)]
                print(f"  threads {threads:>2}: {q:>9,.0f} quiet {b:>9,.0f} busy ({b / q:.0%} of quiet)")


def print_sweep(sweep: dict[str, dict], counts: list[int]) -> None:
    """``--rays-per-beam``: per K the error against the exact sector minimum and the throughput."""
    print(
        f"\nrays_per_beam: per-beam |error| against the exact sector minimum (m), "
        f"{next(iter(sweep.values()))['error']['beams']} beams; env-steps/s (NavEnv.step / lidar alone)"
    )
    head = f"{'K':>4} {'mean':>8} {'p99':>7} {'max':>7} {'>2cm':>7} {'>5cm':>7}"
    head += "".join(f" {'N=' + n:>19}" for n in map(str, counts))
    print(head)
    for k, row in sweep.items():
        er = row["error"]
        line = (
            f"{k:>4} {er['mean_m']:>8.4f} {er['p99_m']:>7.3f} {er['max_m']:>7.3f}"
            f" {er['frac_over_2cm']:>7.2%} {er['frac_over_5cm']:>7.2%}"
        )
        for n in map(str, counts):
            t = row["throughput"][n]
            line += f" {t['env_steps_per_s']:>9,.0f}/{t['lidar_steps_per_s']:>9,.0f}"
        print(line)


def write_json(
    args: argparse.Namespace,
    device: str,
    load: float,
    results: dict[str, dict],
    sweep: dict[str, dict],
    families: dict | None,
) -> None:
    """``--json`` (``args.json``): the run's settings, the main table's rows, the sweep and the families when
    measured."""
    payload = {
        "device": device,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "reference_rollout_threads": None if args.no_reference else args.threads,
        "steps": args.steps,
        "warmup": args.warmup,
        "load_average_at_start": load,
        "results": results,
    }
    if sweep:
        payload["rays_per_beam_sweep"] = {
            "reference_rays_per_beam": REFERENCE_RAYS_PER_BEAM,
            "accuracy_worlds": args.accuracy_worlds,
            "results": sweep,
        }
    if families is not None:
        payload["families"] = families
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    log(f"wrote {args.json}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counts = args.num_envs or list(DEFAULT_NUM_ENVS)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)

    from navsim.env import resolve_device

    cfg = load_config(args.config, args.overrides)
    device = resolve_device(args.device or cfg.env.device)
    load = load_average()
    log(
        f"benchmark: device {device}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, "
        f"C rollout threads {args.threads}, {args.steps} timed steps, load average {load:.2f}"
    )
    results = {str(n): bench_world_count(cfg, n, device, args, first=n == counts[0]) for n in counts}
    sweep = bench_rays_per_beam(cfg, counts, device, args) if args.rays_per_beam else {}
    families = None
    if args.families:
        families = bench_families(
            args.config,
            args.overrides,
            counts,
            args.steps,
            args.warmup,
            device,
            args.pool_size,
            args.family_rounds,
            args.plan_worlds,
        )
        families["load_average_at_end"] = load_average()

    print_table(results, cfg, device, args)
    print_costs(results, cfg)
    print_launch_cost(results)
    print_threads(results)
    if sweep:
        print_sweep(sweep, counts)
    if families is not None:
        print_families(families, counts)
    if args.json:
        write_json(args, device, load, results, sweep, families)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
