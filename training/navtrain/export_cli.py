"""Export a training checkpoint to a deployment bundle.

    python training/export.py --checkpoint logs/rsl_rl/nav/<run>/model_300.pt --out bundles/nav [--force]

writes ``OUT/policy.onnx`` (self-contained: normaliser + actor MLP, raw mean action out, contract
in the metadata), ``OUT/contract.json`` (the same contract, readable) and ``OUT/export_check.json``
(the self-check numbers). The bundle is written beside ``OUT``, checked, and renamed into place:
a failed export leaves ``OUT`` as it was. ``OUT`` must be new, empty, or hold a bundle; re-exporting
the same checkpoint replaces its bundle, a different bundle needs ``--force``.

Exit codes: 0 done; 1 the self-check failed (numbers on stderr, ``OUT`` untouched); 2 bad input
(checkpoint, config, arguments, output folder), found before the rollout. See docs/failures.md.
"""

from __future__ import annotations

import json
import signal
import sys

from navtrain.checkpoint_file import CheckpointError, check_checkpoint_file
from navtrain.cli import EXIT_INTERRUPTED, EXIT_USAGE, OneLineParser, at_least, positive_float, report

TOOL = "nav-export"


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog=TOOL, description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="rsl_rl checkpoint (.pt) written by OnPolicyRunner.save")
    p.add_argument("--out", required=True, help="output directory of the bundle")
    p.add_argument(
        "--config", default=None, help="nav config YAML, used when the checkpoint has no infos['nav_config']"
    )
    p.add_argument(
        "--num-obs", type=at_least(1000), default=1024, help="recorded observations for the self-check (>= 1000)"
    )
    p.add_argument("--num-envs", type=at_least(1), default=32, help="worlds rolled out to record observations")
    p.add_argument(
        "--tol", type=positive_float, default=1e-5, help="max |ONNX - torch| allowed on the recorded observations"
    )
    p.add_argument("--device", default=None, help="Warp device of the recording rollout (default: cuda if any)")
    p.add_argument("--force", action="store_true", help="replace a different bundle already in --out")
    args = p.parse_args(argv)
    options = dict(vars(args))  # every option but the two paths is the export_bundle keyword of its name
    checkpoint, out = options.pop("checkpoint"), options.pop("out")
    try:
        check_checkpoint_file(checkpoint)  # before torch and the simulator are imported
    except CheckpointError as err:
        report(TOOL, err)
        return EXIT_USAGE

    from navcontract.guard import GUARD_SECTION, GuardRule
    from navcontract.response import RobotResponse
    from navcontract.subgoal import TrainedPathFollowing
    from navtrain.export import CHECK_FILE, ExportCheckError, ExportError, export_bundle

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)  # so that the staging folder is removed
    try:
        path = export_bundle(checkpoint, out, **options)
    except ExportCheckError as err:
        report(TOOL, f"self-check failed, {out} left as it was: {err}")
        return 1
    except ExportError as err:
        report(TOOL, err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        report(TOOL, f"interrupted, {out} left as it was")
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
    check = json.loads((path.parent / CHECK_FILE).read_text())
    contract = json.loads((path.parent / "contract.json").read_text())
    print(f"wrote {path} and {path.parent / 'contract.json'}")
    print(
        f"fingerprint {contract['fingerprint']}, obs dim {contract['observation']['dim']}, "
        f"self-check: max |delta| {check['max_abs_diff']:.3e}, scaled by max(1, |action|) "
        f"{check.get('max_scaled_diff', check['max_abs_diff']):.3e} on {check['num_obs']} observations "
        f"(tol {check['tol']:.0e})"
    )
    print(f"robot_response: {RobotResponse.from_dict(contract['robot_response']).describe()}")
    print(f"path_following: {TrainedPathFollowing.from_dict(contract['path_following']).describe()}")
    guard = contract.get(GUARD_SECTION)
    print(f"guard: {GuardRule.from_dict(guard) if guard is not None else 'none (trained without the guard)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
