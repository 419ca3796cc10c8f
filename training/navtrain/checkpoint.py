"""The one checkpoint loader: the file, the training config it carries, and the actor it holds.

Evaluation and export both go through here, with the same validation:

- :func:`load_checkpoint`: ``torch.load(..., weights_only=True)`` (tensors and plain data only);
- :func:`config_from_checkpoint`: the config stored by :class:`navtrain.runner.NavRunner` in
  ``infos["nav_config"]``, validated; a given ``config`` is the fallback for a checkpoint without
  one, and must agree with the stored one on the policy observation spec when both exist;
- :func:`build_actor`: rsl_rl's actor exactly as training built it (``navtrain.ppo_config``),
  with the checkpoint's weights loaded strictly, after checking that its input layer takes the
  config's policy observation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from navdeploy.spec import compare_specs
from navsim.config import ConfigError, NavConfig, config_from_data, load_config
from navsim.observations import POLICY_GROUP
from navtrain.ppo_config import ACTOR_OBS_GROUPS, actor_cfg


class CheckpointError(ValueError):
    """The checkpoint cannot be used: no config, a config that disagrees, or weights that do not fit."""


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely (tensors and plain data only)."""
    return torch.load(path, map_location=map_location, weights_only=True)


def config_from_checkpoint(ckpt: dict[str, Any], config: str | Path | NavConfig | None = None) -> NavConfig:
    """The training config: ``infos['nav_config']`` of the checkpoint, else ``config``."""
    infos = ckpt.get("infos") or {}
    stored = infos.get("nav_config") if isinstance(infos, dict) else None
    fallback = None
    if config is not None:
        fallback = config if isinstance(config, NavConfig) else load_config(config)
    if stored is None:
        if fallback is None:
            raise CheckpointError(
                "the checkpoint has no infos['nav_config'] and no config was given (--config conf/nav.yaml)"
            )
        return fallback
    try:
        cfg = config_from_data(stored, where="checkpoint infos['nav_config']")
    except ConfigError as err:
        raise CheckpointError(str(err)) from None
    if fallback is not None:
        diffs = compare_specs(cfg.policy_spec(), fallback.policy_spec())
        if diffs:
            raise CheckpointError("--config disagrees with the checkpoint's own config: " + "; ".join(diffs))
    return cfg


def build_actor(ckpt: dict[str, Any], cfg: NavConfig, device: str | torch.device = "cpu") -> torch.nn.Module:
    """The checkpoint's actor (normaliser included), in eval mode on ``device``.

    Call it with ``stochastic_output=False`` (rsl_rl's default) for the deterministic mean action.
    """
    from rsl_rl.models import MLPModel

    if "actor_state_dict" not in ckpt:
        raise CheckpointError(f"the checkpoint has no actor_state_dict (keys: {sorted(ckpt)})")
    state = ckpt["actor_state_dict"]
    obs_dim = cfg.policy_spec().obs_dim
    w = state.get("mlp.0.weight")
    if w is None or w.shape[1] != obs_dim:
        got = None if w is None else tuple(w.shape)
        raise CheckpointError(f"actor input layer {got} does not take the {obs_dim}-dim policy observation")
    obs = TensorDict({POLICY_GROUP: torch.zeros(1, obs_dim)}, batch_size=[1])
    kwargs = {k: v for k, v in actor_cfg(cfg).items() if k != "class_name"}
    actor = MLPModel(obs, ACTOR_OBS_GROUPS, "actor", 3, **kwargs)
    try:
        actor.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"actor_state_dict does not fit the configured actor: {err}") from None
    actor.eval()
    return actor.to(device)
