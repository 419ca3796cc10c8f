"""Checkpoint -> deployment bundle (policy.onnx + contract.json), with a self-check.

The torch side of the export. :func:`export_bundle` loads the checkpoint, its config and its actor
through :mod:`navtrain.checkpoint` (``infos["nav_config"]``; ``config`` is the fallback), builds the
contract from that config's contract objects (:func:`navsim.contract_objects.bundle_contract`: policy
spec, action scaling, robot radius, the ``robot_response``, ``path_following`` and ``guard``
sections), writes the ONNX graph (normaliser + MLP, raw mean action out) through
:mod:`navtrain.onnx_graph`, and then checks itself:

- ``onnx.checker`` on the written file (full check);
- onnxruntime against the torch actor on at least ``num_obs`` observations recorded by rolling
  the env out with the policy (max |delta| / max(1, |action|) <= ``tol``, default 1e-5), else :class:`ExportCheckError`
  with the numbers.

The export is atomic: the bundle is written into a temporary folder beside ``out_dir``, checked
there, and only then renamed into place, so a failed (or interrupted) export leaves whatever was in
``out_dir`` byte for byte. ``out_dir`` must be new, empty, or hold a bundle: re-exporting the same
checkpoint (same ``source.checkpoint_sha256``) replaces its bundle silently, a different bundle is
only replaced with ``force=True``, and a folder with other files is never replaced
(:class:`ExportTargetError`, raised before the rollout).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from navcontract.bundle import CONTRACT_FILE, ONNX_FILE
from navcontract.response import ResponseError
from navcontract.subgoal import PathFollowingError
from navsim.config import ConfigError, NavConfig
from navsim.config_load import to_dict
from navsim.contract_objects import ContractObjects, bundle_contract
from navsim.env import NavEnv, resolve_device
from navsim.observations import POLICY_GROUP
from navtrain.checkpoint import CheckpointError, build_actor, config_from_checkpoint, load_checkpoint
from navtrain.cli import creation_blocker
from navtrain.onnx_graph import MlpWeights, write_bundle

DEFAULT_TOL = 1e-5
DEFAULT_NUM_OBS = 1024


class ExportError(RuntimeError):
    """The checkpoint cannot be exported (missing config, shapes, untrained normaliser...)."""


class ExportCheckError(ExportError):
    """The exported ONNX does not reproduce the torch actor within tolerance."""


class ExportTargetError(ExportError):
    """The output folder cannot take the bundle (not writable, other files, a different bundle)."""


CHECK_FILE = "export_check.json"
BUNDLE_FILES = frozenset({ONNX_FILE, CONTRACT_FILE, CHECK_FILE})
"""What an export writes; the only files an existing output folder may hold."""


def check_export_target(out_dir: str | Path, checkpoint_sha256: str, force: bool = False) -> None:
    """Can ``out_dir`` take the bundle of the checkpoint with this hash? ExportTargetError if not.

    New or empty folder: yes. A folder holding the bundle of the same checkpoint: yes (re-export).
    A folder holding another bundle (or one whose contract.json cannot be read): only with
    ``force``. Anything else (a file, a folder with other files): never.
    """
    out = Path(out_dir)
    if not out.exists():
        why = creation_blocker(out)
        if why is not None:
            raise ExportTargetError(f"cannot create --out {out}: {why}")
        return
    if not out.is_dir():
        raise ExportTargetError(f"--out {out} exists and is not a folder")
    if not os.access(out, os.W_OK | os.X_OK):
        raise ExportTargetError(f"--out {out} is not writable")
    try:
        names = {p.name for p in out.iterdir()}
    except OSError as err:
        raise ExportTargetError(f"cannot list --out {out}: {err.strerror or err}") from None
    foreign = sorted(names - BUNDLE_FILES)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ExportTargetError(
            f"--out {out} holds files that are not part of a bundle ({shown}); export into a new or empty folder"
        )
    if not names or force:
        return
    contract_path = out / CONTRACT_FILE
    try:
        contract = json.loads(contract_path.read_text())
        source = contract.get("source") or {}
        old_sha, old_ckpt = source.get("checkpoint_sha256"), source.get("checkpoint", "?")
    except FileNotFoundError:
        raise ExportTargetError(
            f"--out {out} holds an incomplete bundle (no {CONTRACT_FILE}); pass --force to replace it"
        ) from None
    except json.JSONDecodeError as err:
        raise ExportTargetError(
            f"--out {out}: {CONTRACT_FILE} is not valid JSON ({err.msg} at line {err.lineno} column {err.colno}); "
            "pass --force to replace that bundle"
        ) from None
    except (OSError, AttributeError) as err:
        raise ExportTargetError(
            f"--out {out}: cannot read {CONTRACT_FILE} ({err}); pass --force to replace that bundle"
        ) from None
    if old_sha != checkpoint_sha256:
        raise ExportTargetError(
            f"--out {out} holds a different bundle (from checkpoint {old_ckpt}, fingerprint "
            f"{contract.get('fingerprint', '?')}); pass --force to replace it"
        )


def _staging_dir(out: Path) -> Path:
    """A fresh temporary folder beside ``out`` (same file system, so the final rename is atomic)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.export-", dir=out.parent))
    except OSError as err:
        raise ExportTargetError(f"cannot write the bundle beside --out {out}: {err.strerror or err}") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # a plain folder's mode, not mkdtemp's 0700
    return tmp


def _swap_into_place(staged: Path, out: Path) -> None:
    """Rename the checked bundle onto ``out``; an existing ``out`` is moved aside first and removed
    only once the new one is in place (restored if the rename fails)."""
    if not out.exists():
        os.rename(staged, out)
        return
    old = out.with_name(f".{out.name}.replaced-{os.getpid()}")
    os.rename(out, old)
    try:
        os.rename(staged, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def actor_weights(actor: torch.nn.Module, activation: str) -> MlpWeights:
    """The actor's normaliser buffers and Linear layers as numpy arrays."""
    obs_dim = actor.obs_dim
    norm = actor.obs_normalizer
    if isinstance(norm, torch.nn.Identity):
        mean, std, eps = np.zeros(obs_dim, np.float32), np.ones(obs_dim, np.float32), 0.0
    else:
        mean = norm._mean.detach().cpu().numpy().reshape(-1)
        std = norm._std.detach().cpu().numpy().reshape(-1)
        eps = float(norm.eps)
        var = norm._var.detach().cpu().numpy().reshape(-1)
        if int(norm.count) == 0 or (np.all(mean == 0.0) and np.all(var == 1.0)):
            raise ExportError(
                "the actor's observation normaliser is untouched (count 0, mean all 0, var all 1): "
                "this checkpoint was not trained with its normaliser; refusing to export"
            )
    layers = [
        (mod.weight.detach().cpu().numpy(), mod.bias.detach().cpu().numpy())
        for mod in actor.mlp
        if isinstance(mod, torch.nn.Linear)
    ]
    return MlpWeights(mean=mean, std=std, eps=eps, layers=layers, activation=activation)


@torch.no_grad()
def actor_mean(actor: torch.nn.Module, obs: torch.Tensor) -> torch.Tensor:
    """Deterministic (mean) raw action of the torch actor."""
    return actor(TensorDict({POLICY_GROUP: obs.float().cpu()}, batch_size=[obs.shape[0]]))


RECORD_POOL = 8
"""Planned worlds per family and curriculum level in the recording rollout (when the config's pool is
larger): a few dozen worlds driven for a few dozen steps meet no more, and planning the training
pool (128 per family and level) takes minutes on a CPU."""


def recording_config(cfg: NavConfig) -> NavConfig:
    """``cfg`` with its planned-world pool cut to :data:`RECORD_POOL` (families and shares kept)."""
    w = cfg.env.worlds
    if w.pool_size <= RECORD_POOL:
        return cfg
    worlds = replace(w, pool_size=RECORD_POOL, refresh_size=min(w.refresh_size, RECORD_POOL))
    return replace(cfg, env=replace(cfg.env, worlds=worlds))


@torch.no_grad()
def record_observations(
    actor: torch.nn.Module, cfg: NavConfig, num_obs: int, num_envs: int = 32, device: str = "cpu", seed: int = 12345
) -> torch.Tensor:
    """Roll the env out with the (stochastic) policy and keep every policy observation it saw (on the
    config's worlds, from a pool of :data:`RECORD_POOL` planned worlds per family and level)."""
    env = NavEnv(recording_config(cfg), num_envs=num_envs, device=device, seed=seed)
    steps = math.ceil(num_obs / num_envs)
    gen = torch.Generator().manual_seed(seed)
    std = actor.distribution.std_param.detach().abs().cpu() if hasattr(actor.distribution, "std_param") else 0.5
    out = []
    obs = env.get_observations()[POLICY_GROUP].cpu()
    for _ in range(steps):
        out.append(obs.clone())
        mean = actor_mean(actor, obs)
        action = mean + std * torch.randn(mean.shape, generator=gen)
        obs = env.step(action.to(env.device))[0][POLICY_GROUP].cpu()
    return torch.cat(out, dim=0)


def check_onnx(
    onnx_path: str | Path, actor: torch.nn.Module, obs: torch.Tensor, tol: float = DEFAULT_TOL
) -> dict[str, Any]:
    """onnx.checker, then onnxruntime vs the torch actor on ``obs``; raises ExportCheckError."""
    import onnx
    import onnxruntime as ort

    try:
        onnx.checker.check_model(str(onnx_path), full_check=True)
    except onnx.checker.ValidationError as err:
        raise ExportCheckError(f"onnx.checker rejected {onnx_path}: {err}") from None
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    x = obs.float().cpu().numpy()
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    want = actor_mean(actor, obs).numpy()
    if got.shape != want.shape:
        raise ExportCheckError(f"ONNX output shape {got.shape} != torch actor output shape {want.shape}")
    return compare_actions(got, want, tol)


def compare_actions(got: np.ndarray, want: np.ndarray, tol: float) -> dict[str, Any]:
    """ONNX outputs ``got`` against the torch actor's ``want`` (N, 3); raises ExportCheckError.

    ``tol`` bounds ``|got - want| / max(1, |want|)``: absolute inside [-1, 1], the range the
    robot acts on (the action is clipped to it before scaling), and relative beyond it, where a
    raw mean of, say, -31.9 is a saturated command and float32 itself carries only ~2e-6 of it.
    """
    delta = np.abs(got.astype(np.float64) - want.astype(np.float64))
    scaled = delta / np.maximum(1.0, np.abs(want.astype(np.float64)))
    result = {
        "num_obs": int(got.shape[0]),
        "max_abs_diff": float(delta.max()),
        "mean_abs_diff": float(delta.mean()),
        "max_scaled_diff": float(scaled.max()),
        "tol": float(tol),
        "tol_rule": "|onnx - torch| / max(1, |torch|) <= tol",
    }
    if not np.isfinite(scaled).all() or result["max_scaled_diff"] > tol:
        worst = np.unravel_index(int(np.nanargmax(scaled)), scaled.shape)
        raise ExportCheckError(
            f"ONNX vs torch actor on {result['num_obs']} observations: max |delta| / max(1, |action|) "
            f"{result['max_scaled_diff']:.3e} > tol {tol:.1e} (max |delta| {result['max_abs_diff']:.3e}, mean "
            f"{result['mean_abs_diff']:.3e}; worst at obs {worst[0]}, action {worst[1]}: onnx {got[worst]:.7g} "
            f"vs torch {want[worst]:.7g})"
        )
    return result


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def export_bundle(
    checkpoint_path: str | Path,
    out_dir: str | Path,
    config: str | Path | NavConfig | None = None,
    num_obs: int = DEFAULT_NUM_OBS,
    num_envs: int = 32,
    tol: float = DEFAULT_TOL,
    device: str | None = None,
    observations: torch.Tensor | None = None,
    force: bool = False,
) -> Path:
    """Export ``checkpoint_path`` to ``out_dir``/policy.onnx + contract.json and self-check it.

    ``device``: Warp device of the recording rollout (None: CUDA when Warp sees one, else CPU).
    ``observations``: recorded policy observations to check on instead of a fresh rollout (at
    least ``num_obs`` of them). ``force``: replace a different bundle in ``out_dir``. Returns the
    ONNX path. Raises ExportError (ExportTargetError, ExportCheckError); ``out_dir`` is then
    untouched.
    """
    ckpt_path = Path(checkpoint_path)
    out = Path(out_dir).absolute()
    ckpt, cfg, actor = _load(ckpt_path, config)
    try:
        objects = ContractObjects.of(cfg)
    except (ResponseError, PathFollowingError, ValueError) as err:
        raise ExportError(f"config: {err}") from None
    weights = actor_weights(actor, cfg.model.activation)
    ckpt_sha = _sha256(ckpt_path)
    check_export_target(out, ckpt_sha, force)
    staged = _staging_dir(out)  # before the rollout: an unwritable place fails now, not minutes later
    try:
        if observations is None:
            dev = resolve_device(device or "auto")
            observations = record_observations(actor, cfg, num_obs, num_envs=num_envs, device=dev)
        if observations.shape[0] < num_obs or observations.shape[1] != objects.spec.obs_dim:
            raise ExportError(
                f"need >= {num_obs} observations of width {objects.spec.obs_dim}, got {tuple(observations.shape)}"
            )
        source = _source(ckpt_path, ckpt_sha, ckpt, actor, cfg)
        contract = bundle_contract(cfg, float(weights.eps), {"source": source})
        path = write_bundle(staged, weights, contract)
        report = check_onnx(path, actor, observations, tol)
        (staged / CHECK_FILE).write_text(json.dumps({**report, "onnx_sha256": _sha256(path)}, indent=2) + "\n")
        check_export_target(out, ckpt_sha, force)  # unchanged since the start (nobody wrote there meanwhile)
        try:
            _swap_into_place(staged, out)
        except OSError as err:
            raise ExportTargetError(f"cannot move the checked bundle to --out {out}: {err.strerror or err}") from None
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return out / ONNX_FILE


def _load(ckpt_path: Path, config: str | Path | NavConfig | None) -> tuple[dict[str, Any], NavConfig, torch.nn.Module]:
    """The checkpoint, its config (``config``: the fallback) and its actor; ExportError if unusable."""
    try:
        ckpt = load_checkpoint(ckpt_path)
        cfg = config_from_checkpoint(ckpt, config)
        return ckpt, cfg, build_actor(ckpt, cfg)
    except CheckpointError as err:
        raise ExportError(f"{ckpt_path}: {err}" if str(ckpt_path) not in str(err) else str(err)) from None
    except ConfigError as err:
        raise ExportError(f"--config: {err}") from None


def _source(
    ckpt_path: Path, ckpt_sha: str, ckpt: dict[str, Any], actor: torch.nn.Module, cfg: NavConfig
) -> dict[str, Any]:
    """The contract's ``source``: the checkpoint, its network and the whole training config."""
    return {
        "checkpoint": ckpt_path.name,
        "checkpoint_sha256": ckpt_sha,
        "iteration": int(ckpt.get("iter", -1)),
        "normalizer_count": int(getattr(actor.obs_normalizer, "count", torch.tensor(0))),
        "model": {"hidden_dims": list(cfg.model.actor_hidden_dims), "activation": cfg.model.activation},
        "nav_config": to_dict(cfg),
    }
