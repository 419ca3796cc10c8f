"""The node's ``robot_base`` parameter (navdeploy.settings.resolve_base): the bundle's base is the
one the node runs; a declared base (a preset name or a base file) of another drive or footprint
radius is refused in one line naming the parameter; the startup log's limits line names the base.
Also: the scan map plans for the base's radius."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from navcontract.base import DEFAULT_BASE, load_base
from navdeploy.node_params import NodeParams
from navdeploy.settings import RADIUS_TOLERANCE, resolve_settings
from support.bases import diff_drive_base, diff_drive_contract, fixture_contract


def base_file(tmp_path: Path, name: str = "my_base", **changes) -> Path:
    """A base file: the holonomic disc preset's keys with ``changes``."""
    data = {k: v for k, v in load_base(DEFAULT_BASE).to_dict().items() if k != "name"}
    data.update(changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def refusal(contract, robot_base: str) -> str:
    with pytest.raises(ValueError) as err:
        resolve_settings(contract, NodeParams(robot_base=robot_base))
    msg = str(err.value)
    assert msg.startswith("parameter 'robot_base': ") and "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("declared", ["", "holonomic_disc"])
def test_the_bundles_base_runs_and_the_limits_line_names_it(declared: str) -> None:
    s, warnings = resolve_settings(fixture_contract(), NodeParams(robot_base=declared))
    assert s.base == fixture_contract().base and s.base.name == DEFAULT_BASE and not warnings
    (line,) = [x for x in s.limit_sources if x.startswith("base ")]
    assert line.startswith("base holonomic_disc (holonomic, radius 0.2 m")
    assert ("matches node parameter robot_base holonomic_disc" in line) == bool(declared)


def test_a_base_of_another_drive_is_refused() -> None:
    msg = refusal(fixture_contract(), "jackal")
    assert "jackal is diff_drive" in msg and "holonomic" in msg
    msg = refusal(diff_drive_contract(), "holonomic_disc")
    assert "holonomic_disc is holonomic" in msg and "drives a diff_drive base" in msg


def test_a_base_of_another_radius_is_refused_within_the_tolerance(tmp_path: Path) -> None:
    msg = refusal(fixture_contract(), str(base_file(tmp_path, radius=0.25)))
    assert "radius 0.25 m" in msg and "0.2 m" in msg
    near = base_file(tmp_path, "near", radius=0.2 + RADIUS_TOLERANCE / 2)
    s, _ = resolve_settings(fixture_contract(), NodeParams(robot_base=str(near)))
    assert s.base.radius == 0.2


def test_an_unreadable_base_is_refused_naming_what(tmp_path: Path) -> None:
    assert "no base named 'rover'" in refusal(fixture_contract(), "rover")
    assert "radius must be a finite number" in refusal(fixture_contract(), str(base_file(tmp_path, radius=None)))
    assert "does not exist" in refusal(fixture_contract(), str(tmp_path / "absent.yaml"))


def test_a_diff_drive_base_file_matches_a_diff_drive_bundle(tmp_path: Path) -> None:
    c = diff_drive_contract()
    data = {k: v for k, v in diff_drive_base().to_dict().items() if k != "name"}
    path = tmp_path / "rover.yaml"
    path.write_text(yaml.safe_dump(data))
    s, warnings = resolve_settings(c, NodeParams(robot_base=str(path)))
    assert s.base.drive == "diff_drive" and not warnings
    slow = tmp_path / "slow.yaml"
    slow.write_text(yaml.safe_dump({**data, "v_forward": 1.0}))
    _, warnings = resolve_settings(c, NodeParams(robot_base=str(slow)))
    assert any("slower than the bundle's base (v_forward 1)" in w for w in warnings), warnings


def test_the_scan_map_plans_for_the_contracts_radius() -> None:
    s, _ = resolve_settings(fixture_contract())
    assert s.robot_radius == fixture_contract().base.radius == 0.2
    s, _ = resolve_settings(diff_drive_contract(diff_drive_base(radius=0.333)))
    assert s.robot_radius == 0.333 and "guard radius 0.333 +" in s.scan_map_source  # the default guard's
