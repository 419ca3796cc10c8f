"""The bag tools refuse what they cannot use in one line, before any work (issue 11 finding 9).

Each case runs the command-line tool in a subprocess, as a user would, and checks: exit code 2, a
single line on stderr that starts with the tool's name and says what is wrong, and no traceback.
None of these cases starts a ROS node: the checks come first (``nav-bag-record`` would otherwise
record a whole run and only then find its ``--out`` taken).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from navbags.rosproc import console_script

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "tests" / "fixtures" / "bundle"
OTHER_BUNDLE = REPO / "docs" / "results" / "policy_h200_one_ray"  # a valid bundle, not the fixtures'
FIXTURE = REPO / "tests" / "fixtures" / "bags" / "nominal_seed3"


def _refusal(cmd: list[str], tool: str) -> str:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{tool}: "), proc.stderr
    assert proc.stdout == ""  # no report of a replay that did not happen
    assert time.monotonic() - t0 < 60
    return lines[0]


def _replay(*args: str) -> list[str]:
    return [console_script("nav-bag-replay"), *args]


pytestmark = pytest.mark.slow  # every case runs a bag tool in a subprocess


@pytest.fixture()
def fixture_copy(tmp_path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(FIXTURE, dst)
    return dst


def test_replay_missing_bag():
    line = _refusal(_replay("/nonexistent/bag", "--bundle", str(BUNDLE)), "nav-bag-replay")
    assert "bag /nonexistent/bag does not exist" in line


def test_replay_a_file_or_a_folder_without_metadata(tmp_path, fixture_copy):
    line = _refusal(_replay(str(fixture_copy / "nominal_seed3.mcap"), "--bundle", str(BUNDLE)), "nav-bag-replay")
    assert "is not a folder" in line and "metadata.yaml" in line
    (tmp_path / "empty").mkdir()
    line = _refusal(_replay(str(tmp_path / "empty"), "--bundle", str(BUNDLE)), "nav-bag-replay")
    assert "has no metadata.yaml" in line


@pytest.mark.parametrize("how", ["half", "tail"])
def test_replay_truncated_bag(fixture_copy, how):
    mcap = fixture_copy / "nominal_seed3.mcap"
    size = mcap.stat().st_size
    with open(mcap, "r+b") as f:
        f.truncate(size // 2 if how == "half" else size - 9)
    line = _refusal(
        [sys.executable, "-m", "navbags.replay_cli", str(fixture_copy), "--bundle", str(BUNDLE)], "nav-bag-replay"
    )
    assert f"bag {fixture_copy} cannot be read (truncated or damaged?)" in line


def test_replay_storage_file_missing(fixture_copy):
    (fixture_copy / "nominal_seed3.mcap").unlink()
    line = _refusal(_replay(str(fixture_copy), "--bundle", str(BUNDLE)), "nav-bag-replay")
    assert "storage file nominal_seed3.mcap (named in metadata.yaml) is missing" in line


def test_replay_with_the_wrong_bundle_names_the_recorded_sha():
    meta = yaml.safe_load((FIXTURE / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    recorded = json.loads(meta["custom_data"]["nav_policy_bags"])["bundle_onnx_sha256"]
    other = hashlib.sha256((OTHER_BUNDLE / "policy.onnx").read_bytes()).hexdigest()
    assert recorded != other
    line = _refusal(_replay(str(FIXTURE), "--bundle", str(OTHER_BUNDLE)), "nav-bag-replay")
    assert "recorded with another bundle" in line
    assert recorded[:16] in line and other[:16] in line and str(OTHER_BUNDLE) in line


def test_replay_missing_bundle_and_nav_policy_bag_with_third_party_options(tmp_path):
    line = _refusal(_replay(str(FIXTURE), "--bundle", str(tmp_path / "nope")), "nav-bag-replay")
    assert "--bundle" in line and "is not a folder" in line
    line = _refusal(_replay(str(FIXTURE), "--bundle", str(BUNDLE), "--goal", "1,2"), "nav-bag-replay")
    assert "nav-bag-record recording" in line and "--goal only for third-party bags" in line


def test_replay_checks_every_bag_before_replaying_any(tmp_path):
    line = _refusal(_replay(str(FIXTURE), str(tmp_path / "missing"), "--bundle", str(BUNDLE)), "nav-bag-replay")
    assert "missing does not exist" in line


def test_record_into_an_existing_folder_refuses_before_recording(tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    logs = tmp_path / "logs"
    line = _refusal(
        [
            console_script("nav-bag-record"),
            "--bundle",
            str(BUNDLE),
            "--out",
            str(out),
            "--episodes",
            "3",
            "--log-dir",
            str(logs),
        ],
        "nav-bag-record",
    )
    assert f"--out {out} already exists" in line and "nothing was recorded" in line
    assert not logs.exists()  # no node was started (they log there)
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "mine"


def test_record_with_a_missing_or_broken_bundle(tmp_path):
    line = _refusal(
        [sys.executable, "-m", "navbags.record_cli", "--bundle", str(tmp_path / "nope"), "--out", str(tmp_path / "b")],
        "nav-bag-record",
    )
    assert "is not a folder" in line
    broken = tmp_path / "broken"
    shutil.copytree(BUNDLE, broken)
    (broken / "policy.onnx").write_bytes(b"not an onnx file")
    line = _refusal(
        [console_script("nav-bag-record"), "--bundle", str(broken), "--out", str(tmp_path / "b")], "nav-bag-record"
    )
    assert f"--bundle {broken} cannot be loaded" in line
    assert not (tmp_path / "b").exists()


def test_replay_lidar_mount_out_of_range():
    line = _refusal(_replay(str(FIXTURE), "--bundle", str(BUNDLE), "--lidar-yaw", "9"), "nav-bag-replay")
    assert "parameter 'lidar_yaw' must be finite and in" in line
