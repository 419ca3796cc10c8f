"""The actor's action noise has a floor (``model.min_noise_std``): a std learned down to almost nothing
(a run whose adaptive learning rate then fell to its floor) still samples with the floor's spread."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from navsim.config import ConfigError
from navsim.config_load import load_config
from navsim.contract_objects import policy_spec
from navsim.observations import POLICY_GROUP
from navtrain.ppo_config import ACTOR_OBS_GROUPS, actor_cfg


def _sample_spread(*overrides: str, learned_std: float) -> torch.Tensor:
    """Per action, the spread of 4000 stochastic actions around the mean, for an actor whose learned
    std is ``learned_std``."""
    from rsl_rl.models import MLPModel

    cfg = load_config(overrides=list(overrides))
    dim = policy_spec(cfg).obs_dim
    obs = TensorDict({POLICY_GROUP: torch.zeros(4000, dim)}, batch_size=[4000])
    kwargs = {k: v for k, v in actor_cfg(cfg).items() if k != "class_name"}
    torch.manual_seed(0)
    actor = MLPModel(obs[:1], ACTOR_OBS_GROUPS, "actor", 2, **kwargs)
    with torch.no_grad():
        actor.distribution.std_param.fill_(learned_std)
        sampled = actor(obs, stochastic_output=True)
        mean = actor(obs)
    return (sampled - mean).std(dim=0)


def test_a_collapsed_std_samples_with_the_floor():
    spread = _sample_spread(learned_std=7e-4)  # the default floor, 0.05
    assert torch.allclose(spread, torch.full_like(spread, 0.05), rtol=0.1)


def test_no_floor_keeps_the_learned_std():
    spread = _sample_spread("model.min_noise_std=0", learned_std=7e-4)
    assert torch.allclose(spread, torch.full_like(spread, 7e-4), rtol=0.1)


def test_a_std_above_the_floor_is_left_as_learned():
    spread = _sample_spread(learned_std=0.3)
    assert torch.allclose(spread, torch.full_like(spread, 0.3), rtol=0.1)


@pytest.mark.parametrize("value", ["-0.1", "1.0", "nan"])
def test_a_floor_outside_zero_to_the_initial_std_is_refused(value):
    with pytest.raises(ConfigError, match="model.min_noise_std"):
        load_config(overrides=[f"model.min_noise_std={value}"])
