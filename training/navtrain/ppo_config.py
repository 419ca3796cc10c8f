"""Translate our typed config into the train_cfg dict of rsl_rl's OnPolicyRunner (rsl-rl-lib 5.x)."""

from __future__ import annotations

from typing import Any

from navsim.config import NavConfig
from navsim.config_load import to_dict
from navsim.observations import POLICY_GROUP, check_actor_groups

ACTOR_OBS_GROUPS = {"actor": [POLICY_GROUP]}
"""The actor's inputs: the policy group only (what the robot can build)."""

MIN_STD, MAX_STD = 1e-6, 1e6
"""The action noise's bounds without a floor from the config (rsl_rl's own)."""


def actor_cfg(cfg: NavConfig) -> dict[str, Any]:
    """rsl_rl's actor model config: MLP with empirical normalisation and a scalar-std Gaussian whose std
    never falls below ``model.min_noise_std``."""
    m = cfg.model
    return {
        "class_name": "MLPModel",
        "hidden_dims": list(m.actor_hidden_dims),
        "activation": m.activation,
        "obs_normalization": m.obs_normalization,
        "distribution_cfg": {
            "class_name": "GaussianDistribution",
            "init_std": m.init_noise_std,
            "std_type": "scalar",
            "std_range": (max(m.min_noise_std, MIN_STD), MAX_STD),
        },
    }


def runner_cfg(cfg: NavConfig, obs_groups: dict[str, list[str]]) -> dict[str, Any]:
    """The rsl_rl train_cfg: actor/critic MLPs with empirical normalisation, PPO, runner settings."""
    check_actor_groups(obs_groups["actor"])
    a, m, r = cfg.algorithm, cfg.model, cfg.runner
    return {
        "num_steps_per_env": r.num_steps_per_env,
        "save_interval": r.save_interval,
        "experiment_name": r.experiment_name,
        "run_name": r.run_name,
        "logger": r.logger,
        "obs_groups": {k: list(v) for k, v in obs_groups.items()},
        "check_for_nan": True,
        "actor": actor_cfg(cfg),
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": list(m.critic_hidden_dims),
            "activation": m.activation,
            "obs_normalization": m.obs_normalization,
        },
        "algorithm": {
            "class_name": "PPO",
            "learning_rate": a.learning_rate,
            "schedule": a.schedule,
            "desired_kl": a.desired_kl,
            "clip_param": a.clip_param,
            "use_clipped_value_loss": a.use_clipped_value_loss,
            "value_loss_coef": a.value_loss_coef,
            "entropy_coef": a.entropy_coef,
            "num_learning_epochs": a.num_learning_epochs,
            "num_mini_batches": a.num_mini_batches,
            "gamma": a.gamma,
            "lam": a.lam,
            "max_grad_norm": a.max_grad_norm,
        },
        "nav_config": to_dict(cfg),
    }
