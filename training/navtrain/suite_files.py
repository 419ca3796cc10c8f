"""The files a suite writes: ``STEM.json`` (its payload), ``STEM.md`` (its table) and ``STEM.png``
(its plot), the folder made when missing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Payload = dict[str, Any]


def write_suite_files(
    payload: Payload, stem: str | Path, markdown: Callable[[Payload], str], plot: Callable[[Payload, Path], None]
) -> list[Path]:
    """Write the three files of ``payload`` beside ``stem``; returns their paths (json, md, png)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md"), stem.with_suffix(".png")]
    paths[0].write_text(json.dumps(payload, indent=2) + "\n")
    paths[1].write_text(markdown(payload))
    plot(payload, paths[2])
    return paths
