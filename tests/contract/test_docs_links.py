"""Every relative link and every backticked repository path in README.md and docs/*.md exists."""

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("conf/", "contract/", "deploy/", "training/", "bags/", "ros2_ws/", "scripts/", "tests/", "docs/", ".ci/")
TOP_FILES = {"Dockerfile", ".dockerignore", "requirements.txt", "pyproject.toml", "README.md"}

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def expand_braces(text: str) -> list[str]:
    """`a.{json,md}` -> [`a.json`, `a.md`]; several brace groups multiply."""
    parts = re.split(r"\{([^{}]*)\}", text)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def exists(path: str) -> bool:
    if any(c in path for c in "*?"):
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


def repo_paths(text: str) -> list[str]:
    """Backticked spans outside code fences that name a path in this repository."""
    found = []
    for span in CODE_SPAN.findall(FENCE.sub("", text)):
        span = span.strip().rstrip(".,;:").split("::")[0]
        if " " in span or "<" in span or "$" in span or "..." in span:
            continue
        if span.startswith(TOP) or span in TOP_FILES:
            found.extend(expand_braces(span))
    return found


def links(page: Path, text: str) -> list[Path]:
    out = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        out.append((page.parent / target.split("#")[0]).resolve())
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_path_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = [str(p.relative_to(ROOT)) for p in links(page, text) if not p.exists()]
    missing += [p for p in repo_paths(text) if not exists(p)]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {sorted(set(missing))}"


def test_the_checker_sees_paths() -> None:
    """The patterns find what the pages write: braces, globs, links relative to the page."""
    assert expand_braces("docs/a.{json,md}") == ["docs/a.json", "docs/a.md"]
    assert repo_paths("see `docs/x.md`, `python training/train.py` and\n```\n`tests/y.py`\n```") == ["docs/x.md"]
    assert links(ROOT / "docs" / "p.md", "![a](results/b.png) [c](https://x) [d](#e)") == [
        (ROOT / "docs" / "results" / "b.png").resolve()
    ]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/architecture.png" in repo_paths(readme)
