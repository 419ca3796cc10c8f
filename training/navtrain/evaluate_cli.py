"""Evaluate a checkpoint, or a robot-side controller from a bundle, on unseen rooms.

    python training/evaluate.py --checkpoint PATH [--episodes N] [--seed S] [--json out.json]
                                [--plot out.png] [--device cpu|cuda] [section.key=value ...]
    python training/evaluate.py --bundle DIR --controller policy|dwa [--dwa-params YAML] [--node] [...]
    python training/evaluate.py --suite robustness --checkpoint PATH | --bundle DIR [--episodes 1000]
                                [--out STEM] [--baseline OTHER.json] [--label NAME] [--rows a,b]
    python training/evaluate.py --suite families --checkpoint PATH | --bundle DIR [--episodes 500]
                                [--out STEM] [--label NAME] [--rows a,b]
    python training/evaluate.py --suite safety --bundle DIR --node --controller policy|dwa
                                [--episodes 1000] [--out STEM] [--rows posts,posts270] [--batch-log FILE]

``--checkpoint``: the deterministic (mean-action) policy, batched in torch. ``--bundle``: what the
robot runs, world by world on the CPU: ``policy`` is the bundle's ONNX policy through the
runtime, ``dwa`` the dynamic-window baseline built from the bundle's contract (both report their
compute time per call); the rooms follow the bundle's training config. ``--node`` puts the
controller behind the node's own command gate with ``policy_node``'s default parameters (scan
rules on a 720-beam lidar, scan map, blocked and stuck handling, velocity smoother, the guard as
the last stage; the simulator's own guard off): what the robot runs (navtrain.evaluation.NodeActor).

Auto-reset is off: every world runs one episode, and its end is read directly. Rooms come from a
seed stream never used in training (default: runner.eval_seed of the checkpoint's config). Prints
and writes success / collision / timeout rates, mean time to goal and SPL (reference path: the
straight start-goal line, see navtrain/evaluation.py). Overrides change the evaluation rooms, e.g.
``env.room.num_obstacles=[16,16]`` for denser rooms than training; an override that changes the
policy observation (e.g. ``env.lidar.max_range``) is refused.

Bad input (a missing or corrupt checkpoint, a bundle that cannot be loaded, a malformed override,
an output path that cannot be written) is one line on stderr and exit code 2, before any world is
built. See docs/failures.md.

``--suite robustness`` runs the robustness matrix (navtrain/robustness.py): the same rooms under
randomisation off, each randomisation term alone at the severe end of its trained range and at
twice that severity, and all terms together; writes STEM.json, STEM.md and STEM.png
(``--out``, default ``robustness``), with ``--baseline`` another suite JSON side by side.

``--suite families`` runs every world family (navtrain/families_suite.py): today's rooms, rooms
with 16 obstacles, clutter fields, corridors with dead ends in goal mode and following the
planner's path, large arenas; 500 unseen worlds per row, SPL against the shortest feasible path;
writes STEM.json, STEM.md, STEM.png and a picture per row (``--out``, default ``families``).
Any world family can also be evaluated alone with overrides, e.g.
``env.worlds.families={clutter: 1} env.worlds.path_following=1``.

``--suite safety`` (navtrain/safety_suite.py) drives a bundle's policy or DWA behind the node's gate
through thin-post clutter with a 360- and a 270-degree lidar, training randomisation on; it counts
collisions and the timeouts in worlds passable for the guard (bars: none, at most 0.5 %).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from navtrain.checkpoint_file import CheckpointError, check_checkpoint_file
from navtrain.cli import EXIT_USAGE, CliError, OneLineParser, at_least, check_can_create, report

TOOL = "nav-evaluate"


def add_policy_source(p: argparse.ArgumentParser) -> None:
    """The options that name what drives the robot: a checkpoint, or a bundle and its controller
    (nav-evaluate, nav-play)."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="training checkpoint (.pt): the torch actor")
    src.add_argument("--bundle", help="exported bundle folder: a robot-side controller (see --controller)")
    p.add_argument("--controller", choices=["policy", "dwa"], default="policy", help="with --bundle")
    p.add_argument("--dwa-params", default=None, help="DWA parameters YAML (default: navdeploy/dwa.yaml)")
    p.add_argument(
        "--scan-map",
        action="store_true",
        help="with --bundle --controller policy: goal-mode worlds drive along a path planned on the robot's "
        "own scans (navdeploy.scan_map, the node's scan_map parameter)",
    )
    p.add_argument(
        "--map-beams",
        type=int,
        default=720,
        help="with --scan-map: beams of the lidar the map is built from; with --node: of the lidar the node "
        "gets (evenly over 360 degrees; 0: the policy's own sector readings)",
    )
    p.add_argument(
        "--node",
        action="store_true",
        help="with --bundle: behind the node's own command gate with policy_node's defaults (scan rules, "
        "scan map, stuck handling, smoother, the guard last; the simulator's guard off)",
    )


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog=TOOL, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_policy_source(p)
    p.add_argument("--episodes", type=at_least(1), default=None, help="rooms (default 500; 1000 per row with --suite)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--json", default=None, help="write the metrics here")
    p.add_argument("--plot", default=None, help="PNG of several rooms with the driven paths")
    p.add_argument("--device", default="cpu")
    p.add_argument("--num-envs", type=at_least(1), default=None, help="worlds per batch (default: min(episodes, 500))")
    p.add_argument(
        "--suite", choices=["robustness", "families", "safety"], default=None, help="run an evaluation matrix"
    )
    p.add_argument(
        "--out",
        default=None,
        help="with --suite: output stem (STEM.json, STEM.md, STEM.png; default: the suite's name)",
    )
    p.add_argument("--baseline", default=None, help="with --suite: another suite's JSON, shown side by side")
    p.add_argument("--label", default=None, help="with --suite: this policy's name in the outputs")
    p.add_argument(
        "--rows",
        default=None,
        help="with --suite: only these rows (comma-separated names; robustness also takes shell patterns such as '*@high')",
    )
    p.add_argument(
        "--replay",
        type=at_least(0),
        default=None,
        help="with --suite safety and one row: run that episode again (its batch, with the --num-envs of the run "
        "that named it) and write the trace of its gate, tick by tick, to STEM.json",
    )
    p.add_argument(
        "--batch-log",
        default=None,
        help="with --suite safety: keep each finished batch in this JSON file; run again with the same file, "
        "the suite goes on from the next batch (a new file after a change to the gate or the simulator)",
    )
    add_lidar_mount_options(p)
    p.add_argument("overrides", nargs="*")
    args = p.parse_args(argv)
    try:
        env_cfg = prepare(args)
        scan_map_cfg(args)  # --scan-map and --node checked before any env is built
        node_params(args)
        lidar_mount(args)
        if args.suite:
            return suite_main(args)
    except CliError as err:
        report(TOOL, err)
        return EXIT_USAGE
    args.episodes = args.episodes or 500

    from navtrain.evaluation import evaluate_checkpoint, evaluate_controller, plot_trace, write_json

    rooms = {"episodes": args.episodes, "seed": args.seed, "num_envs": args.num_envs, "overrides": args.overrides}
    if args.checkpoint:
        result, trace = evaluate_checkpoint(args.checkpoint, device=args.device, **rooms)
    else:
        result, trace = evaluate_controller(
            args.bundle,
            args.controller,
            dwa_params=args.dwa_params,
            scan_map=scan_map_cfg(args),
            map_beams=args.map_beams,
            node=node_params(args),
            lidar_mount=lidar_mount(args),
            **rooms,
        )
    print(json.dumps(asdict(result), indent=2))
    if args.json:
        write_json(result, args.json)
        print(f"[evaluate] wrote {args.json}")
    if args.plot and trace is not None:
        title = f"{result.controller}: success {100 * result.success_rate:.1f}%  collision {100 * result.collision_rate:.1f}%  ({result.episodes} episodes)"
        plot_trace(trace, env_cfg, args.plot, title=title)
        print(f"[evaluate] wrote {args.plot}")
    return 0


def add_lidar_mount_options(p: argparse.ArgumentParser) -> None:
    """``--lidar-mount`` and ``--node-unaware`` (see :func:`lidar_mount`)."""
    p.add_argument(
        "--lidar-mount",
        default=None,
        metavar="X,Y,YAW[,upside_down]",
        help="with --node: the simulated robot's lidar sits at X, Y [m] on the body, turned by YAW [deg], "
        "optionally upside down; the node is told (its lidar_* parameters) unless --node-unaware "
        "(a negative X: --lidar-mount=-0.04,0,90)",
    )
    p.add_argument(
        "--node-unaware",
        action="store_true",
        help="with --lidar-mount: the node's lidar_* parameters stay at the centre (a user who did not set them)",
    )


def suite_main(args: argparse.Namespace) -> int:
    """``--suite robustness|families|safety``: inputs checked by :func:`prepare`; CliError for unknown rows."""
    from navtrain.robustness import merge_baseline, run_suite, select_rows, suite_rows, write_outputs

    if args.suite == "families":
        return families_main(args)
    if args.suite == "safety":
        return safety_main(args)
    evaluator = suite_evaluator(args)
    rows = None
    if args.rows:
        rows = [r.strip() for r in args.rows.split(",") if r.strip()]
        try:
            select_rows(suite_rows(evaluator.cfg), rows)
        except ValueError as err:
            raise CliError(f"--rows: {err}") from None
    payload = run_suite(evaluator, episodes=args.episodes or 1000, seed=args.seed, num_envs=args.num_envs, rows=rows)
    notes = merge_baseline(payload, args.baseline_data) if args.baseline_data is not None else []
    paths = write_outputs(payload, args.out, notes)
    print(paths[1].read_text())
    print(f"[evaluate] wrote {', '.join(str(p) for p in paths)}")
    return 0


def scan_map_cfg(args: argparse.Namespace):
    """The node's default scan map when ``--scan-map`` is given (checked: a bundle's policy only)."""
    if not getattr(args, "scan_map", False):
        return None
    if args.checkpoint or args.controller != "policy":
        raise CliError("--scan-map goes with --bundle and --controller policy")
    if args.map_beams < 0:
        raise CliError(f"--map-beams must be >= 0, got {args.map_beams}")
    from navdeploy.scan_map import ScanMapCfg

    return ScanMapCfg()


def node_params(args: argparse.Namespace):
    """``policy_node``'s default parameters when ``--node`` is given (checked: a bundle, no --scan-map)."""
    if not getattr(args, "node", False):
        return None
    if args.checkpoint:
        raise CliError("--node goes with --bundle (the node runs a bundle)")
    if getattr(args, "scan_map", False):
        raise CliError("--node runs the node's own scan map (its default): leave out --scan-map")
    if args.map_beams < 0:
        raise CliError(f"--map-beams must be >= 0, got {args.map_beams}")
    from navdeploy.node_params import NodeParams

    mount = lidar_mount(args)
    if mount is None or args.node_unaware:
        return NodeParams()
    return NodeParams(lidar_x=mount.x, lidar_y=mount.y, lidar_yaw=mount.yaw, lidar_upside_down=mount.upside_down)


def lidar_mount(args: argparse.Namespace):
    """``--lidar-mount X,Y,YAW_DEG[,upside_down]`` as a :class:`navcontract.scan.LidarMount` (None: not
    given); with --node only, one evaluation, not a suite."""
    text = getattr(args, "lidar_mount", None)
    if text is None:
        if getattr(args, "node_unaware", False):
            raise CliError("--node-unaware goes with --lidar-mount")
        return None
    if not getattr(args, "node", False) or args.suite:
        raise CliError("--lidar-mount goes with --node, without --suite")
    import math

    from navcontract.scan import LidarMount

    parts = [q.strip() for q in text.split(",")]
    flip = len(parts) == 4 and parts[3] == "upside_down"
    try:
        if len(parts) not in (3, 4) or (len(parts) == 4 and not flip):
            raise ValueError("expected X,Y,YAW or X,Y,YAW,upside_down")
        return LidarMount(float(parts[0]), float(parts[1]), math.radians(float(parts[2])), flip)
    except ValueError as exc:
        raise CliError(f"--lidar-mount {text!r}: {exc}") from None


def policy_source(args: argparse.Namespace) -> tuple[Any, str, str | None]:
    """What the options of :func:`add_policy_source` name: the evaluator (a checkpoint's torch actor,
    or a bundle's robot-side controller), the file or folder's name, and for a bundle its driver in
    words (``policy + scan map``, ``dwa, behind the node's gate``; None for a checkpoint)."""
    from navtrain.evaluation import bundle_evaluator, checkpoint_evaluator

    if args.checkpoint:
        return checkpoint_evaluator(args.checkpoint, args.overrides, args.device), Path(args.checkpoint).name, None
    evaluator = bundle_evaluator(
        args.bundle,
        args.controller,
        args.overrides,
        args.dwa_params,
        scan_map_cfg(args),
        args.map_beams,
        node_params(args),
    )
    note = " + scan map" if args.scan_map else (", behind the node's gate" if args.node else "")
    return evaluator, Path(args.bundle).name, args.controller + note


def suite_evaluator(args: argparse.Namespace):
    """The evaluator a suite runs: the checkpoint's torch actor, or a bundle's robot-side controller."""
    evaluator, name, driver = policy_source(args)
    evaluator.label = args.label or (name if driver is None else f"{name} ({driver}, robot runtime)")
    return evaluator


def families_main(args: argparse.Namespace) -> int:
    """``--suite families`` (navtrain/families_suite.py)."""
    from navtrain import families_suite

    if args.baseline is not None:
        raise CliError("--baseline goes with --suite robustness")
    rows = chosen_rows(args, families_suite.row_names())
    evaluator = suite_evaluator(args)
    payload = families_suite.run_suite(
        evaluator, episodes=args.episodes or 500, seed=args.seed, num_envs=args.num_envs, rows=rows, out=args.out
    )
    paths = families_suite.write_outputs(payload, args.out)
    print(paths[1].read_text())
    print(f"[evaluate] wrote {', '.join(str(p) for p in paths)}")
    return 0


def chosen_rows(args: argparse.Namespace, names: list[str]) -> list[str] | None:
    """The rows ``--rows`` names (None: every row); CliError naming the unknown ones."""
    if not args.rows:
        return None
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in names]
    if unknown:
        raise CliError(f"--rows: unknown row(s) {', '.join(unknown)} (known: {', '.join(names)})")
    return rows


def safety_main(args: argparse.Namespace) -> int:
    """``--suite safety`` (navtrain/safety_suite.py): a bundle behind the node's gate (``--node``)."""
    from navtrain import safety_suite
    from navtrain.row_log import bundle_digest

    if args.checkpoint or not args.node:
        raise CliError("--suite safety drives a bundle behind the node's gate: give --bundle DIR --node")
    if args.baseline is not None:
        raise CliError("--baseline goes with --suite robustness")
    rows = chosen_rows(args, safety_suite.row_names())
    evaluator = suite_evaluator(args)
    if args.replay is not None:
        return safety_replay(args, evaluator, rows)
    payload = safety_suite.run_suite(
        evaluator,
        episodes=args.episodes or 1000,
        seed=args.seed,
        num_envs=args.num_envs,
        rows=rows,
        episode_s=safety_episode_s(args),
        log=args.batch_log,
        log_key=None if args.batch_log is None else {"bundle": bundle_digest(Path(args.bundle))},
    )
    paths = safety_suite.write_outputs(payload, args.out)
    print(paths[1].read_text())
    print(f"[evaluate] wrote {', '.join(str(p) for p in paths)}")
    return 0


def safety_episode_s(args: argparse.Namespace) -> float | None:
    """The safety suite's episode length: its own (:data:`navtrain.safety_suite.EPISODE_S`) unless the
    command's overrides set ``env.episode_length_s`` (then None: the evaluator's config has it)."""
    from navtrain.safety_suite import EPISODE_S

    given = any(o.split("=", 1)[0].strip() == "env.episode_length_s" for o in args.overrides)
    return None if given else EPISODE_S


def safety_replay(args: argparse.Namespace, evaluator: Any, rows: list[str] | None) -> int:
    """``--suite safety --replay EPISODE``: one world of one row again, with its gate's trace."""
    from navtrain import safety_suite
    from navtrain.episode_replay import replay

    if rows is None or len(rows) != 1:
        raise CliError("--replay needs exactly one row: --rows NAME")
    if args.num_envs is None:
        raise CliError("--replay needs the --num-envs of the run that named the episode (its JSON's num_envs)")
    row = next(r for r in safety_suite.ROWS if r.name == rows[0])
    seed = evaluator.cfg.runner.eval_seed if args.seed is None else args.seed
    png = Path(args.out).with_suffix(".png")
    overrides = safety_suite.row_overrides(row, safety_episode_s(args))
    out = replay(evaluator, row.name, overrides, args.replay, seed, args.num_envs, png=png)
    path = Path(args.out).with_suffix(".json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(
        f"[safety] {row.name} episode {out['episode']} (batch of {out['num_envs']}): {out['outcome']} after "
        f"{out['time_s']:.1f} s, {out['idle_s']:.1f} s without progress at the end, passable {out['passable']} "
        f"for its lidar (error {100 * out['lidar_error_m']:.1f} cm; with a perfect lidar {out['passable_nominal']})"
    )
    last = None
    for tick in out["ticks"]:
        if tick["state"] != last:
            print(f"  t {tick['t']:6.1f} s  {tick['state']}: {tick['reason']}")
            last = tick["state"]
    print(f"[evaluate] wrote {path} and {png}")
    return 0


def _suite_inputs(args: argparse.Namespace) -> None:
    """The suite's own arguments: output stem, baseline JSON (read here, kept on ``args``)."""
    args.baseline_data = None
    for flag in ("replay", "batch_log"):
        if getattr(args, flag, None) is not None and args.suite != "safety":
            raise CliError(f"--{flag.replace('_', '-')} goes with --suite safety")
    if getattr(args, "batch_log", None) is not None:
        if getattr(args, "replay", None) is not None:
            raise CliError("--batch-log goes with a run of the suite, not with --replay")
        if Path(args.batch_log).is_dir():
            raise CliError(f"--batch-log {args.batch_log} is a folder")
        check_can_create(Path(args.batch_log), "--batch-log file")
    if not args.suite:
        for flag in ("baseline", "label", "rows", "out"):
            if getattr(args, flag) is not None:
                raise CliError(f"--{flag} goes with --suite")
        return
    for flag in ("json", "plot"):
        if getattr(args, flag) is not None:
            raise CliError(f"--{flag} does not go with --suite (it writes --out STEM.json, STEM.md, STEM.png)")
    args.out = args.out or args.suite
    for suffix in (".json", ".md", ".png"):
        target = Path(args.out).with_suffix(suffix)
        if target.is_dir():
            raise CliError(f"--out {args.out}: {target} is a folder")
        check_can_create(target, "--out file")
    if args.baseline is not None and args.suite == "robustness":
        from navtrain.robustness import SUITE

        try:
            data = json.loads(Path(args.baseline).read_text())
        except FileNotFoundError:
            raise CliError(f"--baseline {args.baseline}: no such file") from None
        except (OSError, UnicodeDecodeError) as err:
            raise CliError(f"--baseline {args.baseline}: cannot read it ({err})") from None
        except json.JSONDecodeError as err:
            raise CliError(f"--baseline {args.baseline} is not valid JSON ({err.msg} at line {err.lineno})") from None
        if not isinstance(data, dict) or data.get("suite") != SUITE or not isinstance(data.get("rows"), list):
            raise CliError(f"--baseline {args.baseline} is not a {SUITE} suite JSON (written by --suite {SUITE})")
        args.baseline_data = data


def prepare(args: argparse.Namespace):
    """Check every input before a world is built; returns the env config of the evaluation rooms."""
    _suite_inputs(args)
    if args.checkpoint:
        try:
            check_checkpoint_file(args.checkpoint)  # before torch and the simulator are imported
        except CheckpointError as err:
            raise CliError(err) from None

    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None:
            if Path(path).is_dir():
                raise CliError(f"{flag} {path} is a folder, not a file")
            check_can_create(path, f"{flag} file")
    from navsim.config import ConfigError  # torch and the simulator: after the quick checks
    from navtrain.evaluation import checkpoint_for_evaluation, with_overrides

    if args.checkpoint:
        try:
            return checkpoint_for_evaluation(args.checkpoint, args.overrides)[1].env
        except (CheckpointError, ConfigError) as err:
            raise CliError(err) from None
    bundle = Path(args.bundle)
    if not (bundle / "policy.onnx").is_file():
        raise CliError(f"no bundle (policy.onnx + contract.json) in {bundle}")
    contract_path = bundle / "contract.json"
    if contract_path.is_file():
        try:
            json.loads(contract_path.read_text())
        except json.JSONDecodeError as err:
            raise CliError(
                f"{contract_path} is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
            ) from None
        except OSError as err:
            raise CliError(f"cannot read {contract_path}: {err.strerror or err}") from None
    if args.dwa_params is not None and not Path(args.dwa_params).is_file():
        raise CliError(f"--dwa-params {args.dwa_params}: no such file")
    from navcontract.bundle import BundleError
    from navdeploy.runtime import PolicyRuntime

    try:
        PolicyRuntime.load(bundle)
        return with_overrides(bundle_config(bundle), args.overrides).env
    except (BundleError, ConfigError, KeyError, TypeError, ValueError, RuntimeError) as err:
        detail = f"{type(err).__name__}: {err}" if isinstance(err, (KeyError, TypeError, RuntimeError)) else str(err)
        raise CliError(f"bundle {bundle}: {detail}") from None


def bundle_config(bundle: str | Path):
    """The training config a bundle records (contract ``source.nav_config``)."""
    from navcontract.bundle import read_contract
    from navsim.config_load import config_from_data

    return config_from_data(read_contract(bundle).raw["source"]["nav_config"], where=f"{bundle} contract")


if __name__ == "__main__":
    sys.exit(main())
