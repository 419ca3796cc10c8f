"""Where the package's data lives: config/ and launch/ (the ament share folder, else the source
tree), and the trained default bundle.

A colcon build or a regular pip install puts config/ and launch/ under <prefix>/share/nav_policy
(found through the ament index when AMENT_PREFIX_PATH includes <prefix>). An editable pip install
does not copy data files; the source package folder has the same layout (package.xml, config/,
launch/).

The default bundle is package data, ``nav_policy/default_bundle/`` next to this module, so it is
found the same way in an editable install, a wheel and a colcon install; ``setup.py`` also installs
a copy to <prefix>/share/nav_policy/default_bundle, which the launch files name as their default.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

PACKAGE = "nav_policy"
BUNDLE_ENV = "NAV_POLICY_BUNDLE"
"""Environment variable naming a bundle folder; it overrides the installed default."""
DEFAULT_BUNDLE = "default_bundle"
"""The folder name of the trained default bundle (package data and share/nav_policy)."""


def share_dir() -> Path:
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            return Path(get_package_share_directory(PACKAGE))
        except (PackageNotFoundError, LookupError, ValueError, OSError):
            pass
    except ImportError:
        pass
    prefix_share = Path(sys.prefix) / "share" / PACKAGE
    if (prefix_share / "package.xml").is_file():
        return prefix_share
    return Path(__file__).resolve().parents[1]


def config_file(name: str) -> Path:
    return share_dir() / "config" / name


def default_bundle_dir() -> Path:
    """The trained bundle installed with the package (package data beside this module)."""
    return Path(__file__).resolve().parent / DEFAULT_BUNDLE


def resolve_bundle(bundle_path: str, environ: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """The bundle folder to load and where its name came from: ``bundle_path`` when not empty, else
    ``$NAV_POLICY_BUNDLE`` when set and not empty, else the installed default. ``~`` is expanded."""
    env = os.environ if environ is None else environ
    if bundle_path:
        return Path(os.path.expanduser(bundle_path)), "parameter bundle_path"
    named = env.get(BUNDLE_ENV, "")
    if named:
        return Path(os.path.expanduser(named)), f"${BUNDLE_ENV}"
    return default_bundle_dir(), "the installed default bundle"
