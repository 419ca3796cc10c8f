"""The typed YAML config: strict keys, dotted overrides, type errors that name the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from navsim.config import ConfigError, NavConfig, StuckParams
from navsim.config_load import DEFAULT_CONFIG, apply_override, config_from_data, load_config, to_dict
from navsim.contract_objects import action_scaling, policy_spec, sensor_dims
from navsim.observations import ObservationConfigError


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "nav.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def base() -> dict:
    return yaml.safe_load(DEFAULT_CONFIG.read_text())


def test_repository_config_loads_with_design_values():
    cfg = load_config()
    assert isinstance(cfg, NavConfig)
    assert cfg.env.room.num_obstacles == (4, 12) and isinstance(cfg.env.room.num_obstacles, tuple)
    assert cfg.env.lidar.num_beams == 72 and cfg.env.lidar.max_range == 6.0
    assert cfg.rewards["collision"].weight == -12.0
    assert cfg.rewards["stuck"].params == {"window": 25, "min_move": 0.30}
    assert isinstance(cfg.rewards["stuck"].params, StuckParams) and cfg.rewards["stuck"].params.window == 25
    assert cfg.observations.policy["action_prev"].enabled is False
    assert cfg.algorithm.learning_rate == pytest.approx(3e-4)


def test_round_trip_through_plain_data(tmp_path):
    cfg = load_config()
    again = load_config(_write(tmp_path, to_dict(cfg)))
    assert again == cfg


@pytest.mark.parametrize(
    "path",
    [("env", "room", "num_obstacle"), ("env", "lidar", "max_rnage"), ("algorithm", "learnig_rate"), ("enviroment",)],
)
def test_unknown_key_names_the_key_and_its_path(tmp_path, base, path):
    node = base
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = 1
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, base))
    assert f"'{'.'.join(path)}'" in str(err.value)
    assert "unknown key" in str(err.value)


def test_unknown_key_lists_the_known_keys_of_its_section(tmp_path, base):
    base["env"]["lidar"]["beams"] = 36
    with pytest.raises(ConfigError, match="num_beams"):
        load_config(_write(tmp_path, base))


def test_dotted_overrides_apply_and_are_typed():
    cfg = load_config(
        overrides=[
            "env.room.num_obstacles=[8,16]",
            "env.lidar.max_range=4",
            "algorithm.learning_rate=1e-4",
            "runner.run_name=dense",
            "rewards.collision.weight=-20",
            "observations.policy.action_prev.enabled=true",
        ]
    )
    assert cfg.env.room.num_obstacles == (8, 16)
    assert cfg.env.lidar.max_range == 4.0 and isinstance(cfg.env.lidar.max_range, float)
    assert cfg.algorithm.learning_rate == pytest.approx(1e-4)
    assert cfg.runner.run_name == "dense"
    assert cfg.rewards["collision"].weight == -20.0
    assert cfg.observations.policy["action_prev"].enabled is True
    # Values that were not overridden keep the file's values.
    assert cfg.env.lidar.num_beams == 72 and cfg.rewards["goal"].weight == 15.0


def test_later_override_wins():
    cfg = load_config(overrides=["env.seed=3", "env.seed=5"])
    assert cfg.env.seed == 5


def test_override_of_unknown_key_names_it():
    with pytest.raises(ConfigError, match=r"'env\.room\.sizee'"):
        load_config(overrides=["env.room.sizee=4"])


def test_override_without_equals_sign_is_an_error():
    with pytest.raises(ConfigError, match="key.path=value"):
        load_config(overrides=["env.seed"])


def test_override_into_a_value_that_is_not_a_section():
    data = {"env": {"seed": 1}}
    with pytest.raises(ConfigError, match="not a section"):
        apply_override(data, "env.seed.x=2")


@pytest.mark.parametrize(
    "override, key, expected",
    [
        ("env.num_envs=lots", "env.num_envs", "integer"),
        ("env.num_envs=2.5", "env.num_envs", "integer"),
        ("env.auto_reset=1", "env.auto_reset", "true/false"),
        ("env.lidar.max_range=far", "env.lidar.max_range", "number"),
        ("env.room.num_obstacles=[4]", "env.room.num_obstacles", "2 values"),
        ("env.room.num_obstacles=[4,x]", "env.room.num_obstacles[1]", "integer"),
        ("env.room=5", "env.room", "mapping"),
        ("runner.run_name=[1]", "runner.run_name", "string"),
        ("model.actor_hidden_dims=256", "model.actor_hidden_dims", "list"),
    ],
)
def test_type_errors_name_the_key(override, key, expected):
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[override])
    msg = str(err.value)
    assert key in msg and expected in msg, msg


def test_bool_is_not_accepted_as_a_number():
    with pytest.raises(ConfigError, match="env.seed"):
        load_config(overrides=["env.seed=true"])


@pytest.mark.parametrize(
    "override, match",
    [
        ("env.room.num_obstacles=[9,30]", "num_obstacles"),
        ("env.physics_substeps=0", "physics_substeps"),
        ("env.control_period=0", "control_period"),
        ("env.lidar.max_range=-1", "max_range"),
        ("env.robot.radius=0", "env.robot.radius"),
        ("env.robot.radius=3.9", "env.robot.radius"),
    ],
)
def test_cross_field_validation(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config(overrides=[override])


def test_unknown_observation_and_reward_terms_are_errors():
    with pytest.raises(ObservationConfigError, match="'lidar_raw'"):
        load_config(overrides=["observations.policy.lidar_raw.enabled=true"])
    with pytest.raises(ObservationConfigError, match=r"goal_polar.*distance_scal\b"):
        load_config(overrides=["observations.policy.goal_polar.params.distance_scal=3"])
    with pytest.raises(ConfigError, match=r"unknown key 'rewards\.progres'"):
        load_config(overrides=["rewards.progres.weight=1"])
    with pytest.raises(
        ConfigError, match=r"unknown key 'rewards\.stuck\.params\.windw' \(known here: min_move, window\)"
    ):
        load_config(overrides=["rewards.stuck.params.windw=10"])
    with pytest.raises(ConfigError, match=r"rewards\.stuck\.params\.window: expected an integer"):
        load_config(overrides=["rewards.stuck.params.window=2.5"])


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_scientific_notation_without_a_dot_is_a_number(tmp_path, base):
    # PyYAML follows YAML 1.1, where "1e-4" (no dot) is a string; float fields accept it anyway.
    path = tmp_path / "nav.yaml"
    text = yaml.safe_dump(base).replace("learning_rate: 0.0003", "learning_rate: 1e-4")
    assert "learning_rate: 1e-4" in text
    path.write_text(text)
    assert load_config(path).algorithm.learning_rate == pytest.approx(1e-4)
    # A string field keeps the text, and a non-number still fails for a float field.
    assert load_config(overrides=["runner.run_name=1e5"]).runner.run_name == "1e5"
    with pytest.raises(ConfigError, match="algorithm.desired_kl"):
        load_config(overrides=["algorithm.desired_kl=1e-x"])


def test_the_yaml_states_exactly_the_code_defaults():
    """Defaults live in the code (dataclasses, observation term registries); conf/nav.yaml restates
    them (tests/sim/test_config_defaults.py checks it value by value)."""
    from navsim.observations import ObservationManager
    from navsim.rewards import RewardManager

    from_yaml, from_code = load_config(), NavConfig()
    for section in ("env", "randomization", "rewards", "algorithm", "model", "runner", "presets"):
        assert to_dict(getattr(from_yaml, section)) == to_dict(getattr(from_code, section)), section
    assert policy_spec(from_yaml) == policy_spec(from_code)
    dims = sensor_dims(from_code)
    yaml_priv = ObservationManager(from_yaml.observations, dims, 1, "cpu").privileged_terms
    code_priv = ObservationManager(from_code.observations, dims, 1, "cpu").privileged_terms
    assert [(t.name, p, w) for t, p, w in yaml_priv] == [(t.name, p, w) for t, p, w in code_priv]
    yaml_rewards = RewardManager(from_yaml.rewards, 1, "cpu").terms
    code_rewards = RewardManager(from_code.rewards, 1, "cpu").terms
    assert [(t.name, w, p) for t, w, p in yaml_rewards] == [(t.name, w, p) for t, w, p in code_rewards]


def test_contract_objects_come_from_the_config():
    cfg = load_config(overrides=["env.robot.v_max=1.2", "env.lidar.num_beams=90"])
    dims, scaling = sensor_dims(cfg), action_scaling(cfg)
    assert (dims.num_beams, dims.max_range, dims.v_max, dims.omega_max) == (90, 6.0, 1.2, 2.0)
    assert (scaling.v_max, scaling.omega_max, scaling.limit_planar_speed) == (1.2, 2.0, True)
    spec = policy_spec(cfg)
    assert spec.dims == dims and spec.obs_dim == 90 + 6
    assert policy_spec(load_config()).fingerprint() == "23cb46e4de12b7e0"  # the fixture bundle's and bags'


def test_robot_radius_drives_the_model_and_the_rooms():
    import mujoco
    import torch

    from navsim.families.rooms import RoomGeometry, generate_rooms
    from navsim.robot import build_mjcf, slot_sizes

    cfg = load_config(overrides=["env.robot.radius=0.35"]).env
    model = mujoco.MjModel.from_xml_string(build_mjcf(cfg))
    assert model.geom("shell").size[0] == pytest.approx(0.35)
    geom = RoomGeometry(cfg, slot_sizes(cfg), "cpu")
    rooms = generate_rooms(256, cfg, geom, torch.Generator().manual_seed(0))
    half = cfg.room.size / 2
    for points in (rooms.start[:, None, :2], rooms.goal[:, None, :]):
        assert (points.abs() <= half - cfg.room.wall_margin - 0.35 + 1e-6).all()
        free = geom.clearance(rooms, points)[:, 0]
        assert (free > 0.35 + cfg.room.clearance).float().mean() > 0.95  # fallback goals aside


def test_removed_settings_are_unknown_keys():
    with pytest.raises(ConfigError, match="env.stuck_window"):
        load_config(overrides=["env.stuck_window=25"])


@pytest.mark.parametrize(
    "override",
    [
        "algorithm.learning_rate=-1e-4",
        "algorithm.learning_rate=0",
        "env.num_envs=0",
        "presets.cpu.num_envs=-8",
        "presets.cpu.num_mini_batches=0",
        "runner.num_steps_per_env=0",
        "algorithm.num_mini_batches=0",
    ],
)
def test_sizes_and_learning_rate_must_be_positive(override: str):
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=rf"{re.escape(key)} must be > 0"):
        load_config(overrides=[override])


def test_a_stored_config_without_rays_per_beam_keeps_the_one_ray_lidar_it_was_trained_with() -> None:
    data = to_dict(load_config())
    assert data["env"]["lidar"]["rays_per_beam"] != 1  # today's default renders the sector minimum
    del data["env"]["lidar"]["rays_per_beam"]
    assert config_from_data(data).env.lidar.rays_per_beam == 1
    data["env"]["lidar"]["rays_per_beam"] = 5
    assert config_from_data(data).env.lidar.rays_per_beam == 5


def test_a_term_refines_its_default_weight_and_params():
    cfg = load_config(overrides=["rewards={goal: {weight: 1.0}}", "rewards.stuck.params.window=10"])
    stuck = cfg.rewards["stuck"]
    assert (stuck.weight, stuck.params["window"], stuck.params["min_move"]) == (-0.03, 10, 0.30)
    assert cfg.rewards["goal"].weight == 1.0
    assert list(cfg.rewards) == list(NavConfig().rewards)  # a term the data leaves out keeps its default
    assert load_config(overrides=["rewards.progress.weight=null"]).rewards["progress"].weight == 2.0


def test_presets_are_named_sizings_refined_entry_by_entry():
    cfg = load_config(
        overrides=["presets.cpu.num_envs=64", "presets.small={num_envs: 8, max_iterations: 2, num_mini_batches: 1}"]
    )
    assert (cfg.presets["cpu"].num_envs, cfg.presets["cpu"].max_iterations) == (64, 500)
    assert cfg.presets["small"].num_envs == 8
    with pytest.raises(ConfigError, match=r"'presets\.tiny' needs max_iterations, num_mini_batches"):
        load_config(overrides=["presets.tiny={num_envs: 8}"])
    with pytest.raises(ConfigError, match=r"unknown key 'cpu'"):
        load_config(overrides=["cpu.num_envs=8"])


def test_a_stored_config_with_a_cpu_section_reads_it_as_the_cpu_preset() -> None:
    data = to_dict(load_config())
    data["cpu"] = data.pop("presets")["cpu"] | {"num_envs": 256}
    assert config_from_data(data).presets["cpu"].num_envs == 256
