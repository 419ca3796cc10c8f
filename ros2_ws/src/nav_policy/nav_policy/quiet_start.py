"""A node stopped while it still imports exits at once, quietly, with code 0.

Importing the node's dependencies takes seconds (onnxruntime; torch and MuJoCo for the sim node),
and a launch that ends or a Ctrl-C in that time sends SIGINT. Python's default handler raises
``KeyboardInterrupt`` wherever the import happens to be, and a C extension that is initialising
turns it into an ``ImportError`` with a traceback. Importing this module first replaces that:
SIGINT and SIGTERM end the process with code 0 before anything is built (there is nothing to
stop or flush yet). :func:`nav_policy.ros_common.run_node` installs the running node's own
handlers once it starts.
"""

from __future__ import annotations

import os
import signal


def _exit_quietly(signum: int, frame: object) -> None:
    os._exit(0)


for _signal in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signal, _exit_quietly)
