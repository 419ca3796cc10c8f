"""What the benchmark commands share (``nav-benchmark-tick`` here, ``nav-benchmark-latency`` and
``nav-benchmark-memory`` in navbags): the ``--bundle`` option, which falls back to
``$NAV_POLICY_BUNDLE`` and then to a default bundle folder under the current directory.

Standard library only, so that importing it costs a benchmark nothing."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

BUNDLE_ENV = "NAV_POLICY_BUNDLE"


def add_bundle_option(ap: argparse.ArgumentParser, default: str) -> None:
    """``--bundle DIR`` (default None: :func:`bundle_or_default`); ``default`` names the fallback folder."""
    ap.add_argument(
        "--bundle",
        type=Path,
        default=None,
        help=f"bundle folder (default: ${BUNDLE_ENV}, else {default} under the current directory)",
    )


def bundle_or_default(given: Path | None, default: Path) -> Path:
    """``given``, else ``$NAV_POLICY_BUNDLE``, else ``default``; SystemExit with one line when that folder
    holds no policy.onnx."""
    env = os.environ.get(BUNDLE_ENV)
    bundle = given or (Path(env) if env else default)
    if not (bundle / "policy.onnx").is_file():
        raise SystemExit(
            f"no policy bundle at '{bundle}': pass --bundle (a folder with policy.onnx + contract.json), set "
            f"{BUNDLE_ENV}, or run from the repository root ({default})"
        )
    return bundle
