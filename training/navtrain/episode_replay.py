"""One episode of a long run again, by itself, with the trace of the node's gate tick by tick.

Runs whose batches have seeds of their own (:mod:`navtrain.kept_batches`: the safety suite, nav-compare)
name each episode by its index: batch ``index // num_envs``, world ``index % num_envs``. :func:`replay`
runs that batch again and records, for that world, every control tick of its gate (state and reason,
pose, command, sub-goal, the guard's scale, the scan map's path in use and why it changed), the world
itself, and whether it was passable for the guard as the robot's lidar read it
(:func:`navtrain.safety_suite.passable_for_lidar`); :func:`plot_replay` draws it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from navsim.outcomes import OUTCOMES
from navtrain.evaluation import Evaluator, NodeActor, eval_env, run_episodes, with_overrides
from navtrain.kept_batches import start_batch
from navtrain.safety_suite import lidar_error, passable, passable_clearance, passable_for_lidar


def replay(
    evaluator: Evaluator,
    row: str,
    overrides: list[str],
    episode: int,
    seed: int,
    num_envs: int,
    png: Path | None = None,
) -> dict[str, Any]:
    """Episode ``episode`` of the run of row ``row`` (its worlds: ``evaluator``'s config with
    ``overrides``) again: its batch of ``num_envs`` worlds on that batch's seeds
    (:func:`navtrain.kept_batches.start_batch`), as in the run that named it, with the trace of its
    gate: one entry per control tick (time, state, reason, the pose and body twist the gate was given
    and the true ones, command, sub-goal, the guard's scale and what it judged, :func:`guard_inputs`,
    the scan map's path) and the world itself (:func:`world_record`). With ``png``, also
    :func:`plot_replay` of it."""
    cfg = with_overrides(evaluator.cfg, overrides)
    env, seed = eval_env(cfg, num_envs, seed, num_envs, evaluator.device)
    act = evaluator.make_act(env)
    if not isinstance(act, NodeActor):
        raise ValueError("a replay runs behind the node's gate: evaluate a bundle with --node")
    batch, k = divmod(episode, env.num_envs)
    gen = torch.Generator(device=env.device)
    rooms = start_batch(env, act, gen, seed, batch)
    ticks: list[dict[str, Any]] = []

    last_path_id: list[int | None] = [None]

    def watch(world: int, now: float, res: Any) -> None:
        if world == k:
            pose = env.observed_pose[k].cpu().numpy()
            tick = {
                "t": round(now, 2),
                "state": res.state.value,
                "reason": res.reason,
                "pose": [round(float(v), 3) for v in pose],
                "twist": [round(float(v), 3) for v in env.observed_twist[k].cpu().numpy()],
                "true_pose": [round(float(v), 3) for v in env.pose()[k].cpu().numpy()],
                "true_twist": [round(float(v), 3) for v in env.body_twist()[k].cpu().numpy()],
                "cmd": [round(float(v), 3) for v in res.cmd],
                "subgoal": None if res.subgoal is None else [round(float(v), 3) for v in res.subgoal],
                "guard_scale": None if res.guard_scale is None else round(float(res.guard_scale), 3),
            }
            tick.update(guard_inputs(act.gates[k]))
            tick.update(map_state(act.gates[k].scan_planner, last_path_id))
            ticks.append(tick)

    act.watch = watch
    res, _ = run_episodes(env, act, rooms, label=f"replay {row} episode {episode}", only=k)
    clearance = passable_clearance(act, env)
    error = lidar_error(env, clearance)
    out = {
        "row": row,
        "episode": episode,
        "seed": seed,
        "num_envs": env.num_envs,
        "outcome": str(OUTCOMES[int(res["outcome"][k])]),
        "time_s": float(res["time_s"][k]),
        "path_m": float(res["path_len"][k]),
        "idle_s": float(act.idle_seconds()[k]),
        "passable_nominal": bool(passable(env, rooms, clearance)[k]),
        "passable": bool(passable_for_lidar(env, rooms, clearance, error)[k]),
        "lidar_error_m": round(float(error[k]), 4),
        "guard": None if act.gates[k].guard is None else act.gates[k].guard.to_dict(),  # the rule that judged
        "max_range": float(act.gates[k].max_range),
        "goal": [float(v) for v in rooms.goal[k].cpu()],
        "world": world_record(rooms, k, env.env_cfg),
        "ticks": ticks,
    }
    if png is not None:
        plot_replay(out, png)
    return out


def guard_inputs(gate: Any) -> dict[str, Any]:
    """What the gate's guard judged this tick, to judge it again offline
    (:func:`navcontract.guard.apply_guard`): ``checked``, the command it checked (steered and smoothed;
    absent on a tick that sent no driving command), ``ranges`` [m] on the contract's beams and the
    indices of the ``unseen`` ones (rule step 0) the driver read."""
    out: dict[str, Any] = {}
    checked = getattr(gate, "_checked", None)
    if checked is not None:
        out["checked"] = [round(float(v), 4) for v in checked]
    report = getattr(gate.driver, "last_scan_report", None)
    if report is not None:
        out["ranges"] = [round(float(v), 4) for v in np.asarray(report.ranges).reshape(-1)]
        out["unseen"] = [int(j) for j in np.flatnonzero(np.asarray(report.filled, dtype=bool))]
    return out


def map_state(planner: Any, last_path_id: list[int | None]) -> dict[str, Any]:
    """The scan map's part of a replay tick: the id of the path in use, the clearance it was planned
    with, its memories of the goal (returns raised for the guard, returns kept for blocking a path,
    dead ends) and, on the tick it changed, the new path itself and why it replaced the old one
    (:attr:`navdeploy.scan_map.ScanPlanner.switch_reason`; ``last_path_id`` holds the last id)."""
    if planner is None:
        return {}
    out: dict[str, Any] = {
        "path_id": int(planner.path_id),
        "path_radius": round(float(getattr(planner, "path_radius", float("nan"))), 3),
        "memories": [len(getattr(planner, name, ())) for name in ("raised", "kept", "dead_ends")],
        "forgotten": int(getattr(planner, "forgotten", 0)),
    }
    if planner.path_id != last_path_id[0]:
        last_path_id[0] = int(planner.path_id)
        path = planner.path
        out["path"] = None if path is None else [[round(float(v), 3) for v in q] for q in path]
        out["switch"] = getattr(planner, "switch_reason", "")
    return out


def world_record(rooms: Any, world: int, env_cfg: Any) -> dict[str, Any]:
    """World ``world`` of ``rooms`` as plain numbers, so that a replay's JSON draws without the
    simulator: half extents, active cylinders ``[x, y, r]``, boxes ``[x, y, yaw, half_x, half_y]``,
    the planner's path, start, goal and the goal's tolerance."""
    from navsim.families import world_half
    from navsim.robot import slot_sizes

    sizes = slot_sizes(env_cfg)
    n_cyl = len(sizes.cylinder_radius)
    pos = rooms.slot_pos[world].cpu().numpy()
    yaw = rooms.slot_yaw[world].cpu().numpy()
    cylinders, boxes = [], []
    for j in np.flatnonzero(rooms.slot_active[world].cpu().numpy()):
        if j < n_cyl:
            cylinders.append([round(float(v), 4) for v in (*pos[j], sizes.cylinder_radius[j])])
        else:
            bx, by = sizes.box_half[j - n_cyl]
            boxes.append([round(float(v), 4) for v in (*pos[j], yaw[j], bx, by)])
    count = int(rooms.path_count[world])
    return {
        "half": [round(v, 4) for v in world_half(rooms, world, env_cfg)],
        "cylinders": cylinders,
        "boxes": boxes,
        "path": [[round(float(v), 4) for v in p] for p in rooms.path[world, :count].cpu().numpy()],
        "start": [round(float(v), 4) for v in rooms.start[world, :2].cpu()],
        "goal": [round(float(v), 4) for v in rooms.goal[world].cpu()],
        "goal_tolerance": float(env_cfg.goal_tolerance),
    }


ZOOM_LAST_S = 15.0
"""[s] The replay plot's second panel frames the robot's last this many seconds."""


def plot_replay(trace: dict[str, Any], path: str | Path) -> None:
    """A replay's JSON drawn: the world (posts, the planner's path, the goal) with the robot's track
    coloured by time, the gate's sub-goals, and the ticks where the guard stopped it or the gate
    recovered; on the left the whole world, on the right the robot's last :data:`ZOOM_LAST_S` s."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Polygon

    world, ticks = trace["world"], trace["ticks"]
    pose = np.array([t["pose"] for t in ticks], dtype=float).reshape(-1, 3)
    t = np.array([t["t"] for t in ticks], dtype=float)
    sub = np.array([tk["subgoal"] for tk in ticks if tk["subgoal"] is not None], dtype=float).reshape(-1, 2)
    stopped = np.array([tk["guard_scale"] == 0.0 for tk in ticks], dtype=bool)
    recovering = np.array([tk["state"] == "recovering" for tk in ticks], dtype=bool)
    hx, hy = world["half"]
    last = pose[t >= t.max() - ZOOM_LAST_S, :2] if len(t) else np.zeros((1, 2))
    centre = (last.min(axis=0) + last.max(axis=0)) / 2
    span = max(2.0, float((last.max(axis=0) - last.min(axis=0)).max()) + 1.2)
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.2), gridspec_kw={"width_ratios": [max(hx / hy, 1.0), 1.0]})
    for ax, zoom in zip(axes, (False, True), strict=True):
        ax.set_aspect("equal")
        for x, y, r in world["cylinders"]:
            ax.add_patch(Circle((x, y), r, color="0.55", zorder=1))
        for x, y, yaw, bx, by in world["boxes"]:
            c, s = np.cos(yaw), np.sin(yaw)
            corners = np.array([[bx, by], [-bx, by], [-bx, -by], [bx, -by]]) @ np.array([[c, s], [-s, c]]) + (x, y)
            ax.add_patch(Polygon(corners, color="0.55", zorder=1))
        if len(world["path"]) > 2:
            plan = np.array(world["path"])
            ax.plot(plan[:, 0], plan[:, 1], ":", color="0.6", lw=1.2, zorder=1.5, label="planner's path")
        ax.add_patch(Circle(world["goal"], world["goal_tolerance"], fill=False, ec="goldenrod", ls="--", zorder=1))
        ax.plot(*world["goal"], "*", color="gold", mec="k", mew=0.5, ms=10, zorder=7)
        track = ax.scatter(pose[:, 0], pose[:, 1], c=t, cmap="viridis", s=10 if zoom else 5, zorder=5)
        ax.plot(sub[:, 0], sub[:, 1], "x", color="tab:orange", ms=3, alpha=0.6, zorder=4, label="sub-goal")
        if stopped.any():
            ax.plot(*pose[stopped, :2].T, "o", mfc="none", mec="tab:red", ms=7, zorder=6, label="guard scale 0")
        if recovering.any():
            ax.plot(*pose[recovering, :2].T, "s", mfc="none", mec="k", ms=7, zorder=6, label="recovering")
        if zoom:  # the scan map's paths of the last seconds, thin, coloured by when they came
            for tk in ticks:
                if tk.get("path") and tk["t"] >= t.max() - ZOOM_LAST_S:
                    q = np.array(tk["path"])
                    ax.plot(q[:, 0], q[:, 1], "-", lw=0.7, alpha=0.5, zorder=3, color=track.cmap(track.norm(tk["t"])))
            ax.set_xlim(centre[0] - span / 2, centre[0] + span / 2)
            ax.set_ylim(centre[1] - span / 2, centre[1] + span / 2)
            ax.set_title(f"the last {ZOOM_LAST_S:g} s", fontsize=9)
            fig.colorbar(track, ax=ax, fraction=0.04, label="time [s]")
        else:
            ax.set_xlim(-hx, hx)
            ax.set_ylim(-hy, hy)
            ax.legend(loc="upper left", fontsize=7)
            ax.set_title(
                f"{trace['row']} episode {trace['episode']}: {trace['outcome']} after {trace['time_s']:.1f} s, "
                f"lidar error {100 * trace['lidar_error_m']:.1f} cm, passable {trace['passable']}",
                fontsize=9,
            )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
