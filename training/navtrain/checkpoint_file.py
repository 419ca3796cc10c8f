"""Whether a path can hold a torch checkpoint at all, with the standard library only.

The command-line tools call :func:`check_checkpoint_file` before they import torch and the
simulator, so that a wrong path is refused in a fraction of a second;
:func:`navtrain.checkpoint.load_checkpoint` applies the same checks before it loads.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path


class CheckpointError(ValueError):
    """The checkpoint cannot be used: no config, a config that disagrees, or weights that do not fit."""


def check_checkpoint_file(path: str | Path) -> Path:
    """``path`` as a Path; CheckpointError when it is missing, no file, or no zip archive (every
    checkpoint ``torch.save`` writes is one). An unreadable file passes: loading it says why."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no such checkpoint: {path}")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} is not a file")
    if os.access(path, os.R_OK) and not zipfile.is_zipfile(path):
        raise CheckpointError(
            f"{path} is not a torch checkpoint (no zip archive: empty, truncated or another kind of file)"
        )
    return path
