"""navdeploy.priority: the node's threads under SCHED_FIFO when asked and allowed, the map's worker
back under the ordinary scheduler, and a refusal that leaves the process as it was and says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from navdeploy import bench_tick
from navdeploy.priority import PriorityResult, raise_priority

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="Linux scheduling calls")

CHILD = r"""
import json, os, subprocess, sys, threading
from navdeploy.priority import raise_priority

res = raise_priority(10)
seen = {}
def look():
    seen["later_thread"] = os.sched_getscheduler(0)
t = threading.Thread(target=look); t.start(); t.join()
child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
                       capture_output=True, text=True, check=True)
print(json.dumps({"refused": res.refused, "threads": res.threads, "line": res.line,
                  "main": os.sched_getscheduler(0), "later_thread": seen["later_thread"],
                  "child": int(child.stdout)}))
"""


def test_zero_leaves_the_process_alone() -> None:
    before = os.sched_getscheduler(0)
    res = raise_priority(0)
    assert res == PriorityResult(0, 0) and "ordinary" in res.line
    assert os.sched_getscheduler(0) == before


@pytest.mark.parametrize("bad", [-1, 100, 1.5, True, "50"])
def test_a_priority_outside_0_to_99_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ValueError, match="realtime priority must be a whole number in 0..99"):
        raise_priority(bad)  # type: ignore[arg-type]


def test_fifo_where_allowed_and_the_worker_starts_ordinary() -> None:
    """In a process of its own (the test's process keeps its scheduling): granted, the process's
    thread runs SCHED_FIFO while a thread or a child process started later starts SCHED_OTHER (reset
    on fork: the map's worker never runs real-time); refused (no CAP_SYS_NICE), everything stays
    ordinary and the line says why."""
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    reset = getattr(os, "SCHED_RESET_ON_FORK", 0)
    assert got["child"] == got["later_thread"] == os.SCHED_OTHER
    if got["refused"] is None:
        assert got["main"] & ~reset == os.SCHED_FIFO
        assert got["threads"] >= 1 and "SCHED_FIFO priority 10" in got["line"]
    else:
        assert got["main"] == os.SCHED_OTHER
        assert "refused" in got["line"] and "ordinary priority" in got["line"]


def test_a_refusal_is_a_line_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    res = raise_priority(50)
    assert res.refused is not None and res.threads == 0
    assert res.line.startswith("scheduling: real-time priority 50 refused (not permitted: needs CAP_SYS_NICE")


def test_the_tick_benchmark_reports_each_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--priority`` runs the modes once per priority; a refused one is reported and left out."""
    asked: list[int] = []

    def fake_raise(priority: int) -> PriorityResult:
        asked.append(priority)
        return PriorityResult(priority, 1, None if priority == 0 else "not permitted")

    monkeypatch.setattr(bench_tick, "raise_priority", fake_raise)
    monkeypatch.setattr(bench_tick, "run_mode", lambda *a: {"tick_ms": {}, "dispatch_ms": {}, "tick_cpu_ms": {}})
    written: dict[str, object] = {}
    monkeypatch.setattr(bench_tick, "table", lambda results: written.update(results) or "")
    args = ["--ticks", "12", "--beams", "72", "--modes", "off", "--pace", "0", "--priority", "0", "--priority", "40"]
    assert bench_tick.main(args) == 0
    assert asked == [0, 40]
    assert [r["priority"] for r in written["runs"]] == [0]  # type: ignore[index]
    assert written["refused"] == [
        "scheduling: real-time priority 40 refused (not permitted); running at ordinary priority"
    ]
