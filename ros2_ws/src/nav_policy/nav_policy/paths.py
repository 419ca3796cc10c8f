"""Where the package's data (config/, launch/) lives: the ament share folder, else the source tree.

A colcon build or a regular pip install puts them under <prefix>/share/nav_policy (found through
the ament index when AMENT_PREFIX_PATH includes <prefix>). An editable pip install does not copy
data files; the source package folder has the same layout (package.xml, config/, launch/).
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE = "nav_policy"


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
