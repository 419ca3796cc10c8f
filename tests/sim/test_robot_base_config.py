"""The robot base in the training config (``env.robot.base``, navsim.config_load.fill_robot) and in
the contract objects (navsim.contract_objects.base_spec, action_scaling, bundle_contract).

A base names a preset or a base file that fills every robot field; the fields a config states
refine it and the contract then says so in the base's name; an override of the base replaces the
config file's robot section; unknown keys and unusable values are refused by name; a stored config
(every field stated) reads back the same base, and one that predates the base is the holonomic disc.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from navcontract.action import ActionScaling
from navcontract.base import DIFF_DRIVE, load_base
from navcontract.bundle import contract_fingerprint, parse_contract
from navsim.config import ConfigError
from navsim.config_load import DEFAULT_CONFIG, config_from_data, load_config, to_dict
from navsim.contract_objects import action_scaling, base_spec, bundle_contract, policy_spec, robot_fields


def test_the_default_is_the_holonomic_disc() -> None:
    cfg = load_config()
    assert base_spec(cfg) == load_base("holonomic_disc")
    assert action_scaling(cfg) == ActionScaling(1.5, 2.0, True)


@pytest.mark.parametrize("name", ["jackal", "turtlebot4"])
def test_a_preset_fills_every_robot_field(name: str) -> None:
    cfg = load_config(overrides=[f"env.robot.base={name}"])
    preset = load_base(name)
    assert {k: v for k, v in to_dict(cfg.env.robot).items() if k != "base"} == robot_fields(preset)
    assert base_spec(cfg) == preset
    scaling = action_scaling(cfg)
    assert (scaling.drive, scaling.dim, scaling.v_max, scaling.backward, scaling.omega_max) == (
        DIFF_DRIVE,
        2,
        preset.v_forward,
        preset.v_backward,
        preset.omega_max,
    )


def test_stated_fields_refine_the_base_and_the_name_says_so() -> None:
    for overrides in (
        ["env.robot.base=jackal", "env.robot.radius=0.4"],
        ["env.robot.radius=0.4", "env.robot.base=jackal"],  # the order of overrides does not matter
    ):
        base = base_spec(load_config(overrides=overrides))
        assert (base.name, base.radius, base.v_forward, base.drive) == ("jackal+overrides", 0.4, 2.0, DIFF_DRIVE)
    disc = base_spec(load_config(overrides=["env.robot.v_max=1.2"]))  # one holonomic limit: all follow
    assert (disc.name, disc.v_forward, disc.v_backward, disc.v_lateral) == ("holonomic_disc+overrides", 1.2, 1.2, 1.2)


def test_a_base_override_replaces_the_config_files_robot_section(tmp_path: Path) -> None:
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["env"]["robot"] = {"base": "turtlebot4", "radius": 0.3, "omega_max": 1.5}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    assert base_spec(load_config(path)).name == "turtlebot4+overrides"
    assert base_spec(load_config(path, ["env.robot.base=jackal"])) == load_base("jackal")
    assert base_spec(load_config(path, ["env.robot.omega_max=0.8"])).omega_max == 0.8


def test_a_base_file_by_path(tmp_path: Path) -> None:
    values = {k: v for k, v in load_base("jackal").to_dict().items() if k != "name"}
    path = tmp_path / "my_robot.yaml"
    path.write_text(yaml.safe_dump({**values, "radius": 0.28}))
    base = base_spec(load_config(overrides=[f"env.robot.base={path}"]))
    assert (base.name, base.radius, base.drive) == ("my_robot", 0.28, DIFF_DRIVE)


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["env.robot.base=jackall"], r"env.robot.base: no base named 'jackall'"),
        (["env.robot.base=[1]"], r"env.robot.base: expected a preset name"),
        (["env.robot.wheel_base=0.3"], r"unknown key 'env.robot.wheel_base'"),
        (["env.robot.drive=ackermann"], r"env.robot.drive must be one of holonomic, diff_drive"),
        (["env.robot.base=jackal", "env.robot.v_lateral=0.5"], r"a diff_drive base has v_lateral 0"),
        (["env.robot.base=jackal", "env.robot.v_max=0"], r"env.robot.v_max must be > 0"),
        (["env.robot.v_lateral=1.0"], r"a holonomic base has one speed limit"),
        (["env.robot.base=jackal", "env.robot.accel_linear=-1"], r"env.robot.accel_linear must be > 0"),
    ],
)
def test_an_unusable_robot_is_refused_naming_the_key(overrides: list[str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_config(overrides=overrides)


def test_a_stored_config_reads_back_the_same_base() -> None:
    cfg = load_config(overrides=["env.robot.base=jackal", "env.robot.radius=0.4"])
    stored = json.loads(json.dumps(to_dict(cfg)))
    assert base_spec(config_from_data(stored)) == base_spec(cfg)
    # A stored config that predates the base states v_max, omega_max, limit_planar_speed, radius only.
    legacy = json.loads(json.dumps(to_dict(load_config())))
    for key in ("base", "drive", "v_backward", "v_lateral", "accel_linear", "accel_angular"):
        del legacy["env"]["robot"][key]
    assert base_spec(config_from_data(legacy)) == load_base("holonomic_disc")


def test_the_bundle_contract_carries_the_base_and_its_fingerprint() -> None:
    cfg = load_config(overrides=["env.robot.base=jackal"])
    contract = parse_contract(bundle_contract(cfg, 1e-2))
    assert contract.base == load_base("jackal") and contract.robot_radius == 0.333
    assert contract.guard.radius == 0.333 and contract.scaling == action_scaling(cfg)
    assert contract.fingerprint == contract_fingerprint(policy_spec(cfg), load_base("jackal"))
    assert contract.spec.dims.v_max == 2.0 and contract.spec.dims.omega_max == 4.0 and contract.obs_dim == 78


def test_the_jackal_recipe_loads_as_the_jackal_base() -> None:
    """conf/jackal.yaml (the Jackal-class policy's training recipe) is the Jackal preset, unrefined."""
    cfg = load_config(DEFAULT_CONFIG.with_name("jackal.yaml"))
    assert base_spec(cfg) == load_base("jackal") and action_scaling(cfg).dim == 2
    assert cfg.env.worlds.corridors.doorway_width[0] > 2 * cfg.env.robot.radius
    assert cfg.randomization.terms.accel_limit.params.linear[0] == load_base("jackal").accel_linear
