"""The robot base (navcontract.base) and the contract's ``base`` section (navcontract.bundle).

Presets load by name and a base file by path; a file with an unknown, missing or unusable key is
refused naming it. A contract with the section round-trips, its fingerprint covers every value of
the base (an edited value fails the load, in the parsed data and in a bundle's files), and the
base must agree with the action rule and the footprint. A contract without the section (every
committed bundle) stands for the holonomic disc, with its fingerprint unchanged. The action rule
maps both drives alike in numpy and torch.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from navcontract.action import DIFF_DRIVE_ORDER, ActionScaling, action_to_command
from navcontract.base import DIFF_DRIVE, HOLONOMIC, BaseError, BaseSpec, load_base, preset_names
from navcontract.bundle import (
    CONTRACT_FILE,
    BundleError,
    contract_fingerprint,
    make_contract,
    parse_contract,
    read_contract,
)
from navcontract.guard import GuardRule
from navcontract.spec import make_policy_spec, spec_from_dict
from navcontract.terms import SensorDims
from support.contract_copies import write_contract_copies
from support.paths import FIXTURE_BUNDLE

JACKAL = load_base("jackal")
JACKAL_SCALING = ActionScaling(2.0, 4.0, False, drive=DIFF_DRIVE, v_backward=1.0)
LEGACY_FINGERPRINT = "23cb46e4de12b7e0"


def jackal_contract(**kwargs: Any) -> dict[str, Any]:
    """A diff-drive contract on the Jackal preset (the default terms over its limits), guard included."""
    spec = make_policy_spec({"lidar": {}, "goal_polar": {}, "vel_body": {}, "omega": {}}, SensorDims(72, 6.0, 2.0, 4.0))
    guard = GuardRule(radius=JACKAL.radius, margin=0.01, headway=0.5, decel=2.5, slide=True)
    return make_contract(spec, JACKAL_SCALING, 0.1, 0.3, 1e-2, guard=guard, base=JACKAL, **kwargs)


# ----------------------------------------------------------------------------------------------
# Base files


@pytest.mark.parametrize("name", ["holonomic_disc", "turtlebot4", "jackal"])
def test_presets_load_with_their_drive_and_action_width(name: str) -> None:
    assert name in preset_names()
    base = load_base(name)
    assert base.name == name and base.radius > 0 and base.v_forward > 0
    assert (base.drive, base.action_dim) == ((HOLONOMIC, 3) if name == "holonomic_disc" else (DIFF_DRIVE, 2))
    if base.drive == DIFF_DRIVE:
        assert base.v_lateral == 0.0 and base.limit_planar_speed is False


def _write_base(path: Path, **changes: Any) -> Path:
    data = {k: v for k, v in JACKAL.to_dict().items() if k != "name"}
    data.update(changes)
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    return path


def test_a_base_file_of_your_own_loads_by_path(tmp_path: Path) -> None:
    base = load_base(_write_base(tmp_path / "my_robot.yaml", radius=0.4))
    assert base.name == "my_robot" and base.radius == 0.4 and base.drive == DIFF_DRIVE


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"wheel_base": 0.3}, "unknown key 'wheel_base'"),
        ({"omega_max": None}, "missing key 'omega_max'"),
        ({"drive": "ackermann"}, "drive must be one of holonomic, diff_drive"),
        ({"radius": 0.0}, "radius must be > 0"),
        ({"v_backward": -1.0}, "v_backward must be >= 0"),
        ({"v_lateral": 0.5}, "a diff_drive base has v_lateral 0"),
        ({"accel_linear": "fast"}, "accel_linear must be a finite number"),
        ({"limit_planar_speed": 1}, "limit_planar_speed must be true or false"),
    ],
)
def test_a_base_file_with_a_wrong_key_is_refused_naming_it(tmp_path: Path, changes: dict, named: str) -> None:
    path = _write_base(tmp_path / "bad.yaml", **changes)
    with pytest.raises(BaseError, match=named) as info:
        load_base(path)
    assert str(path) in str(info.value)


def test_an_unknown_preset_name_lists_the_presets() -> None:
    with pytest.raises(BaseError, match="no base named 'jackall'.*holonomic_disc, jackal, turtlebot4"):
        load_base("jackall")


# ----------------------------------------------------------------------------------------------
# The contract's base section


def test_a_contract_with_a_base_round_trips_and_its_fingerprint_covers_it() -> None:
    data = jackal_contract()
    c = parse_contract(json.loads(json.dumps(data)))
    assert c.base == JACKAL and data["base"] == JACKAL.to_dict() and data["base"]["name"] == "jackal"
    assert c.robot_radius == JACKAL.radius  # the robot section follows the base
    assert c.fingerprint == contract_fingerprint(c.spec, JACKAL) != c.spec_fingerprint == c.spec.fingerprint()
    assert c.scaling == JACKAL_SCALING and c.action_order == DIFF_DRIVE_ORDER
    assert data["action"]["dim"] == 2 and data["onnx"]["output"]["shape"] == ["batch", 2]


@pytest.mark.parametrize(
    "edit",
    [
        {"base.radius": 0.4, "robot.radius": 0.4, "guard.radius": 0.4},
        {"base.accel_linear": 20.0},
        {"base.accel_angular": 25.0},
        {"base.name": "turtlebot4"},
        {"base.v_backward": 0.5, "action.v_backward": 0.5},
    ],
    ids=lambda e: next(iter(e)),
)
def test_editing_any_value_of_the_base_fails_the_fingerprint(edit: dict[str, float]) -> None:
    data = jackal_contract()
    for dotted, value in edit.items():
        section, key = dotted.split(".")
        data[section][key] = value
    with pytest.raises(BundleError, match="does not match its own observation spec and base section"):
        parse_contract(data)


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"base.radius": 0.4}, "contract base.radius = 0.4, robot.radius = 0.333"),
        ({"base.omega_max": 3.0}, "contract base.omega_max = 3.0, action.omega_max = 4.0"),
        ({"base.v_forward": 1.5}, "contract base.v_forward = 1.5, action.v_max = 2.0"),
        ({"base.drive": "holonomic", "base.v_lateral": 2.0}, "contract base.drive = 'holonomic', action.drive"),
        ({"base.v_lateral": 0.5}, "a diff_drive base has v_lateral 0"),
        ({"base.colour": "red"}, "contract base: unknown key 'colour'"),
        ({"base.name": ""}, "contract base.name must be a non-empty string"),
    ],
)
def test_a_base_that_disagrees_with_the_action_or_footprint_is_refused(edit: dict, message: str) -> None:
    data = jackal_contract()
    for dotted, value in edit.items():
        section, key = dotted.split(".")
        data[section][key] = value
    with pytest.raises(BundleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_contract(data)


def test_a_holonomic_base_has_one_speed_limit() -> None:
    disc = load_base("holonomic_disc")
    spec = read_contract(FIXTURE_BUNDLE).spec
    scaling = ActionScaling(1.5, 2.0, True)
    data = make_contract(spec, scaling, 0.1, 0.3, 1e-2, base=disc)
    assert parse_contract(copy.deepcopy(data)).base == disc
    slower = BaseSpec.checked({**disc.to_dict(), "v_lateral": 1.0}, name="holonomic_disc")
    data = make_contract(spec, scaling, 0.1, 0.3, 1e-2, base=slower)
    with pytest.raises(BundleError, match="contract base.v_lateral = 1.0, action.v_max .*one speed limit"):
        parse_contract(data)


def test_a_contract_without_the_section_is_the_holonomic_disc_with_its_fingerprint() -> None:
    raw = json.loads((FIXTURE_BUNDLE / CONTRACT_FILE).read_text())
    assert "base" not in raw
    c = parse_contract(copy.deepcopy(raw))
    assert c.fingerprint == c.spec_fingerprint == LEGACY_FINGERPRINT
    assert c.base == load_base("holonomic_disc")
    raw["robot"]["radius"] = 0.25
    other = parse_contract(copy.deepcopy(raw)).base
    assert other.name == "unnamed" and other.radius == 0.25 and other.drive == HOLONOMIC
    del raw["robot"]
    assert parse_contract(raw).base is None  # no footprint stated: no base to derive


# ----------------------------------------------------------------------------------------------
# A bundle's files


def test_a_bundle_whose_base_was_edited_does_not_load(tmp_path: Path) -> None:
    bdir = tmp_path / "bundle"
    shutil.copytree(FIXTURE_BUNDLE, bdir)
    data = json.loads((FIXTURE_BUNDLE / CONTRACT_FILE).read_text())
    data["base"] = load_base("holonomic_disc").to_dict()
    data["fingerprint"] = contract_fingerprint(spec_from_dict(data["observation"]["spec"]), load_base("holonomic_disc"))
    write_contract_copies(bdir, data)
    assert read_contract(bdir).base.name == "holonomic_disc"
    edited = copy.deepcopy(data)
    edited["base"]["radius"] = edited["robot"]["radius"] = 0.3
    write_contract_copies(bdir, edited, onnx_copy=False)
    with pytest.raises(BundleError, match=r"contract.json differs from the contract inside policy.onnx \(keys:"):
        read_contract(bdir)
    write_contract_copies(bdir, edited)  # both copies alike: the fingerprint still refuses it
    with pytest.raises(BundleError, match="fingerprint .* does not match its own observation spec and base"):
        read_contract(bdir)


# ----------------------------------------------------------------------------------------------
# The action rule of both drives, numpy and torch


@pytest.mark.parametrize("scaling", [ActionScaling(1.5, 2.0, True), JACKAL_SCALING], ids=["holonomic", "diff_drive"])
def test_the_action_maps_alike_in_numpy_and_torch(scaling: ActionScaling) -> None:
    raw = np.random.default_rng(0).uniform(-1.6, 1.6, size=(512, scaling.dim)).astype(np.float32)
    ours = np.asarray(action_to_command(raw, scaling))
    theirs = action_to_command(torch.as_tensor(raw), scaling).numpy()
    assert ours.shape == theirs.shape == (512, 3)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    if scaling.drive == DIFF_DRIVE:
        assert np.all(ours[:, 1] == 0.0)
        a = np.clip(raw, -1, 1)
        np.testing.assert_allclose(ours[:, 0], np.where(a[:, 0] >= 0, a[:, 0] * 2.0, a[:, 0] * 1.0), atol=1e-6)
        np.testing.assert_allclose(ours[:, 2], a[:, 1] * 4.0, atol=1e-6)
        assert ours[:, 0].min() >= -1.0 - 1e-6 and ours[:, 0].max() <= 2.0 + 1e-6
