"""The one checkpoint loader: the file, the training config it carries, and the actor it holds.

Evaluation and export both go through here, with the same validation:

- :func:`load_checkpoint`: ``torch.load(..., weights_only=True)`` (tensors and plain data only);
  a missing, unreadable, corrupt or foreign file is a :class:`CheckpointError` with one line that
  names the file (never torch's advice to load it with ``weights_only=False``);
- :func:`config_from_checkpoint`: the config stored by :class:`navtrain.runner.NavRunner` in
  ``infos["nav_config"]``, validated; a given ``config`` is the fallback for a checkpoint without
  one, and must agree with the stored one on the policy observation spec when both exist;
- :func:`build_actor`: rsl_rl's actor exactly as training built it (``navtrain.ppo_config``),
  with the checkpoint's weights loaded strictly, after checking that its input layer takes the
  config's policy observation.
- :func:`check_resume`: what ``nav-train --resume`` needs, checked before any env is built: a
  training checkpoint whose observation spec equals the run's config by fingerprint (the
  differing terms named) and whose actor fits the configured one.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from navcontract.spec import PolicySpec, compare_specs
from navsim.config import ConfigError, NavConfig
from navsim.config_load import config_from_data, load_config
from navsim.contract_objects import action_scaling, policy_spec
from navsim.observations import POLICY_GROUP
from navtrain.checkpoint_file import CheckpointError, check_checkpoint_file
from navtrain.ppo_config import ACTOR_OBS_GROUPS, actor_cfg


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely (tensors and plain data only); CheckpointError when it cannot be."""
    path = check_checkpoint_file(path)
    try:
        with open(path, "rb") as f, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. torch's note on the pickle protocol of a foreign file
            ckpt = torch.load(f, map_location=map_location, weights_only=True)
    except OSError as err:
        raise CheckpointError(f"cannot read checkpoint {path}: {err.strerror or err}") from None
    except Exception as err:  # torch raises many types for a corrupt or foreign file
        raise CheckpointError(f"{path} is not a readable checkpoint ({_load_failure(err)})") from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"{path} is not a training checkpoint (it holds a {type(ckpt).__name__}, not a dict)")
    return ckpt


def _load_failure(err: Exception) -> str:
    """The reason of a failed ``torch.load``, in a few words (no advice to drop weights_only)."""
    text = str(err)
    m = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    if m:
        reason = m.group(1).strip().split("\n")[0].split(". ")[0]
        return f"objects other than tensors and plain data, refused by weights_only loading: {reason}"
    if "central directory" in text or "zip archive" in text:
        return "truncated or corrupt file"
    first = text.strip().split("\n")[0].split(". ")[0] if text.strip() else ""
    return f"{type(err).__name__}: {first[:160]}" if first else f"{type(err).__name__}, empty or truncated file"


def spec_differences(checkpoint: PolicySpec, config: PolicySpec) -> list[str]:
    """:func:`navcontract.spec.compare_specs` of a checkpoint's spec and a config's, labelled so."""
    return [
        d.replace(": bundle ", ": checkpoint ").replace(" vs runtime ", " vs config ")
        for d in compare_specs(checkpoint, config)
    ]


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
        diffs = spec_differences(policy_spec(cfg), policy_spec(fallback))
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
    obs_dim = policy_spec(cfg).obs_dim
    w = state.get("mlp.0.weight")
    if w is None or w.shape[1] != obs_dim:
        got = None if w is None else tuple(w.shape)
        raise CheckpointError(f"actor input layer {got} does not take the {obs_dim}-dim policy observation")
    obs = TensorDict({POLICY_GROUP: torch.zeros(1, obs_dim)}, batch_size=[1])
    kwargs = {k: v for k, v in actor_cfg(cfg).items() if k != "class_name"}
    actor = MLPModel(obs, ACTOR_OBS_GROUPS, "actor", action_scaling(cfg).dim, **kwargs)
    try:
        actor.load_state_dict(state, strict=True)
    except RuntimeError as err:
        detail = " ".join(str(err).split())  # torch's message spans lines
        if len(detail) > 240:
            detail = detail[:240] + " ..."
        detail += " (model.* must be the checkpoint's)"
        raise CheckpointError(f"actor_state_dict does not fit the configured actor: {detail}") from None
    actor.eval()
    return actor.to(device)


TRAINING_KEYS = ("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iter")


def check_resume(path: str | Path, cfg: NavConfig) -> dict[str, Any]:
    """The checkpoint ``nav-train --resume`` continues from, checked against the run's ``cfg``.

    Raises CheckpointError (one line naming the file) when the file is missing, unreadable, not
    a training checkpoint, observes something else than ``cfg`` (policy spec fingerprint; the
    differing terms are named, even when the width is the same), or holds an actor that does not
    fit ``cfg.model``. Returns the loaded checkpoint.
    """
    ckpt = load_checkpoint(path)
    missing = [k for k in TRAINING_KEYS if k not in ckpt]
    if missing:
        raise CheckpointError(f"{path} is not a training checkpoint (missing {', '.join(missing)})")
    try:
        stored = config_from_checkpoint(ckpt)
    except (CheckpointError, ConfigError) as err:
        raise CheckpointError(f"{path}: {err}") from None
    ours, theirs = policy_spec(cfg), policy_spec(stored)
    if ours.fingerprint() != theirs.fingerprint():
        diffs = spec_differences(theirs, ours) or ["(no field-level difference found)"]
        raise CheckpointError(
            f"cannot resume {path}: its observation spec (fingerprint {theirs.fingerprint()}) differs from the "
            f"config's ({ours.fingerprint()}): " + "; ".join(diffs)
        )
    try:
        build_actor(ckpt, cfg)
    except CheckpointError as err:
        raise CheckpointError(f"cannot resume {path}: {err}") from None
    return ckpt
