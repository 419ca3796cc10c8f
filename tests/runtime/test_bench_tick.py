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
