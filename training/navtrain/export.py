"""Export a training checkpoint to a deployment bundle.

    python training/export.py --checkpoint logs/rsl_rl/nav/<run>/model_300.pt --out bundles/nav

writes ``OUT/policy.onnx`` (self-contained: normaliser + actor MLP, raw mean action out, contract
in the metadata), ``OUT/contract.json`` (the same contract, readable) and ``OUT/export_check.json``
(the self-check numbers). Exits non-zero with the numbers when the self-check fails.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="rsl_rl checkpoint (.pt) written by OnPolicyRunner.save")
    p.add_argument("--out", required=True, help="output directory of the bundle")
    p.add_argument(
        "--config", default=None, help="nav config YAML, used when the checkpoint has no infos['nav_config']"
    )
    p.add_argument("--num-obs", type=int, default=1024, help="recorded observations for the self-check (>= 1000)")
    p.add_argument("--num-envs", type=int, default=32, help="worlds rolled out to record observations")
    p.add_argument("--tol", type=float, default=1e-5, help="max |ONNX - torch| allowed on the recorded observations")
    p.add_argument("--device", default=None, help="Warp device of the recording rollout (default: cuda if any)")
    args = p.parse_args(argv)
    if args.num_obs < 1000:
        p.error("--num-obs must be at least 1000")

    from navtrain.export_onnx import ExportError, export_bundle

    try:
        path = export_bundle(
            args.checkpoint,
            args.out,
            config=args.config,
            num_obs=args.num_obs,
            num_envs=args.num_envs,
            tol=args.tol,
            device=args.device,
        )
    except (ExportError, FileNotFoundError) as err:
        print(f"export failed: {err}", file=sys.stderr)
        return 1
    check = json.loads((path.parent / "export_check.json").read_text())
    contract = json.loads((path.parent / "contract.json").read_text())
    print(f"wrote {path} and {path.parent / 'contract.json'}")
    print(
        f"fingerprint {contract['fingerprint']}, obs dim {contract['observation']['dim']}, "
        f"self-check: max |delta| {check['max_abs_diff']:.3e} on {check['num_obs']} observations (tol {check['tol']:.0e})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
