"""Deterministic evaluation of a checkpoint on rooms the training never saw.

The policy acts with its mean action. Auto-reset is off, so each world runs exactly one episode
and its end (reason, time, path) is read directly. Rooms come from a dedicated seed stream
(``runner.eval_seed``, far from the small training seeds).

SPL (success weighted by path length) uses the *straight-line* start-goal distance as the
reference shortest path: SPL_i = S_i * l_i / max(p_i, l_i), with p_i the path the robot drove.
The straight line ignores obstacles, so this SPL is a conservative (lower) estimate.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from navsim.config import EnvCfg, apply_override, config_from_data, to_dict
from navsim.env import NavEnv
from navsim.outcomes import OUTCOMES, Outcome
from navsim.robot import slot_sizes
from navsim.rooms import RoomBatch
from navtrain.checkpoint import build_actor, config_from_checkpoint, load_checkpoint

SUCCESS = OUTCOMES.index(Outcome.SUCCESS)
COLLISION = OUTCOMES.index(Outcome.COLLISION)
OUT_OF_BOUNDS = OUTCOMES.index(Outcome.OUT_OF_BOUNDS)
TIMEOUT = OUTCOMES.index(Outcome.TIMEOUT)


@dataclass
class EvalResult:
    episodes: int
    success_rate: float
    collision_rate: float
    timeout_rate: float
    out_of_bounds_rate: float
    mean_time_to_goal_s: float
    spl: float
    spl_reference: str
    seed: int
    num_obstacles: list[int]


@dataclass
class EpisodeTrace:
    rooms: RoomBatch  # the rooms of the plotted worlds
    paths: list[np.ndarray]  # (T_i, 2) per world
    outcomes: list[Outcome]


def run_episodes(
    env: NavEnv, actor: torch.nn.Module, rooms: RoomBatch, record: int = 0
) -> tuple[dict[str, np.ndarray], EpisodeTrace | None]:
    """One episode per world in ``rooms`` (auto-reset must be off). ``outcome`` holds each
    episode's code: its index in :data:`navsim.outcomes.OUTCOMES`."""
    assert not env.auto_reset, "evaluation needs auto_reset off"
    env.reset(rooms=rooms)
    n = env.num_envs
    finished = torch.zeros(n, dtype=torch.bool, device=env.device)
    outcome = torch.full((n,), -1, dtype=torch.long, device=env.device)
    steps = torch.zeros(n, device=env.device)
    path_len = torch.zeros(n, device=env.device)
    start = rooms.start[:, :2].clone()
    prev = start.clone()
    trace: list[torch.Tensor] = [start.clone()] if record else []
    obs = env.get_observations()
    for _ in range(env.max_episode_length):
        with torch.inference_mode():
            action = actor(obs, stochastic_output=False)
        action = torch.where(finished[:, None], torch.zeros_like(action), action)
        obs, _, dones, _ = env.step(action)
        info = env.last_info
        pos = info.pose[:, :2]
        live = ~finished
        path_len += torch.where(live, torch.linalg.norm(pos - prev, dim=-1), torch.zeros_like(path_len))
        steps += live.float()
        prev = pos
        if record:
            trace.append(torch.where(live[:, None], pos, trace[-1]))
        reason = torch.stack([getattr(info, str(o)) for o in OUTCOMES], dim=-1)
        code = torch.argmax(reason.long(), dim=-1)  # the first set flag: the highest priority
        newly = dones.bool() & live
        outcome = torch.where(newly, code, outcome)
        finished |= dones.bool()
        if bool(finished.all()):
            break
    outcome = torch.where(outcome < 0, torch.full_like(outcome, TIMEOUT), outcome)  # unfinished
    result = {
        "outcome": outcome.cpu().numpy(),
        "time_s": (steps * env.env_cfg.control_period).cpu().numpy(),
        "path_len": path_len.cpu().numpy(),
        "straight": torch.linalg.norm(rooms.goal - start, dim=-1).cpu().numpy(),
        "num_obstacles": rooms.slot_active.sum(dim=-1).cpu().numpy(),
    }
    tr = None
    if record:
        # Show the failures first (up to half the panels), then successes, in world order.
        codes = outcome.cpu().numpy()
        failed = [int(i) for i in np.flatnonzero(codes != SUCCESS)][: record // 2]
        chosen = sorted(failed + [int(i) for i in np.flatnonzero(codes == SUCCESS)][: record - len(failed)])
        stacked = torch.stack(trace).cpu().numpy()  # (T, n, 2)
        paths = [stacked[: int(steps[i].item()) + 1, i] for i in chosen]
        tr = EpisodeTrace(
            rooms.index(torch.tensor(chosen, device=env.device)), paths, [OUTCOMES[int(codes[i])] for i in chosen]
        )
    return result, tr


def evaluate_checkpoint(
    checkpoint: str | Path,
    episodes: int = 500,
    seed: int | None = None,
    num_envs: int | None = None,
    device: str = "cpu",
    overrides: list[str] | None = None,
    plot_rooms: int = 6,
) -> tuple[EvalResult, EpisodeTrace | None]:
    ckpt = load_checkpoint(checkpoint)
    cfg = config_from_checkpoint(ckpt)
    if overrides:
        data = to_dict(cfg)
        for ov in overrides:
            apply_override(data, ov)
        cfg = config_from_data(data, where="evaluation overrides")
    seed = cfg.runner.eval_seed if seed is None else seed
    cfg.env.auto_reset = False  # the sensor model (lidar noise) stays the training one
    batch = min(episodes, num_envs or 500)
    env = NavEnv(cfg, num_envs=batch, device=device, seed=seed)
    env.log_episodes = False
    actor = build_actor(ckpt, cfg, env.device)
    gen = torch.Generator(device=env.device)
    gen.manual_seed(seed)
    parts: list[dict[str, np.ndarray]] = []
    trace = None
    done = 0
    while done < episodes:
        rooms = env.new_rooms(batch, gen)
        res, tr = run_episodes(env, actor, rooms, record=plot_rooms if trace is None else 0)
        trace = trace or tr
        take = min(batch, episodes - done)
        parts.append({k: v[:take] for k, v in res.items()})
        done += take
        print(f"[evaluate] {done}/{episodes} episodes", flush=True)
    allr = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    oc = allr["outcome"]
    succ = oc == SUCCESS
    spl = succ * allr["straight"] / np.maximum(allr["path_len"], allr["straight"])
    result = EvalResult(
        episodes=int(len(oc)),
        success_rate=float(succ.mean()),
        collision_rate=float((oc == COLLISION).mean()),
        timeout_rate=float((oc == TIMEOUT).mean()),
        out_of_bounds_rate=float((oc == OUT_OF_BOUNDS).mean()),
        mean_time_to_goal_s=float(allr["time_s"][succ].mean()) if succ.any() else math.nan,
        spl=float(spl.mean()),
        spl_reference="straight-line start-goal distance (ignores obstacles: conservative)",
        seed=int(seed),
        num_obstacles=[int(cfg.env.room.num_obstacles[0]), int(cfg.env.room.num_obstacles[1])],
    )
    return result, trace


def write_json(result: EvalResult, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(asdict(result), indent=2) + "\n")


def plot_trace(trace: EpisodeTrace, env_cfg: EnvCfg, path: str | Path, title: str = "") -> None:
    """Rooms with obstacles, start, goal and the driven path coloured by outcome."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Polygon, Rectangle

    cfg_half = env_cfg.room.size / 2
    sizes = slot_sizes(env_cfg)
    robot_radius = env_cfg.robot.radius
    colours = {
        Outcome.SUCCESS: "tab:green",
        Outcome.COLLISION: "tab:red",
        Outcome.TIMEOUT: "tab:orange",
        Outcome.OUT_OF_BOUNDS: "tab:purple",
    }
    n = len(trace.paths)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 4 * rows), squeeze=False)
    radii = np.concatenate([sizes.cylinder_radius, np.zeros(len(sizes.box_half))])
    halfs = np.concatenate([np.zeros((len(sizes.cylinder_radius), 2)), sizes.box_half])
    r = trace.rooms
    for i in range(rows * cols):
        ax = axes[i // cols][i % cols]
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        if i >= n:
            ax.axis("off")
            continue
        ax.add_patch(Rectangle((-cfg_half, -cfg_half), 2 * cfg_half, 2 * cfg_half, fill=False, lw=2, color="0.3"))
        pos = r.slot_pos[i].cpu().numpy()
        yaw = r.slot_yaw[i].cpu().numpy()
        act = r.slot_active[i].cpu().numpy()
        for j in np.flatnonzero(act):
            if radii[j] > 0:
                ax.add_patch(Circle(pos[j], radii[j], color="0.55"))
            else:
                hx, hy = halfs[j]
                c, s = math.cos(yaw[j]), math.sin(yaw[j])
                corners = np.array([[hx, hy], [-hx, hy], [-hx, -hy], [hx, -hy]]) @ np.array([[c, s], [-s, c]]) + pos[j]
                ax.add_patch(Polygon(corners, color="0.55"))
        p = trace.paths[i]
        colour = colours[trace.outcomes[i]]
        ax.plot(p[:, 0], p[:, 1], color=colour, lw=2)
        ax.add_patch(Circle(p[-1], robot_radius, fill=False, ec=colour, lw=1.5))  # footprint at the end
        ax.plot(*r.start[i, :2].cpu().numpy(), "o", color="tab:blue", ms=8, label="start")
        ax.plot(*r.goal[i].cpu().numpy(), "*", color="gold", mec="k", ms=14, label="goal")
        ax.set_xlim(-cfg_half - 0.2, cfg_half + 0.2)
        ax.set_ylim(-cfg_half - 0.2, cfg_half + 0.2)
        ax.set_title(trace.outcomes[i], color=colour)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
