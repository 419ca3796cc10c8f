"""nav-benchmark-tick keeps its recorded messages with --stream: a second run times the very same
messages (the way two versions of the code are compared side by side)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from navdeploy import bench_tick


def test_a_kept_stream_is_read_back_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stream = tmp_path / "stream.pkl"
    args = ["--ticks", "12", "--beams", "72", "--modes", "off", "--pace", "0", "--stream", str(stream)]
    assert bench_tick.main([*args, "--json", str(tmp_path / "a.json")]) == 0
    assert stream.is_file() and "wrote the stream" in capsys.readouterr().out
    assert bench_tick.main([*args, "--json", str(tmp_path / "b.json")]) == 0
    assert "read from" in capsys.readouterr().out
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert a["world"] == b["world"] and a["ticks"] == b["ticks"] == 12 and b["beams"] == 72
    recorded, _ = bench_tick.load_stream(stream)
    assert len(recorded) == 12 and len(recorded[0].scan.ranges) == 72


def test_a_foreign_file_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.pkl"
    other.write_bytes(b"\x80\x05N.")  # a pickled None
    with pytest.raises(SystemExit, match="not a stream this benchmark wrote"):
        bench_tick.load_stream(other)


def test_the_tick_is_timed_to_the_command_and_the_hand_off_after_it_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the node runs it: the tick up to the command, then (once the command is out) the hand-off of
    the tick's scan to the map's worker, each timed on its own."""
    from navdeploy.gate import CommandGate

    stream, world = bench_tick.record_stream(bench_tick.DEFAULT_BUNDLE, 14, 72, 0)
    held: list[bool] = []
    real_tick = CommandGate.tick

    def tick(self, now: float, dispatch: bool = True):
        held.append(dispatch)
        return real_tick(self, now, dispatch)

    monkeypatch.setattr(CommandGate, "tick", tick)
    monkeypatch.setattr(CommandGate, "dispatch", lambda self: __import__("time").sleep(0.02))
    out = bench_tick.run_mode(bench_tick.DEFAULT_BUNDLE, "off", stream, 0.0, world["control_period_s"])
    assert held and not any(held)  # every tick held its scan back for the hand-off after it
    assert out["dispatch_ms"]["p50"] >= 20.0
    assert out["tick_ms"]["max"] < 20.0


def test_a_tick_that_waits_off_the_cpu_is_counted_descheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tick's wall time and its own CPU time apart: a tick that sleeps inside (as one the scheduler
    takes the core from) shows the wait in its wall time only, and is counted."""
    import time

    from navdeploy.gate import CommandGate

    stream, world = bench_tick.record_stream(bench_tick.DEFAULT_BUNDLE, 14, 72, 0)
    real_tick = CommandGate.tick
    slept = iter(range(len(stream)))

    def tick(self, now: float, dispatch: bool = True):
        if next(slept) % 2:
            time.sleep(0.005)
        return real_tick(self, now, dispatch)

    monkeypatch.setattr(CommandGate, "tick", tick)
    out = bench_tick.run_mode(bench_tick.DEFAULT_BUNDLE, "off", stream, 0.0, world["control_period_s"])
    timed = len(stream) - bench_tick.WARMUP
    # Every tick that slept is counted; a loaded machine may take the core from a few others too.
    assert timed // 2 <= out["ticks_descheduled"] <= timed
    assert out["tick_ms"]["max"] >= 5.0 > out["tick_cpu_ms"]["max"]
