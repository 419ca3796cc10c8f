"""The randomisation registry and config: ranges, sampling on the device, severities, the
TensorBoard log, and randomisation off leaving the simulator exactly as without it."""

from __future__ import annotations

import math

import pytest
import torch

from navsim.config import ConfigError, RandomizationCfg, RandTermsCfg
from navsim.config_load import config_from_data, load_config, to_dict
from navsim.env import NavEnv
from navsim.randomization import (
    RANDOMIZATION_TERMS,
    RandomizationManager,
    nominal_values,
    trained_ranges,
)
from support.simenv import NO_GUARD, empty_rooms, nav_config, place_obstacle


def only(*terms: str, **ranges: str) -> list[str]:
    """Overrides: randomisation on with just ``terms`` enabled, in every world (no nominal share);
    ``ranges`` as ``term__param="[a,b]"``."""
    out = ["randomization.enabled=true", "randomization.nominal_share=0"]
    out += [f"randomization.terms.{t}.enabled={str(t in terms).lower()}" for t in RANDOMIZATION_TERMS]
    for key, value in ranges.items():
        term, param = key.split("__")
        out.append(f"randomization.terms.{term}.params.{param}={value}")
    return out


# ---------------------------------------------------------------------------------------------
# Config and registry


def test_the_config_has_one_field_per_registered_term_and_param():
    terms = RandTermsCfg()
    assert list(terms) == list(RANDOMIZATION_TERMS)
    for name, term in terms.items():
        assert tuple(term.params) == RANDOMIZATION_TERMS[name].param_names, name


def test_yaml_names_every_term_with_its_defaults():
    cfg = load_config()
    assert cfg.randomization.enabled is True
    assert list(cfg.randomization.terms) == list(RANDOMIZATION_TERMS)
    for name, term in cfg.randomization.terms.items():
        assert term.enabled is True
        assert term.params == RandomizationCfg().terms[name].params, name
    assert cfg.randomization.terms["accel_limit"].params == {"linear": (2.5, 6.0), "angular": (3.2, 8.0)}


def test_left_out_terms_and_params_are_filled_in_with_the_defaults():
    cfg = load_config(overrides=["randomization.terms={lidar_bias: {params: {offset: [-0.01, 0.01]}}}"])
    terms = cfg.randomization.terms
    assert list(terms) == list(RANDOMIZATION_TERMS)
    assert terms["lidar_bias"].params == {"offset": (-0.01, 0.01), "scale": (0.98, 1.02)}
    assert terms["actuator_lag"].params == {"tau": (0.02, 0.12)}
    # Plain data (a checkpoint's, a contract's) therefore names every term and param.
    data = to_dict(cfg)["randomization"]["terms"]
    assert data["odom_twist"]["params"]["scale"] == [0.95, 1.05]


@pytest.mark.parametrize(
    "override, match",
    [
        ("randomization.terms.lidar_bais.enabled=false", r"unknown key 'randomization\.terms\.lidar_bais'"),
        ("randomization.terms.lidar_bias.params.offest=[0,1]", r"'randomization\.terms\.lidar_bias\.params\.offest'"),
        ("randomization.terms.actuator_lag.params.tau=[0.2,0.1]", r"actuator_lag\.params\.tau"),
        ("randomization.terms.actuator_lag.params.tau=[-0.1,0.1]", r"actuator_lag\.params\.tau"),
        ("randomization.terms.lidar_dropout.params.prob=[0,1.5]", r"lidar_dropout\.params\.prob"),
        ("randomization.terms.command_latency.params.substeps=[0,1.5]", "whole numbers"),
        ("randomization.terms.command_latency.params.substeps=[0,3]", "more than env.physics_substeps"),
        ("randomization.enable=true", r"'randomization\.enable'"),
        ("randomization.terms.lidar_yaw.params.deg=[1]", "2 values"),
    ],
)
def test_bad_randomization_settings_are_one_line_config_errors(override, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_config(overrides=[override])
    assert "\n" not in str(err.value)


def test_the_delay_budget_counts_enabled_terms_only():
    cfg = load_config(
        overrides=["randomization.terms.command_latency.params.substeps=[0,4]", *only("command_latency")[1:]]
    )
    assert trained_ranges(cfg.randomization) == {"command_latency": {"substeps": (0.0, 4.0)}}


def test_a_stored_config_without_the_section_trained_without_randomisation():
    data = to_dict(load_config())
    del data["randomization"]
    cfg = config_from_data(data)
    assert cfg.randomization.enabled is False and trained_ranges(cfg.randomization) == {}
    # A stored config that has the section keeps it.
    assert config_from_data(to_dict(load_config())).randomization.enabled is True


def test_severity_rules_of_the_registry():
    t = RANDOMIZATION_TERMS
    tau = t["actuator_lag"].param("tau")
    assert tau.at_severity((0.02, 0.12), 1) == (0.12, 0.12)
    assert tau.at_severity((0.02, 0.12), 2) == pytest.approx((0.24, 0.24))
    assert t["accel_limit"].at_severity({"linear": (2.5, 6.0), "angular": (3.2, 8.0)}, 2) == {
        "linear": (1.25, 1.25),
        "angular": (1.6, 1.6),
    }
    assert t["command_latency"].at_severity({"substeps": (0, 2)}, 2) == {"substeps": (4.0, 4.0)}
    bias = t["lidar_bias"].at_severity({"offset": (-0.02, 0.02), "scale": (0.98, 1.02)}, 2)
    assert bias["offset"] == pytest.approx((-0.04, 0.04)) and bias["scale"] == pytest.approx((0.96, 1.04))
    assert t["lidar_yaw"].param("deg").at_severity((-1.0, 2.0), 1) == (-2.0, 2.0)  # full magnitude, both signs
    assert t["lidar_dropout"].param("prob").at_severity((0.0, 0.6), 2) == (1.0, 1.0)  # bounded
    nominal = nominal_values()
    assert nominal["accel_limit"]["linear"] == math.inf and nominal["lidar_bias"]["scale"] == 1.0


# ---------------------------------------------------------------------------------------------
# Sampling


def test_sampled_values_stay_in_their_ranges_and_cover_them():
    cfg = load_config(None, ["randomization.nominal_share=0"])
    n = 256
    rand = RandomizationManager(cfg.randomization, n, "cpu", seed=5)
    everyone = torch.ones(n, dtype=torch.bool)
    rand.sample(everyone)
    for name, params in trained_ranges(cfg.randomization).items():
        for p, (lo, hi) in params.items():
            v = rand.value(name, p)
            assert ((v >= lo) & (v <= hi)).all(), (name, p)
            width = hi - lo
            assert v.min() < lo + 0.1 * width + 1e-9 and v.max() > hi - 0.1 * width - 1e-9, (name, p)
            if RANDOMIZATION_TERMS[name].param(p).integer:
                assert torch.equal(v, v.round()) and set(v.tolist()) == set(range(int(lo), int(hi) + 1))
    # Only the worlds in the mask change.
    before = {k: v.clone() for k, v in rand.values["lidar_yaw"].items()}
    mask = torch.arange(n) < 10
    rand.sample(mask)
    after = rand.values["lidar_yaw"]["deg"]
    assert torch.equal(after[10:], before["deg"][10:]) and not torch.equal(after[:10], before["deg"][:10])


def test_a_share_of_episodes_runs_without_any_perturbation():
    cfg = load_config(None, ["randomization.nominal_share=0.25"])
    n = 4000
    rand = RandomizationManager(cfg.randomization, n, "cpu", seed=2)
    rand.sample(torch.ones(n, dtype=torch.bool))
    nominal = nominal_values()
    plain = torch.ones(n, dtype=torch.bool)
    for name, params in trained_ranges(cfg.randomization).items():
        for p, (lo, hi) in params.items():
            v = rand.value(name, p)
            at_nominal = v == nominal[name][p]
            plain &= at_nominal
            assert (at_nominal | ((v >= lo) & (v <= hi))).all(), (name, p)
    # The plain worlds have every term at its nominal value at once; about a quarter of them.
    assert 0.22 < plain.float().mean() < 0.28
    # The suite's fixed severities apply to every world.
    rand.set_severity(1.0)
    rand.sample(torch.ones(n, dtype=torch.bool))
    assert (rand.value("actuator_lag", "tau") == 0.12).all()
    with pytest.raises(ConfigError, match="nominal_share"):
        load_config(None, ["randomization.nominal_share=1.0"])


def test_at_a_severity_each_world_gets_one_of_the_two_values():
    cfg = load_config()
    rand = RandomizationManager(cfg.randomization, 64, "cpu", seed=1)
    rand.set_severity(2.0)
    rand.sample(torch.ones(64, dtype=torch.bool))
    offset = rand.value("lidar_bias", "offset")
    assert set(torch.round(offset * 1e6).tolist()) == {-40000.0, 40000.0}
    assert torch.allclose(rand.value("actuator_lag", "tau"), torch.full((64,), 0.24))
    assert torch.equal(rand.value("observation_latency", "substeps"), torch.full((64,), 4.0))
    rand.set_severity(None)
    rand.sample(torch.ones(64, dtype=torch.bool))
    assert rand.value("actuator_lag", "tau").unique().numel() > 10


# ---------------------------------------------------------------------------------------------
# Off means off


def _rollout(env: NavEnv, steps: int = 20) -> list[tuple[torch.Tensor, ...]]:
    gen = torch.Generator().manual_seed(11)
    out = []
    for _ in range(steps):
        action = torch.rand(env.num_envs, 3, generator=gen) * 2.4 - 1.2
        obs, rew, done, _ = env.step(action)
        out.append((obs["policy"].clone(), obs["privileged"].clone(), rew.clone(), done.clone(), env.pose()))
    return out


def test_randomisation_off_is_bit_identical_to_the_simulator_without_it():
    """Master switch off, every term off, and a stored config without the section: the same
    draws and kernels, the same observations, rewards and dones to the bit."""
    base = ["env.init_at_random_ep_len=false", "env.episode_length_s=1.0", NO_GUARD]  # resets within 20 steps
    master_off = nav_config(*base, "randomization.enabled=false")
    terms_off = nav_config(*base, *[f"randomization.terms.{t}.enabled=false" for t in RANDOMIZATION_TERMS])
    data = to_dict(nav_config(*base))
    del data["randomization"]
    stored = config_from_data(data)
    runs = []
    for cfg in (master_off, terms_off, stored):
        env = NavEnv(cfg, num_envs=6, device="cpu", seed=2)
        assert not env.randomization.active and env.base is None and not env.lidar_faults.active
        runs.append(_rollout(env))
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            for x, y in zip(a, b, strict=True):
                assert torch.equal(x, y)
    # Randomisation on: different observations, yet its own generator leaves the room and the
    # lidar-noise streams alone (a lidar-yaw-only run drives the very same trajectories).
    env_on = NavEnv(nav_config(*base, *only("lidar_yaw")), num_envs=6, device="cpu", seed=2)
    on = _rollout(env_on)
    assert not torch.equal(on[5][0], runs[0][5][0])
    for a, b in zip(runs[0], on, strict=True):
        assert torch.equal(a[4], b[4]) and torch.equal(a[2], b[2]) and torch.equal(a[1], b[1])


def test_tensorboard_log_holds_the_values_drawn_for_the_worlds_reset(make_env):
    env = make_env(4, "env.init_at_random_ep_len=false", "env.lidar.noise_std=0.0", *only("actuator_lag", "lidar_yaw"))
    rooms = empty_rooms(env)
    for w in (1, 2):
        place_obstacle(rooms, w, 0, (0.25, 0.0))  # these two collide on the first step
    env.reset(rooms)
    _, _, dones, extras = env.step(torch.zeros(4, 3))
    assert dones.tolist() == [0, 1, 1, 0]
    log = extras["log"]
    rand = env.randomization  # values of the new episodes of worlds 1 and 2, one entry per world
    assert torch.equal(log["Randomization/actuator_lag/tau"], rand.value("actuator_lag", "tau")[1:3])
    assert torch.equal(log["Randomization/lidar_yaw/deg"], rand.value("lidar_yaw", "deg")[1:3])
    assert not any(k.startswith("Randomization/accel_limit") for k in log)
    env.reset(empty_rooms(env))
    assert "log" not in env.step(torch.zeros(4, 3))[3]
