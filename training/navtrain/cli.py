"""What the training CLIs (nav-train, nav-evaluate, nav-export) share for bad input.

Every user error is one line on stderr that starts with the tool's name, exit code 2, and is
found before any expensive work (env build, rollout): :class:`CliError` carries the line,
:class:`OneLineParser` turns argparse's usage errors into the same form, and the ``check_*``
helpers test arguments and output paths up front. The table of what each CLI does on failure,
and what it keeps, is in ``docs/failures.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

EXIT_USAGE = 2
"""Bad input: arguments, config, overrides, checkpoints, bundles, output folders."""
EXIT_INTERRUPTED = 130
"""Stopped by SIGINT / SIGTERM (after saving what is consistent)."""


class CliError(Exception):
    """A user error; the message is one line, without the tool name."""


def report(tool: str, message: object) -> None:
    """Print ``tool: message`` as one line on stderr."""
    text = " ".join(str(message).split())
    print(f"{tool}: {text}", file=sys.stderr, flush=True)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``tool: message (see --help)``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        report(self.prog, f"{message} (see --help)")
        sys.exit(EXIT_USAGE)


def at_least(minimum: int):
    """An argparse ``type``: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    """An argparse ``type``: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def creation_blocker(path: str | Path) -> str | None:
    """Why ``path`` cannot be created below its nearest existing ancestor: that ancestor is not a
    folder, or not writable (None: it can be)."""
    ancestor = Path(path).absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is not a folder"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{ancestor} is not writable"
    return None


def check_can_create(path: str | Path, what: str) -> None:
    """``path`` (a file or folder to be written) can be created: its nearest existing ancestor is a
    writable folder, and ``path`` itself is not in the way as something else."""
    path = Path(path).absolute()
    why = creation_blocker(path)
    if why is not None:
        raise CliError(f"cannot write {what} {path}: {why}")
