"""A long suite's finished rows, written to a file as each row ends, so that a run stopped part way
(Ctrl-C, the end of a working session on a CPU) goes on from the next row instead of from the first.

A row is taken from the file only when everything that made it is the same: the file's ``key`` (the
suite, the policy, the episode count, the seed, and whatever the caller adds, such as the checkpoint's
hash) and the row's own definition. Anything else is run again and replaces what the file held.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PART = "#"
"""``ROW#PART`` names a part of a row kept on its own (a batch of a safety row, one driver's half of a
comparison row), so that a row stopped part way goes on from its next part."""


def bundle_digest(folder: Path) -> str:
    """sha256 over a bundle's files (names and contents, in name order): what a log's key knows the
    bundle by, the same wherever the folder lies."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def part_name(row: str, part: object) -> str:
    """The name a part of ``row`` is kept under: ``ROW#PART``."""
    return f"{row}{PART}{part}"


def whole_and_parts(names: list[str]) -> tuple[list[str], list[str]]:
    """Of kept ``names``: the whole rows, and the parts of rows that are not whole yet."""
    whole = [n for n in names if PART not in n]
    return whole, [n for n in names if PART in n and n.split(PART, 1)[0] not in whole]


class RowLog:
    """Finished rows by name, kept in ``path`` (None: nothing kept, every row runs).

    ``legacy``: keys that an earlier version of the caller wrote for the very same suite; a file under
    one of them is read as if it held ``key``, and holds ``key`` from its next write on."""

    def __init__(self, path: str | Path | None, key: dict[str, Any], legacy: Sequence[dict[str, Any]] = ()) -> None:
        self.path = None if path is None else Path(path)
        self.key = json.loads(json.dumps(key))  # as it reads back from the file
        accepted = [self.key, *(json.loads(json.dumps(k)) for k in legacy)]
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path is not None and self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError):
                data = None
            if isinstance(data, dict) and data.get("key") in accepted and isinstance(data.get("rows"), dict):
                self.rows = data["rows"]

    def get(self, name: str, definition: dict[str, Any]) -> dict[str, Any] | None:
        """The entry kept for row ``name`` when it was made from ``definition``; else None."""
        kept = self.rows.get(name)
        if kept is None or kept.get("definition") != json.loads(json.dumps(definition)):
            return None
        return kept["entry"]

    def put(self, name: str, definition: dict[str, Any], entry: dict[str, Any]) -> None:
        """Keep row ``name``'s ``entry`` (and write the file at once)."""
        self.rows[name] = json.loads(json.dumps({"definition": definition, "entry": entry}))
        self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps({"key": self.key, "rows": self.rows}, indent=1) + "\n")
        os.replace(tmp, self.path)

    def drop_parts(self, name: str) -> None:
        """Forget the parts kept of ``name`` (``NAME#...``), once ``name`` itself is kept whole."""
        prefix = part_name(name, "")
        gone = [n for n in self.rows if n.startswith(prefix)]
        if not gone:
            return
        for n in gone:
            del self.rows[n]
        self._write()
