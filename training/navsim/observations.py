"""Observation registry: DEPLOYABLE terms (shared with the robot) and SIM_ONLY terms.

Provenance is enforced by the function signature: DEPLOYABLE terms are ``fn(ctx, params)`` and
come from ``navcontract.terms`` (the very code the robot runs); SIM_ONLY terms are
``fn(ctx, truth, params)`` and live here, next to the simulator. YAML may switch terms on/off and
change their params; it cannot move a term to another group. Widths are declared before any data
exists; every group output is checked against them; before the first step the groups are zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from navcontract.spec import PolicySpec, SpecError, build_policy_obs, policy_spec_from_terms
from navcontract.terms import DEPLOYABLE_TERMS, SIM_ONLY, ObsContext, SensorDims
from navsim.config import ObservationsCfg
from navsim.contract_objects import policy_terms

POLICY_GROUP = "policy"
PRIVILEGED_GROUP = "privileged"


class ObservationConfigError(ValueError):
    pass


@dataclass
class SimTruth:
    """What only the simulator knows, batched over worlds."""

    clearance: torch.Tensor  # (N,) distance from the robot's surface to the nearest obstacle/wall [m]
    scan_clean: torch.Tensor  # (N, B) noise-free ranges [m]
    contact: torch.Tensor  # (N,) 1.0 when the shell touched something this step, or is within near_dist
    nearest_dir_body: torch.Tensor  # (N, 2) unit vector to the nearest surface, body frame


@dataclass(frozen=True)
class SimTermDef:
    name: str
    width: Callable[[dict[str, Any], SensorDims], int]
    fn: Callable[[ObsContext, SimTruth, dict[str, Any]], torch.Tensor]
    default_params: dict[str, Any]
    provenance: str = SIM_ONLY


def truth_clearance(ctx: ObsContext, truth: SimTruth, params: dict[str, Any]) -> torch.Tensor:
    """Surface clearance divided by ``scale`` and clipped to [0, 1]."""
    return (truth.clearance / float(params["scale"])).clamp(0.0, 1.0)[:, None]


def truth_scan_clean(ctx: ObsContext, truth: SimTruth, params: dict[str, Any]) -> torch.Tensor:
    return (truth.scan_clean / ctx.dims.max_range).clamp(0.0, 1.0)


def truth_contact(ctx: ObsContext, truth: SimTruth, params: dict[str, Any]) -> torch.Tensor:
    """Contact or near contact. A contact ends the episode, so the next observation belongs to a
    new episode; ``near_dist`` makes the flag informative before it happens."""
    near = truth.clearance < float(params["near_dist"])
    return torch.maximum(truth.contact, near.float())[:, None]


def truth_nearest_dir(ctx: ObsContext, truth: SimTruth, params: dict[str, Any]) -> torch.Tensor:
    return truth.nearest_dir_body


SIM_ONLY_TERMS: dict[str, SimTermDef] = {
    t.name: t
    for t in [
        SimTermDef("truth_clearance", lambda p, d: 1, truth_clearance, {"scale": 1.0}),
        SimTermDef("truth_scan_clean", lambda p, d: d.num_beams, truth_scan_clean, {}),
        SimTermDef("truth_contact", lambda p, d: 1, truth_contact, {"near_dist": 0.05}),
        SimTermDef("truth_nearest_dir", lambda p, d: 2, truth_nearest_dir, {}),
    ]
}

GROUP_REGISTRY: dict[str, dict[str, Any]] = {POLICY_GROUP: DEPLOYABLE_TERMS, PRIVILEGED_GROUP: SIM_ONLY_TERMS}


def validate_observation_cfg(obs_cfg: ObservationsCfg) -> None:
    """Terms named in YAML must exist in their group's registry, with known params."""
    for group in (POLICY_GROUP, PRIVILEGED_GROUP):
        registry = GROUP_REGISTRY[group]
        other = GROUP_REGISTRY[PRIVILEGED_GROUP if group == POLICY_GROUP else POLICY_GROUP]
        for name, term in getattr(obs_cfg, group).items():
            if name not in registry:
                hint = (
                    f" (it belongs to the '{'privileged' if group == POLICY_GROUP else 'policy'}' group)"
                    if name in other
                    else ""
                )
                raise ObservationConfigError(f"observations.{group}: unknown term '{name}'{hint}")
            extra = [k for k in term.params if k not in registry[name].default_params]
            if extra:
                raise ObservationConfigError(f"observations.{group}.{name}: unknown param(s) {', '.join(extra)}")


def check_actor_groups(actor_groups: list[str]) -> None:
    """The privileged group in the actor is a hard error: it would not exist on the robot."""
    if PRIVILEGED_GROUP in actor_groups:
        raise ObservationConfigError(
            "the privileged group (SIM_ONLY terms) cannot be an actor input: the robot cannot build it"
        )
    unknown = [g for g in actor_groups if g not in GROUP_REGISTRY]
    if unknown:
        raise ObservationConfigError(f"unknown observation group(s) for the actor: {unknown}")


class ObservationManager:
    """Builds the observation groups of the batched env from a context and the sim truth."""

    def __init__(self, obs_cfg: ObservationsCfg, dims: SensorDims, num_envs: int, device: torch.device | str) -> None:
        validate_observation_cfg(obs_cfg)
        self.policy_spec: PolicySpec = policy_spec_from_terms(policy_terms(obs_cfg), dims)
        self.privileged_terms: list[tuple[SimTermDef, dict[str, Any], int]] = []
        for name, tdef in SIM_ONLY_TERMS.items():
            term = obs_cfg.privileged.get(name)
            if term is not None and not term.enabled:
                continue
            params = {**tdef.default_params, **(dict(term.params) if term is not None else {})}
            self.privileged_terms.append((tdef, params, int(tdef.width(params, dims))))
        self.privileged_enabled = bool(obs_cfg.privileged_enabled)
        self.dims = dims
        self.num_envs = num_envs
        self.device = device

    # Declared widths -------------------------------------------------------------------------
    @property
    def policy_dim(self) -> int:
        return self.policy_spec.obs_dim

    @property
    def privileged_dim(self) -> int:
        return sum(w for _, _, w in self.privileged_terms)

    def group_dims(self) -> dict[str, int]:
        return {POLICY_GROUP: self.policy_dim, PRIVILEGED_GROUP: self.privileged_dim}

    def obs_groups(self) -> dict[str, list[str]]:
        """rsl_rl obs_groups: actor = [policy]; critic = [policy, privileged] when enabled."""
        critic = [POLICY_GROUP, PRIVILEGED_GROUP] if self.privileged_enabled else [POLICY_GROUP]
        groups = {"actor": [POLICY_GROUP], "critic": critic}
        check_actor_groups(groups["actor"])
        return groups

    def term_layout(self, group: str) -> list[tuple[str, int]]:
        if group == POLICY_GROUP:
            return [(t.name, t.width) for t in self.policy_spec.terms]
        return [(t.name, w) for t, _, w in self.privileged_terms]

    def zeros(self) -> dict[str, torch.Tensor]:
        return {g: torch.zeros(self.num_envs, d, device=self.device) for g, d in self.group_dims().items()}

    # Computing --------------------------------------------------------------------------------
    def compute(self, ctx: ObsContext, truth: SimTruth) -> dict[str, torch.Tensor]:
        policy = build_policy_obs(ctx, self.policy_spec)
        parts = []
        for tdef, params, width in self.privileged_terms:
            value = tdef.fn(ctx, truth, params)
            if tuple(value.shape) != (self.num_envs, width):
                raise SpecError(
                    f"term '{tdef.name}' returned {tuple(value.shape)}, declared ({self.num_envs}, {width})"
                )
            parts.append(value.float())
        privileged = torch.cat(parts, dim=-1) if parts else torch.zeros(self.num_envs, 0, device=self.device)
        out = {POLICY_GROUP: policy, PRIVILEGED_GROUP: privileged}
        for g, d in self.group_dims().items():
            if tuple(out[g].shape) != (self.num_envs, d):
                raise SpecError(f"group '{g}' has shape {tuple(out[g].shape)}, declared ({self.num_envs}, {d})")
        return out
