#!/usr/bin/env python3
"""Install a recipe's finished policy as the bundle the nav_policy package ships for its base.

    .venv/bin/python scripts/ship_bundle.py policies/jackal_direct        # -> nav_policy/jackal_bundle/
    .venv/bin/python scripts/ship_bundle.py policies/holonomic_steer      # -> nav_policy/default_bundle/
    .venv/bin/python scripts/ship_bundle.py policies/NAME --package-dir DIR

``policies/NAME/`` is what ``nav-recipe run`` wrote (its ``PROVENANCE.json`` beside ``bundle/``).
The bundle's files go, byte for byte, with that provenance, into the package folder of the base the
recipe trained for (:func:`nav_policy.paths.installed_bundles`' rule: ``<base>_bundle/`` beside
``policy_node``, and ``default_bundle/`` for the default base, which a recipe without a ``base``
trains), replacing what was there. Every file is checked against the provenance's SHA-256 first; a
missing or altered file is one line on stderr and exit code 2, and nothing is changed. Then rebuild
(``colcon build`` or ``pip install``) to install the new bundle.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from nav_policy.paths import BASE_BUNDLE_SUFFIX, DEFAULT_BUNDLE, default_bundle_dir
from navcontract.base import DEFAULT_BASE

PROVENANCE = "PROVENANCE.json"


class ShipError(Exception):
    """Why a policy folder cannot be shipped (one line)."""


def files_to_ship(policy: Path) -> tuple[str, dict[str, Path], Path]:
    """The base the policy was trained for, its bundle's files by name (each checked against the
    provenance's SHA-256) and the provenance file."""
    prov_path = policy / PROVENANCE
    try:
        prov = json.loads(prov_path.read_text())
        base = str(prov["config"]["base"] or DEFAULT_BASE)  # a recipe without a base trains the default
        listed = dict(prov["bundle"]["files"])
        folder = policy / str(prov["bundle"]["folder"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ShipError(f"{prov_path}: not a finished recipe's provenance ({type(exc).__name__}: {exc})") from exc
    files = {}
    for name, digest in sorted(listed.items()):
        path = folder / name
        if not path.is_file():
            raise ShipError(f"{path}: listed in {prov_path} but missing")
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != digest:
            raise ShipError(f"{path}: sha256 {got[:12]}, {prov_path} says {str(digest)[:12]}")
        files[name] = path
    return base, files, prov_path


def ship(policy: Path, package_dir: Path) -> Path:
    """Replace ``package_dir/<base>_bundle/`` with the policy's bundle and provenance; returns it."""
    base, files, prov_path = files_to_ship(policy)
    if not package_dir.is_dir():
        raise ShipError(f"{package_dir}: no such package folder")
    dest = package_dir / (DEFAULT_BUNDLE if base == DEFAULT_BASE else f"{base}{BASE_BUNDLE_SUFFIX}")
    with tempfile.TemporaryDirectory(dir=package_dir, prefix=f".{dest.name}.") as tmp:
        staged = Path(tmp) / dest.name
        staged.mkdir()
        for name, path in files.items():
            shutil.copyfile(path, staged / name)
        shutil.copyfile(prov_path, staged / PROVENANCE)
        if dest.exists():
            shutil.rmtree(dest)
        staged.rename(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("policy", type=Path, help="a recipe's result folder, e.g. policies/jackal_direct")
    p.add_argument(
        "--package-dir",
        type=Path,
        default=default_bundle_dir().parent,
        help="the nav_policy package folder (default: the one this interpreter imports)",
    )
    args = p.parse_args(argv)
    try:
        dest = ship(args.policy, args.package_dir)
    except ShipError as err:
        print(f"ship_bundle: {err}", file=sys.stderr)
        return 2
    names = sorted(q.name for q in dest.iterdir())
    print(f"ship_bundle: {args.policy} -> {dest} ({', '.join(names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
