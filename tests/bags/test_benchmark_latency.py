"""nav-benchmark-latency drives the installed node on simulated time with odometry that follows its
commands: every measured tick is a driving one, with the scan map on and off, on either executor, and a run longer
than the progress checker's window still ends (a robot whose odometry never moves would be
declared stuck and never count as driving again). ``--floor`` first drives the floor node the same
way."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from navbags.latency import Odometer, main


def test_the_odometer_moves_the_pose_by_the_command_in_the_body_frame() -> None:
    odom = SimpleNamespace(
        pose=SimpleNamespace(
            pose=SimpleNamespace(position=SimpleNamespace(x=0.0, y=0.0), orientation=SimpleNamespace(z=0.0, w=1.0))
        ),
        twist=SimpleNamespace(
            twist=SimpleNamespace(linear=SimpleNamespace(x=0.0, y=0.0), angular=SimpleNamespace(z=0.0))
        ),
    )
    o = Odometer()
    o.advance((0.0, 0.0, math.pi / 2), 1.0, odom)  # a quarter turn on the spot
    o.advance((1.0, 0.5, 0.0), 2.0, odom)  # then 2 m forward (now +y) and 1 m to the left (now -x)
    assert (o.x, o.y) == pytest.approx((-1.0, 2.0))
    assert odom.pose.pose.position.x == pytest.approx(-1.0) and odom.pose.pose.position.y == pytest.approx(2.0)
    assert 2 * math.atan2(odom.pose.pose.orientation.z, odom.pose.pose.orientation.w) == pytest.approx(math.pi / 2)
    assert (odom.twist.twist.linear.x, odom.twist.twist.linear.y) == (1.0, 0.5)


@pytest.mark.ros
@pytest.mark.slow
def test_clock_mode_measures_driving_ticks_past_the_progress_window(tmp_path: Path) -> None:
    out = tmp_path / "latency.json"
    # 10 warm-up + 90 measured ticks: 10 s of simulated time, twice the progress checker's 5 s.
    args = ["--messages", "90", "--warmup", "10", "--pace", "0.02", "--executor", "both", "--floor"]
    assert main([*args, "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [(r["node"], r["scan_map"], r["executor"]) for r in runs] == [
        ("floor", None, "events"),
        ("floor", None, "single_threaded"),
        ("policy_node", True, "events"),
        ("policy_node", True, "single_threaded"),
        ("policy_node", False, "events"),
        ("policy_node", False, "single_threaded"),
    ]
    for r in runs[:2]:  # the floor node answers every tick, driving, and runs no policy
        assert r["messages"] == 90 and r["unanswered_ticks"] == 0 and r["node_inference_ms"] is None
        assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p99"] and r["bundle"] is None
    for r in runs[2:]:
        assert r["messages"] == 90 and r["unanswered_ticks"] == 0 and r["pace_s"] == 0.02
        lat = r["latency_ms"]
        assert 0 < lat["p50"] <= lat["p99"] <= lat["max"]
        # by the middleware's stamps: the node's publish call, then the arrival in the benchmark's reader,
        # then its callback (the benchmark's own wake-up and executor)
        sent, received = r["latency_to_node_publish_ms"], r["latency_received_ms"]
        assert 0 < sent["p50"] < received["p50"] < lat["p50"] + 0.05
        tick = r["node_tick_ms"]  # the node's own part of each latency
        assert 0 < tick["p50"] <= tick["p99"] <= tick["max"] and tick["p50"] < lat["p50"]
        assert r["node_memory_mib"]["VmRSS"] > 20
