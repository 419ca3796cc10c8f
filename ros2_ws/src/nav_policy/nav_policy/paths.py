"""Where the package's data lives: config/ and launch/ (the ament share folder, else the source
tree), and the trained default bundle.

A colcon build or a regular pip install puts config/ and launch/ under <prefix>/share/nav_policy
(found through the ament index when AMENT_PREFIX_PATH includes <prefix>). An editable pip install
does not copy data files; the source package folder has the same layout (package.xml, config/,
launch/).

The trained bundles are package data next to this module, so they are found the same way in an
editable install, a wheel and a colcon install: ``nav_policy/default_bundle/`` (the holonomic disc,
the default) and one ``nav_policy/<preset>_bundle/`` per other base preset a bundle is shipped for
(``jackal_bundle/``). ``setup.py`` also installs copies to <prefix>/share/nav_policy/. A node whose
``robot_base`` names such a preset loads that base's bundle when no bundle is named, so one launch
argument (``robot_base:=jackal``) selects both the base and its policy.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from navcontract.base import DEFAULT_BASE, preset_names

PACKAGE = "nav_policy"
BUNDLE_ENV = "NAV_POLICY_BUNDLE"
"""Environment variable naming a bundle folder; it overrides the installed default."""
DEFAULT_BUNDLE = "default_bundle"
"""The folder name of the trained default bundle (package data and share/nav_policy)."""
BASE_BUNDLE_SUFFIX = "_bundle"
"""A base preset's installed bundle folder is ``<preset>_bundle`` beside the default bundle."""


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


def installed_bundles() -> dict[str, Path]:
    """The trained bundles installed with the package, by the base preset they were trained for."""
    here = Path(__file__).resolve().parent
    found = {DEFAULT_BASE: default_bundle_dir()}
    for folder in sorted(here.glob("*" + BASE_BUNDLE_SUFFIX)):
        if folder.is_dir() and folder.name != DEFAULT_BUNDLE:
            found[folder.name[: -len(BASE_BUNDLE_SUFFIX)]] = folder
    return found


def resolve_bundle(
    bundle_path: str, environ: Mapping[str, str] | None = None, robot_base: str = ""
) -> tuple[Path, str]:
    """The bundle folder to load and where its name came from: ``bundle_path`` when not empty, else
    ``$NAV_POLICY_BUNDLE`` when set and not empty, else the bundle installed for the preset
    ``robot_base`` names, else the installed default. ``~`` is expanded."""
    env = os.environ if environ is None else environ
    if bundle_path:
        return Path(os.path.expanduser(bundle_path)), "parameter bundle_path"
    named = env.get(BUNDLE_ENV, "")
    if named:
        return Path(os.path.expanduser(named)), f"${BUNDLE_ENV}"
    installed = installed_bundles()
    if robot_base and robot_base != DEFAULT_BASE:
        if robot_base in installed:
            return installed[robot_base], f"the installed bundle of base {robot_base}"
        if robot_base in preset_names():  # a preset without a bundle (a base file never has one)
            shipped = ", ".join(sorted(installed))
            return (
                default_bundle_dir(),
                f"the installed default bundle: none is installed for base {robot_base} ({shipped} are)",
            )
    return default_bundle_dir(), "the installed default bundle"
