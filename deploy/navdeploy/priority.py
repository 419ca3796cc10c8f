"""Real-time scheduling for the control loop: the node's ticks come first on a loaded computer.

On a robot computer the node shares its cores with the lidar driver, the localisation, the
recorder and whatever else runs; under Linux's default scheduler a tick that becomes ready while
those run waits for its turn, and the wait (not the tick's own work) is the tail of its latency.
:func:`raise_priority` puts every thread of the calling process (the executor's, the middleware's
receive threads, the timer's) under ``SCHED_FIFO`` at the given priority, so that a tick that
becomes ready preempts every ordinary process at once. The rules:

- ``0`` leaves the process as it is (the default: a robot integrator opts in);
- ``1..99`` asks for ``SCHED_FIFO`` at that priority with ``SCHED_RESET_ON_FORK``, on the threads
  the process has at the call: a thread or process started later (the scan map's worker process
  included) begins under the ordinary scheduler, and the worker gives way to the control tick by
  itself (:func:`navdeploy.scan_worker.yield_to_control`). The node calls it once rclpy has started
  its middleware and before it starts the worker;
- a refusal (no ``CAP_SYS_NICE`` and no real-time limit, ``ulimit -r``, that allows the priority;
  an OS without ``SCHED_FIFO``) is not an error: the process runs on at its ordinary priority and
  the returned line says so, for the node's startup log.

The node's threads never spin: each waits for its messages or its timer,
so a real-time node leaves the CPU to the rest between ticks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MAX_PRIORITY = 99
"""The highest ``SCHED_FIFO`` priority Linux grants."""


@dataclass(frozen=True)
class PriorityResult:
    """What :func:`raise_priority` did: the priority asked for, the threads now at it, and why not
    (``refused``; None when nothing was refused)."""

    asked: int
    threads: int
    refused: str | None = None

    @property
    def line(self) -> str:
        """One line for the startup log."""
        if self.asked == 0:
            return "scheduling: the OS's ordinary (realtime_priority 0)"
        if self.refused is not None:
            return f"scheduling: real-time priority {self.asked} refused ({self.refused}); running at ordinary priority"
        return f"scheduling: SCHED_FIFO priority {self.asked} on {self.threads} thread(s), reset for child processes"


def process_threads() -> list[int]:
    """The ids of the calling process's threads (``/proc/self/task``), or this thread alone where the
    OS has no such folder."""
    try:
        return sorted(int(t) for t in os.listdir("/proc/self/task"))
    except OSError:
        return [0]


def raise_priority(priority: int) -> PriorityResult:
    """Put every thread of this process under ``SCHED_FIFO`` at ``priority`` (module rules); 0 does
    nothing. Raises ValueError for a priority outside 0..99."""
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(f"realtime priority must be a whole number in 0..{MAX_PRIORITY}, got {priority!r}")
    if priority == 0:
        return PriorityResult(0, 0)
    fifo = getattr(os, "SCHED_FIFO", None)
    if fifo is None or not hasattr(os, "sched_setscheduler"):
        return PriorityResult(priority, 0, "this OS has no SCHED_FIFO")
    policy = fifo | getattr(os, "SCHED_RESET_ON_FORK", 0)
    done = 0
    for tid in process_threads():
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(priority))
        except PermissionError:
            return PriorityResult(
                priority, done, "not permitted: needs CAP_SYS_NICE or a real-time limit (ulimit -r) of at least it"
            )
        except ProcessLookupError:  # a thread that ended meanwhile
            continue
        except OSError as err:
            return PriorityResult(priority, done, f"{type(err).__name__}: {err}")
        done += 1
    return PriorityResult(priority, done)


def lower_to_ordinary() -> None:
    """Back to the ordinary scheduler for every thread of this process (where the OS allows it)."""
    if not hasattr(os, "sched_setscheduler"):
        return
    for tid in process_threads():
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            continue
