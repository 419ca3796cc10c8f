"""Every dotted name of the project's packages in README.md and docs/*.md (``navsim.config_load.load_config``,
``navdeploy.gate.CommandGate``) names a module, or an attribute of one, that exists.

Resolving the training side's names imports torch, so this lives with the training tests; the
pages' relative links and repository paths are checked by tests/contract/test_docs_links.py.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGES = ("navcontract", "navdeploy", "navsim", "navtrain", "navbags")
DOTTED = re.compile(r"\b(?:" + "|".join(PACKAGES) + r")(?:\.\w+)*")
FILE_SUFFIXES = {"py", "yaml", "md", "json"}


def dotted_names(text: str) -> list[tuple[int, str]]:
    """(line, name) of every dotted project name; a trailing file suffix (``navsim.config.py``) is dropped."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in DOTTED.finditer(line):
            name = match.group(0)
            head, _, last = name.rpartition(".")
            found.append((number, head if head and last in FILE_SUFFIXES else name))
    return found


def resolves(name: str) -> bool:
    """True when the longest importable prefix of ``name`` is a module that has the rest as attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_dotted_name_resolves(page: Path) -> None:
    names = dotted_names(page.read_text(encoding="utf-8"))
    missing = sorted({f"{name} (line {line})" for line, name in names if not resolves(name)})
    assert not missing, f"{page.relative_to(ROOT)} names what does not exist: {missing}"


def test_the_checker_finds_and_judges_names() -> None:
    text = "see `navsim.config_load.load_config`, navdeploy/gate.py and\n`navcontract.bundle.py` (nav-policy-contract)."
    assert dotted_names(text) == [(1, "navsim.config_load.load_config"), (1, "navdeploy"), (2, "navcontract.bundle")]
    assert resolves("navdeploy.gate.CommandGate") and resolves("navsim.families.rooms.generate_rooms")
    assert not resolves("navdeploy.controller") and not resolves("navsim.config.NavConfig.no_such_method")
    assert sum(len(dotted_names(p.read_text(encoding="utf-8"))) for p in PAGES) > 100
