"""Watch a policy drive: an animated top-down GIF of a few episodes on unseen worlds.

    nav-play --checkpoint PATH [--episodes 4] [--seed S] [--out play.gif] [--fps 10] [--max-steps N]
             [--dpi 100] [--device cpu|cuda] [--family NAME] [--path-following] [section.key=value ...]
    nav-play --bundle DIR [--controller policy|dwa] [--dwa-params YAML] [...]

``--checkpoint``: the deterministic (mean-action) torch actor with the checkpoint's own config.
``--bundle``: what the robot runs, through the robot runtime world by world (as nav-evaluate
--bundle), in the worlds of the bundle's training config. One world per panel, one episode each
(auto-reset off), the worlds nav-evaluate uses for the same --episodes and --seed (default:
runner.eval_seed, a seed stream never used in training).

Every frame is one control step and shows the world's walls, its obstacles (every active
obstacle slot: cylinders as circles, boxes as rotated rectangles), the goal with its tolerance
circle, the path so far, the robot (its radius, a tick for its heading) and the scan the policy
saw (its beams as rays, the returns as dots), drawn from the robot's true pose: under
randomisation (latency, yaw offset, noise) the dots may miss the obstacles, as the policy's did.
A planned world (``env.worlds``) also shows the planner's path, faintly, and an episode that
follows it the sub-goal the policy is steering for (``NavEnv.policy_goal``) as a small diamond.
``--scan-map`` (a bundle's policy) plans goal-mode episodes on the robot's own scans as the node
does (``navdeploy.scan_map``): the path planned on that map is drawn dashed, as it was at each
frame, and the diamond is the sub-goal taken along it.
Each panel spans its own world's extents in their proportions (a 13 x 4 m clutter field is a
wide, low panel; a mix of families shows each panel's family in its title). A panel's title gets the episode's outcome when it ends; a finished panel holds its
last frame, and the animation ends when every episode has ended (or at --max-steps).

``--family NAME`` plays one world family (rooms, clutter, corridors, arenas) at its top level:
shorthand for ``env.worlds.families={NAME: 1.0} env.worlds.curriculum.enabled=false``.
``--path-following`` feeds the policy sub-goals along the planner's path
(``env.worlds.path_following=1.0``). Overrides change the worlds as for nav-evaluate, e.g.
``env.room.num_obstacles=[16,16]`` or ``randomization.enabled=false``; one that changes the policy
observation is refused.

Bad input (a missing or corrupt checkpoint or bundle, a malformed override, an unknown
--family, a flag and an override that set the same key, an --out that is not a writable *.gif
path) is one line on stderr and exit code 2, before any world is built. An existing --out file is
replaced (as nav-evaluate replaces its --json and --plot), atomically: the GIF is written beside
it and renamed.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from navsim.families import active_families, planned, world_half
from navtrain.cli import EXIT_USAGE, CliError, OneLineParser, at_least, check_can_create, report
from navtrain.evaluate_cli import add_policy_source

if TYPE_CHECKING:
    from navsim.config import EnvCfg
    from navsim.env import NavEnv
    from navsim.families.rooms import RoomBatch
    from navsim.outcomes import Outcome
    from navtrain.evaluation import ActFn

TOOL = "nav-play"
MAX_EPISODES = 16
MAX_FPS = 50  # GIF delays are in hundredths of a second; viewers slow down anything faster
PANEL_INCHES = 2.5  # a square panel's width and height; other panels keep its area
TITLE_INCHES = 0.2  # above each panel
CAPTION_INCHES = 0.3  # above the grid: the source, seed and time
CAPTION_LINE_INCHES = 0.15  # each further line of a caption too long for a narrow figure
CAPTION_POINTS = 8
END_HOLD_MS = 1500  # the last frame stays this long before the GIF loops
FAMILIES = ("rooms", "clutter", "corridors", "arenas")
"""The world families ``--family`` takes (``navsim.families.FAMILIES``, checked by the tests)."""


@dataclass
class Recording:
    """What the animation shows, world by world: the state after every control step (frame 0: the
    reset), held at its last value once the world's episode has ended."""

    rooms: RoomBatch  # on the CPU
    poses: np.ndarray  # (F, n, 3) true x, y, yaw
    scans: np.ndarray  # (F, n, B) the policy's scan [m], body-frame beams
    goals: np.ndarray  # (F, n, 2) the goal the policy saw: the goal, or its sub-goal along the path
    follow: np.ndarray  # (n,) bool: the episode follows the planner's path
    mapped: np.ndarray  # (n,) bool: a goal-mode episode steered along a path planned on its own scans
    map_paths: list[list[tuple[int, np.ndarray | None]]]  # per world: (first frame, that map path) as it changed
    steps: np.ndarray  # (n,) control steps each episode ran (all F - 1 when cut by max_steps)
    outcomes: list[Outcome | None]  # None: still running when the recording stopped
    control_period: float
    max_range: float

    @property
    def frames(self) -> int:
        return len(self.poses)


def record(env: NavEnv, act: ActFn, rooms: RoomBatch, max_steps: int, every: int = 50) -> Recording:
    """One episode per world of ``rooms`` (auto-reset off), as ``navtrain.evaluation.run_episodes``
    runs them, keeping pose, scan and the policy's goal after every step; stops when all have
    ended or at ``max_steps``."""
    import torch

    from navsim.outcomes import OUTCOMES
    from navtrain.evaluation import NodeActor, RobotSideActor

    assert not env.auto_reset, "playing needs auto_reset off"
    env.reset(rooms=rooms)
    n = env.num_envs
    finished = torch.zeros(n, dtype=torch.bool, device=env.device)
    outcome = torch.full((n,), -1, dtype=torch.long, device=env.device)
    steps = torch.zeros(n, dtype=torch.long, device=env.device)
    poses, scans, goals = [env.pose()], [env.scan.clone()], [env.policy_goal.clone()]
    obs = env.get_observations()
    planners = None
    handed = np.full((n, 2), np.nan)  # behind the node's gate: the sub-goal each gate's last tick took
    if isinstance(act, NodeActor):
        act.reset()
        if any(g.scan_planner is not None for g in act.gates):
            planners = [g.scan_planner for g in act.gates]

        def watch(i: int, now: float, res: Any) -> None:
            handed[i] = np.nan if res.subgoal is None else res.subgoal

        act.watch = watch
    elif isinstance(act, RobotSideActor):
        act.reset()
        planners = act.planners
    mapped = np.zeros(n, dtype=bool) if planners is None else ~env.follow.cpu().numpy()
    map_paths: list[list[tuple[int, np.ndarray | None]]] = [[] for _ in range(n)]
    limit = min(max_steps, env.max_episode_length)
    for t in range(1, limit + 1):
        live = ~finished
        action = torch.where(finished[:, None], 0.0, act(obs, live))
        obs, _, dones, _ = env.step(action)
        info = env.last_info
        poses.append(torch.where(live[:, None], env.pose(), poses[-1]))
        scans.append(torch.where(live[:, None], env.scan, scans[-1]))
        seen = env.policy_goal
        if planners is not None:  # the sub-goal the map gave (the goal where it had no path)
            given = act.last_goals if not isinstance(act, NodeActor) else np.where(np.isnan(handed), seen.cpu(), handed)
            given = torch.as_tensor(given, dtype=seen.dtype, device=seen.device)
            seen = torch.where(torch.as_tensor(mapped, device=seen.device)[:, None], given, seen)
            for i in np.flatnonzero(mapped & live.cpu().numpy()):
                path = planners[i].path
                if not map_paths[i] or map_paths[i][-1][1] is not path:
                    map_paths[i].append((t, path))
        goals.append(torch.where(live[:, None], seen, goals[-1]))
        steps += live.long()
        reason = torch.stack([getattr(info, str(o)) for o in OUTCOMES], dim=-1)
        code = torch.argmax(reason.long(), dim=-1)  # the first set flag: the highest priority
        outcome = torch.where(dones.bool() & live, code, outcome)
        finished |= dones.bool()
        done = int(finished.sum())
        if t % every == 0 or done == n or t == limit:
            print(f"[play] step {t}/{limit}: {done}/{n} episodes ended", flush=True)
        if done == n:
            break
    codes = outcome.cpu().numpy()
    return Recording(
        rooms=rooms.to("cpu"),
        poses=torch.stack(poses).cpu().numpy(),
        scans=torch.stack(scans).cpu().numpy(),
        goals=torch.stack(goals).cpu().numpy(),
        follow=env.follow.cpu().numpy().copy(),
        mapped=mapped,
        map_paths=map_paths,
        steps=steps.cpu().numpy(),
        outcomes=[OUTCOMES[int(c)] if c >= 0 else None for c in codes],
        control_period=float(env.env_cfg.control_period),
        max_range=float(env.dims.max_range),
    )


OUTCOME_COLOURS = {
    "success": "tab:green",
    "collision": "tab:red",
    "timeout": "tab:orange",
    "out_of_bounds": "tab:purple",
}
WALL, OBSTACLE, RAY, RETURN = "0.3", "0.55", "mistyrose", "tab:red"
PATH, BODY, HEADING, GOAL, TOLERANCE = "tab:blue", "lightsteelblue", "navy", "gold", "goldenrod"
PLAN, SUBGOAL, MAP_PLAN = "0.75", "tab:cyan", "tab:purple"
DRAWN = (
    WALL,
    OBSTACLE,
    RAY,
    RETURN,
    PATH,
    BODY,
    HEADING,
    GOAL,
    TOLERANCE,
    PLAN,
    SUBGOAL,
    MAP_PLAN,
    "black",
    "white",
    *OUTCOME_COLOURS.values(),
)
"""Every colour drawn: kept exactly in the GIF's palette."""


def family_name(rooms: RoomBatch, world: int) -> str:
    index = int(rooms.family[world])
    return FAMILIES[index] if 0 <= index < len(FAMILIES) else f"family {index}"


class Panel:
    """One world's axes: the world drawn once, the robot, path, scan, sub-goal and title moved
    every frame."""

    def __init__(
        self, ax, rec: Recording, world: int, env_cfg: EnvCfg, beam_angles: np.ndarray, show_family: bool = False
    ) -> None:
        from matplotlib.collections import LineCollection
        from matplotlib.patches import Circle

        self.ax, self.rec, self.world, self.angles = ax, rec, world, beam_angles
        self.name = f"episode {world}" + (f" ({family_name(rec.rooms, world)})" if show_family else "")
        self.radius = float(env_cfg.robot.radius)
        draw_room(ax, rec.rooms, world, env_cfg)
        self.rays = LineCollection([], colors=RAY, linewidths=0.5, antialiaseds=False, zorder=2)
        ax.add_collection(self.rays)
        self.hits = ax.scatter([], [], s=2.5, color=RETURN, linewidths=0, zorder=3)
        (self.path,) = ax.plot([], [], color=PATH, lw=1.2, zorder=4)
        self.body = Circle((0.0, 0.0), self.radius, fc=BODY, ec=PATH, lw=1.0, zorder=5)
        ax.add_patch(self.body)
        (self.heading,) = ax.plot([], [], color=HEADING, lw=1.5, zorder=6)
        self.subgoal = None
        if rec.follow[world] or rec.mapped[world]:
            (self.subgoal,) = ax.plot([], [], "D", color=SUBGOAL, mec=HEADING, mew=0.5, ms=4, zorder=8)
        self.map_plan = None
        if rec.mapped[world]:
            (self.map_plan,) = ax.plot([], [], "--", color=MAP_PLAN, lw=0.9, zorder=7)

    def update(self, frame: int) -> None:
        rec, i = self.rec, self.world
        x, y, yaw = rec.poses[frame, i]
        path = rec.poses[: frame + 1, i, :2]
        self.path.set_data(path[:, 0], path[:, 1])
        self.body.center = (x, y)
        self.heading.set_data([x, x + self.radius * math.cos(yaw)], [y, y + self.radius * math.sin(yaw)])
        if self.subgoal is not None:
            self.subgoal.set_data([rec.goals[frame, i, 0]], [rec.goals[frame, i, 1]])
        if self.map_plan is not None:
            planned = [p for t, p in rec.map_paths[i] if t <= frame]  # the paths so far, in order
            plan = planned[-1] if planned else None
            self.map_plan.set_data(([], []) if plan is None else (plan[:, 0], plan[:, 1]))
        ranges = rec.scans[frame, i]
        world_angles = yaw + self.angles
        ends = np.stack([x + ranges * np.cos(world_angles), y + ranges * np.sin(world_angles)], axis=-1)
        self.rays.set_segments([[(x, y), tuple(e)] for e in ends])
        self.hits.set_offsets(ends[ranges < rec.max_range - 1e-3])
        outcome = rec.outcomes[i]
        if outcome is not None and frame >= rec.steps[i]:
            self.ax.set_title(f"{self.name}: {outcome}", color=OUTCOME_COLOURS[str(outcome)], fontsize=8)
        elif outcome is None and frame == rec.frames - 1:
            self.ax.set_title(f"{self.name}: stopped at {frame * rec.control_period:.1f} s", fontsize=8)
        else:
            self.ax.set_title(self.name, fontsize=8)


def draw_room(ax, rooms: RoomBatch, world: int, env_cfg: EnvCfg) -> None:
    """The world at its own extents: walls, every active obstacle slot (cylinders as circles,
    boxes as rotated rectangles; the ``bound`` slots that close a small world in the wall colour),
    the planner's path when it has corners, start and goal with its tolerance circle, on equal
    axes without ticks."""
    from matplotlib.patches import Circle, Polygon, Rectangle

    from navsim.robot import slot_sizes

    hx, hy = world_half(rooms, world, env_cfg)
    t = env_cfg.room.wall_thickness
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xlim(-hx - t, hx + t)
    ax.set_ylim(-hy - t, hy + t)
    ax.add_patch(Rectangle((-hx - t / 2, -hy - t / 2), 2 * hx + t, 2 * hy + t, fill=False, lw=2, ec=WALL))
    sizes = slot_sizes(env_cfg)
    n_cyl = len(sizes.cylinder_radius)
    bound = set(int(j) for j in sizes.role("bound"))
    pos = rooms.slot_pos[world].numpy()
    yaw = rooms.slot_yaw[world].numpy()
    for j in np.flatnonzero(rooms.slot_active[world].numpy()):
        if j < n_cyl:
            ax.add_patch(Circle(pos[j], sizes.cylinder_radius[j], color=OBSTACLE, zorder=1))
        else:
            bx, by = sizes.box_half[j - n_cyl]
            c, s = math.cos(yaw[j]), math.sin(yaw[j])
            corners = np.array([[bx, by], [-bx, by], [-bx, -by], [bx, -by]]) @ np.array([[c, s], [-s, c]]) + pos[j]
            ax.add_patch(Polygon(corners, color=WALL if j in bound else OBSTACLE, zorder=1))
    count = int(rooms.path_count[world])
    if count > 2:  # the planner's path (a straight segment says nothing)
        plan = rooms.path[world, :count].numpy()
        ax.plot(plan[:, 0], plan[:, 1], ":", color=PLAN, lw=1.2, zorder=1.5)
    goal = rooms.goal[world].numpy()
    ax.add_patch(Circle(goal, env_cfg.goal_tolerance, fill=False, ec=TOLERANCE, ls="--", lw=1.0, zorder=1))
    ax.plot(*goal, "*", color=GOAL, mec="k", mew=0.5, ms=9, zorder=7)
    ax.plot(*rooms.start[world, :2].numpy(), "o", color=PATH, ms=3, zorder=4)


@dataclass(frozen=True)
class Layout:
    """The grid of panels: columns, rows and one panel's size in inches."""

    cols: int
    rows: int
    width: float
    height: float


def panel_layout(n: int, aspect: float) -> Layout:
    """Panels of height / width ``aspect`` with the area of a square ``PANEL_INCHES`` panel (width
    kept within [1/2, 2] x PANEL_INCHES), in a grid about as wide as tall: square worlds keep the
    ceil(sqrt(n)) columns of square panels, a wide world gets fewer, wider ones."""
    width = PANEL_INCHES * min(2.0, max(0.5, 1.0 / math.sqrt(aspect)))
    cols = max(1, min(n, math.ceil(math.sqrt(n * aspect) - 1e-9)))
    return Layout(cols, math.ceil(n / cols), width, width * aspect)


def caption_lines(caption: str, width: float) -> list[str]:
    """``caption`` broken into lines that fit a figure ``width`` inches wide at CAPTION_POINTS,
    leaving room on the last line for the time ("   t = 12.3 s")."""
    import textwrap

    chars = max(30, int(width * 72 / (CAPTION_POINTS * 0.6)))  # DejaVu Sans: under 0.6 em a character
    lines = textwrap.wrap(caption, width=chars)
    if lines and len(lines[-1]) + len("   t = 300.0 s") > chars:
        lines.append("")
    return lines or [""]


def render_gif(rec: Recording, env_cfg: EnvCfg, out: Path, fps: int, dpi: int, caption: str) -> int:
    """Every frame of ``rec`` in a grid of panels, written as a looping GIF to ``out`` (through a
    file beside it, renamed at the end); returns the number of frames."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from navcontract.scan import BeamLayout

    n = rec.poses.shape[1]
    t = env_cfg.room.wall_thickness
    halves = np.array([world_half(rec.rooms, i, env_cfg) for i in range(n)])
    aspect = float((halves[:, 1].max() + t) / (halves[:, 0].max() + t))  # the widest and the tallest world
    grid = panel_layout(n, aspect)
    width = grid.width * grid.cols
    lines = caption_lines(caption, width)
    caption_inches = CAPTION_INCHES + CAPTION_LINE_INCHES * (len(lines) - 1)
    height = (grid.height + TITLE_INCHES) * grid.rows + caption_inches
    fig, axes = plt.subplots(grid.rows, grid.cols, figsize=(width, height), dpi=dpi, squeeze=False)
    fig.subplots_adjust(
        left=0.01,
        right=0.99,
        bottom=0.01,
        top=1 - caption_inches / height,
        wspace=0.04,
        hspace=TITLE_INCHES / grid.height,
    )
    angles = BeamLayout(rec.scans.shape[2]).angles()
    families = rec.rooms.family.numpy()
    mixed = bool((families != families[0]).any())  # the family in each title when they differ
    panels = [Panel(axes[i // grid.cols][i % grid.cols], rec, i, env_cfg, angles, show_family=mixed) for i in range(n)]
    for k in range(n, grid.rows * grid.cols):
        axes[k // grid.cols][k % grid.cols].axis("off")
    caption_text = fig.suptitle("", fontsize=CAPTION_POINTS, y=1 - 0.1 * CAPTION_INCHES / height, va="top")
    caption = "\n".join(lines)
    frames = []
    palette = None
    every = max(1, rec.frames // 5)
    for f in range(rec.frames):
        for panel in panels:
            panel.update(f)
        caption_text.set_text(f"{caption}   t = {f * rec.control_period:4.1f} s")
        fig.canvas.draw()
        rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3]
        if palette is None:
            palette = shared_palette(rgb)
        frames.append(to_palette(rgb, palette))
        if (f + 1) % every == 0 or f + 1 == rec.frames:
            print(f"[play] rendered {f + 1}/{rec.frames} frames", flush=True)
    plt.close(fig)
    step_ms = round(1000 / fps)
    durations = [step_ms] * (len(frames) - 1) + [max(step_ms, END_HOLD_MS)]
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        frames[0].save(staging, format="GIF", save_all=True, append_images=frames[1:], duration=durations, loop=0)
        os.replace(staging, out)
    finally:
        staging.unlink(missing_ok=True)
    return len(frames)


def shared_palette(first: np.ndarray):
    """One palette for every frame, so that a frame differs from the last only where the picture
    does (GIF stores the changed box): every drawn colour exactly, with its blends into white
    (antialiasing), and the first frame's other colours."""
    from matplotlib.colors import to_rgb
    from PIL import Image

    drawn = np.array([to_rgb(c) for c in dict.fromkeys(DRAWN)])
    blends = np.concatenate([drawn * a + (1 - a) for a in (1.0, 0.7, 0.4)])
    fixed = np.unique(np.round(255 * blends).astype(np.uint8), axis=0)
    rest = Image.fromarray(first).quantize(colors=256 - len(fixed), method=Image.Quantize.MEDIANCUT)
    colours = np.concatenate([fixed, np.array(rest.getpalette()[: 3 * (256 - len(fixed))], np.uint8).reshape(-1, 3)])
    palette = Image.new("P", (1, 1))
    palette.putpalette(colours.reshape(-1).tolist())
    return palette


def to_palette(rgb: np.ndarray, palette):
    """``rgb`` in ``palette``'s colours (nearest, no dithering: flat areas stay flat)."""
    from PIL import Image

    return Image.fromarray(rgb).quantize(palette=palette, dither=Image.Dither.NONE)


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog=TOOL, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_policy_source(p)
    p.add_argument(
        "--episodes", type=at_least(1), default=4, help=f"panels, one world each (default 4, at most {MAX_EPISODES})"
    )
    p.add_argument("--seed", type=int, default=None, help="world seed (default: the config's runner.eval_seed)")
    p.add_argument("--out", default="play.gif", help="the GIF to write (replaced if it exists)")
    p.add_argument(
        "--fps", type=at_least(1), default=10, help=f"frames per second, one frame per control step (at most {MAX_FPS})"
    )
    p.add_argument(
        "--max-steps",
        type=at_least(1),
        default=None,
        help="stop after this many control steps (default: the episode length)",
    )
    p.add_argument(
        "--dpi", type=at_least(20), default=100, help=f"pixels per inch; a panel is {PANEL_INCHES} inches wide"
    )
    p.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="with --checkpoint (a bundle runs on the CPU)"
    )
    p.add_argument(
        "--family",
        default=None,
        metavar="NAME",
        help=f"play one world family at its top level ({'|'.join(FAMILIES)}): env.worlds.families={{NAME: 1.0}} "
        "env.worlds.curriculum.enabled=false",
    )
    p.add_argument(
        "--path-following",
        action="store_true",
        help="the policy follows sub-goals along the planner's path: env.worlds.path_following=1.0",
    )
    p.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. randomization.enabled=false")
    args = p.parse_intermixed_args(argv)
    try:
        check_inputs(args)
    except CliError as err:
        report(TOOL, err)
        return EXIT_USAGE
    return play(args)


def check_inputs(args: argparse.Namespace) -> None:
    """Every input checked before a world is built (the checkpoint or bundle and the overrides as
    nav-evaluate checks them); CliError otherwise."""
    if args.episodes > MAX_EPISODES:
        raise CliError(f"--episodes {args.episodes}: at most {MAX_EPISODES} panels fit a watchable GIF")
    if args.fps > MAX_FPS:
        raise CliError(f"--fps {args.fps}: at most {MAX_FPS} (GIF frame delays are hundredths of a second)")
    out = Path(args.out)
    if out.suffix.lower() != ".gif":
        raise CliError(f"--out {args.out}: the animation is a GIF, name it *.gif")
    if out.is_dir():
        raise CliError(f"--out {args.out} is a folder, not a file")
    check_can_create(out, "--out file")
    args.overrides = [*world_overrides(args), *args.overrides]
    if args.checkpoint and args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise CliError("--device cuda requested but torch sees no CUDA device")
    from navtrain.evaluate_cli import node_params, prepare, scan_map_cfg

    inputs = {"checkpoint": args.checkpoint, "bundle": args.bundle, "overrides": args.overrides}
    no_outputs = dict.fromkeys(("suite", "json", "plot", "baseline", "label", "rows", "out"))
    prepare(argparse.Namespace(**inputs, dwa_params=args.dwa_params, **no_outputs))
    scan_map_cfg(args)  # --scan-map with a bundle's policy only, --map-beams >= 0
    node_params(args)  # --node with a bundle, not with --scan-map


def world_overrides(args: argparse.Namespace) -> list[str]:
    """The overrides ``--family`` and ``--path-following`` stand for; CliError for an unknown
    family, or for an override that sets the same key as one of them."""
    flags: dict[str, tuple[str, list[str]]] = {}
    if args.family is not None:
        if args.family not in FAMILIES:
            raise CliError(f"--family {args.family}: unknown world family (known: {', '.join(FAMILIES)})")
        sets = [f"env.worlds.families={{{args.family}: 1.0}}", "env.worlds.curriculum.enabled=false"]
        flags["env.worlds.families"] = (f"--family {args.family}", sets)
    if args.path_following:
        flags["env.worlds.path_following"] = ("--path-following", ["env.worlds.path_following=1.0"])
    for ov in args.overrides:
        key = ov.split("=", 1)[0].strip()
        if key in flags:
            raise CliError(f"{flags[key][0]} and the override {ov} both set {key}: give one of them")
    return [o for _, sets in flags.values() for o in sets]


def describe_worlds(env_cfg: EnvCfg) -> str:
    """The worlds played, for the caption: nothing for the rooms of ``env.room``, else the families and the
    path-following share."""
    w = env_cfg.worlds
    if not planned(w):
        return ""
    text = ", " + "+".join(active_families(w))
    if w.path_following >= 1.0:
        text += ", following the planned path"
    elif w.path_following > 0:
        text += f", {w.path_following:.0%} following the planned path"
    return text


def play(args: argparse.Namespace) -> int:
    """Build the evaluation worlds, record the episodes, write the GIF (inputs already checked)."""
    import torch

    from navtrain.evaluate_cli import policy_source
    from navtrain.evaluation import eval_env

    evaluator, name, driver = policy_source(args)
    if driver is not None:
        name = f"{name} ({driver})"
    cfg = copy.deepcopy(evaluator.cfg)
    env, seed = eval_env(cfg, args.episodes, args.seed, None, evaluator.device)
    act = evaluator.make_act(env)
    gen = torch.Generator(device=env.device)
    gen.manual_seed(seed)
    rooms = env.new_rooms(env.num_envs, gen)  # the first worlds nav-evaluate draws for this seed
    worlds = describe_worlds(cfg.env)
    print(f"[play] {evaluator.label}: {args.episodes} episodes, seed {seed}{worlds}", flush=True)
    rec = record(env, act, rooms, args.max_steps or env.max_episode_length)
    ends = ", ".join(
        f"{i}: {o} ({rec.steps[i] * rec.control_period:.1f} s)" if o else f"{i}: running"
        for i, o in enumerate(rec.outcomes)
    )
    print(f"[play] episodes {ends}", flush=True)
    out = Path(args.out)
    caption = f"{name}{worlds}, seed {seed}"
    frames = render_gif(rec, cfg.env, out, args.fps, args.dpi, caption)
    print(f"[play] wrote {out}: {frames} frames, {out.stat().st_size / 1e6:.2f} MB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
