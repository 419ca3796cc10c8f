"""The live run's checks in a bag replay (navbags.replay). Late delivery: a live run in which a
tick read an input other than the one published before its clock is set aside and run again; only a
run in which every tick read what the reference read is compared. Only the moving states may send
a non-zero command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from navbags import replay
from navbags.reference import Reference, Tick

STAMPS = [(None, None), (0.1, 0.1), (0.2, 0.2)]


def _ref() -> Reference:
    ticks = [Tick(k, k, k, "driving", np.zeros(3), None, None, None, stamps=s) for k, s in enumerate(STAMPS)]
    return Reference(ticks, 100_000_000)


def _heard(stamps) -> replay._Heard:
    return replay._Heard(cmds=[[0.0] * 3] * len(stamps), states=["driving"] * len(stamps), stamps=list(stamps))


def test_a_tick_that_read_an_older_input_is_named() -> None:
    assert replay._late_tick(_heard(STAMPS), _ref()) is None
    late = replay._late_tick(_heard([STAMPS[0], STAMPS[1], (0.1, 0.2)]), _ref())
    assert late is not None and late.startswith("tick 2 read scan/odometry stamped [0.1, 0.2]")


@pytest.mark.parametrize("late_runs", [0, 1, 2, 3])
def test_late_runs_are_set_aside_and_run_again(late_runs: int, tmp_path: Path, monkeypatch) -> None:
    runs = []

    def fake_run_live(tl, ref, bundle, rate, timeout, log_dir, node_command):
        runs.append(log_dir)
        stamps = [*STAMPS[:2], (0.1, 0.1)] if len(runs) <= late_runs else STAMPS
        return replay._LiveRun(_heard(stamps), set(), [], 0.0)

    monkeypatch.setattr(replay, "_run_live", fake_run_live)
    live, late = replay._run_live_delivered(None, _ref(), Path("b"), 0.0, 1.0, tmp_path, None)
    attempts = min(late_runs + 1, replay.DELIVERY_ATTEMPTS)
    assert len(runs) == attempts and len(late) == min(late_runs, replay.DELIVERY_ATTEMPTS)
    assert runs[0] == tmp_path and all(d.is_dir() for d in runs)
    if late_runs < replay.DELIVERY_ATTEMPTS:
        assert live.problems == []
    else:
        assert len(live.problems) == 1 and "input delivered late in all 3 live runs" in live.problems[0]


def test_only_moving_states_may_send_a_non_zero_command() -> None:
    """A recovery's back-off moves the robot (state recovering); every other non-driving state is zero."""
    cmds = np.array([[0.1, 0.0, 0.0], [-0.1, 0.0, 0.2], [0.0, 0.0, 0.0], [0.0, 0.0, 0.1]])
    problems: list[str] = []
    ref = Reference([Tick(k, k, k, "driving", np.zeros(3), None, None, None) for k in range(4)], 100_000_000)
    replay._check_ticks(cmds, ["driving", "recovering", "stuck", "stuck"], None, ref, problems)
    assert problems == ["tick 3: state stuck but the node's command [0.0, 0.0, 0.1] is not exactly zero"]
