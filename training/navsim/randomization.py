"""Randomisation registry: what a real base does differently from the simulator, per world per episode.

Each term is registered once (:data:`RANDOMIZATION_TERMS`) with its params; every param has the
value that means "no perturbation" (:attr:`ParamDef.nominal`), its unit and bounds, and its own
rule for "at severity s" (:meth:`ParamDef.at_severity`), which the robustness suite
(``navtrain.robustness``) uses without knowing the terms. The trained ranges, and their defaults,
are the config's (``randomization.terms``, :class:`navsim.config.RandTermsCfg`: one field per
registered term, in registry order); YAML may switch a term off and change its ranges, nothing else.

Sampling happens on the device, for the worlds in a reset mask, from the manager's own
``torch.Generator`` (the room and lidar-noise streams are untouched): a continuous param is
uniform on its range, an integer param (``substeps``) uniform on the integers of its range. A
disabled term draws nothing and keeps its nominal value. The simulator applies the values
(``navsim.actuation`` for the base, ``navsim.scan_faults`` for the lidar, ``navsim.env`` for the
odometry); this module only owns the per-world numbers.

Reading the registry elsewhere (the exporter, the robustness suite):

* :func:`nominal_values` -- ``{term: {param: no-perturbation value}}``;
* :func:`trained_ranges` -- the ranges a config trains with, ``{}`` when randomisation is off;
* ``RANDOMIZATION_TERMS[term].at_severity(ranges, s)`` -- the two values (a random sign picks one
  per world when they differ) that put a term at severity ``s`` of its range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from navsim.config import ConfigError, EnvCfg, RandomizationCfg, Range


@dataclass(frozen=True)
class ParamDef:
    """One randomised quantity.

    ``inverse``: severity is measured on ``1 / value`` (a limit: a smaller limit is more severe,
    and no limit is ``1/value = 0``). ``integer``: values are whole numbers (physics substeps)."""

    name: str
    nominal: float
    unit: str
    lower: float = -math.inf
    upper: float = math.inf
    integer: bool = False
    inverse: bool = False

    def at_severity(self, rng: Range, s: float) -> Range:
        """The two values of this param at severity ``s`` of the trained range ``rng``: ``s = 1``
        is the severe end, ``s = 2`` twice as far from the nominal value (out of distribution).

        A range on both sides of the nominal value gives ``(nominal - m, nominal + m)`` with ``m``
        ``s`` times the larger distance (a random sign per world picks one); a one-sided range
        gives its far end pushed out, twice the same value. Inverse params (limits) scale
        ``1/value``: the low end at ``s = 1``, halved at ``s = 2``."""
        lo, hi = float(rng[0]), float(rng[1])
        n = self.nominal
        if self.inverse:
            v = min(lo, hi) / s
            return v, v
        if lo < n < hi:
            m = s * max(n - lo, hi - n)
            a, b = n - m, n + m
        else:
            end = lo if abs(lo - n) > abs(hi - n) else hi
            a = b = n + s * (end - n)
        if self.integer:
            a, b = float(round(a)), float(round(b))
        return min(max(a, self.lower), self.upper), min(max(b, self.lower), self.upper)


@dataclass(frozen=True)
class RandTermDef:
    name: str
    doc: str
    params: tuple[ParamDef, ...]

    def param(self, name: str) -> ParamDef:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def at_severity(self, ranges: Mapping[str, Range], s: float) -> dict[str, Range]:
        """Every param of the term at severity ``s`` (see :meth:`ParamDef.at_severity`)."""
        return {p.name: p.at_severity(ranges[p.name], s) for p in self.params}


_SUBSTEPS = "physics substeps"
RANDOMIZATION_TERMS: dict[str, RandTermDef] = {
    t.name: t
    for t in [
        RandTermDef(
            "actuator_lag",
            "first-order time constant of the base following its command (same for vx, vy, wz)",
            (ParamDef("tau", 0.0, "s", lower=0.0),),
        ),
        RandTermDef(
            "accel_limit",
            "largest change of the applied command per second, per body axis (vx, vy: linear; wz: angular)",
            (
                ParamDef("linear", math.inf, "m/s^2", lower=1e-6, inverse=True),
                ParamDef("angular", math.inf, "rad/s^2", lower=1e-6, inverse=True),
            ),
        ),
        RandTermDef(
            "command_latency",
            "the command reaches the base this many physics substeps late",
            (ParamDef("substeps", 0.0, _SUBSTEPS, lower=0.0, integer=True),),
        ),
        RandTermDef(
            "observation_latency",
            "the policy's scan and odometry are those of this many substeps before the end of the step",
            (ParamDef("substeps", 0.0, _SUBSTEPS, lower=0.0, integer=True),),
        ),
        RandTermDef(
            "control_jitter",
            "per episode a jitter amplitude J; every control step adds a delay drawn from 0..J substeps",
            (ParamDef("substeps", 0.0, _SUBSTEPS, lower=0.0, integer=True),),
        ),
        RandTermDef(
            "lidar_noise",
            "Gaussian range noise std, replacing env.lidar.noise_std while enabled",
            (ParamDef("std", 0.0, "m", lower=0.0),),
        ),
        RandTermDef(
            "lidar_bias",
            "calibration of the returns: scale * range + offset (no-return beams stay max_range)",
            (ParamDef("offset", 0.0, "m"), ParamDef("scale", 1.0, "", lower=1e-6)),
        ),
        RandTermDef(
            "lidar_dropout",
            "per beam per scan: an invalid reading, filled by the robot's rule for missing sectors",
            (ParamDef("prob", 0.0, "", lower=0.0, upper=1.0),),
        ),
        RandTermDef(
            "lidar_spurious",
            "per beam per scan: a spurious no-return reading (max_range)",
            (ParamDef("prob", 0.0, "", lower=0.0, upper=1.0),),
        ),
        RandTermDef(
            "lidar_yaw",
            "mounting yaw error: the scan is cast from the pose's yaw plus this angle",
            (ParamDef("deg", 0.0, "deg"),),
        ),
        RandTermDef(
            "odom_twist",
            "observed body twist = scale * twist + Gaussian noise (std in m/s and rad/s), per step",
            (
                ParamDef("noise_std", 0.0, "m/s, rad/s", lower=0.0),
                ParamDef("scale", 1.0, ""),
            ),
        ),
    ]
}

DELAY_TERMS = ("command_latency", "observation_latency", "control_jitter")
"""Terms whose maxima add up to a delay, together at most ``env.physics_substeps``."""


def nominal_values() -> dict[str, dict[str, float]]:
    """``{term: {param: value}}`` that means "no perturbation" (inf for limits)."""
    return {name: {p.name: p.nominal for p in t.params} for name, t in RANDOMIZATION_TERMS.items()}


def trained_ranges(rcfg: RandomizationCfg) -> dict[str, dict[str, Range]]:
    """The enabled terms with their ranges, in registry order; ``{}`` when randomisation is off."""
    if not rcfg.enabled:
        return {}
    out = {}
    for name, tdef in RANDOMIZATION_TERMS.items():
        term = rcfg.terms[name]
        if term.enabled:
            out[name] = {p: tuple(term.params[p]) for p in tdef.param_names}
    return out


def validate_randomization_cfg(rcfg: RandomizationCfg, env: EnvCfg) -> None:
    """Ordered ranges inside each param's bounds, whole substeps, and the delays (latencies plus
    jitter) within one control step (the schema already holds only registered terms and params)."""
    if not 0.0 <= rcfg.nominal_share < 1.0:
        raise ConfigError(f"randomization.nominal_share must be in [0, 1), got {rcfg.nominal_share}")
    for name, term in rcfg.terms.items():
        tdef = RANDOMIZATION_TERMS[name]
        for key, rng in term.params.items():
            where = f"randomization.terms.{name}.params.{key}"
            p = tdef.param(key)
            lo, hi = rng
            if not (p.lower <= lo <= hi <= p.upper):
                raise ConfigError(f"{where} must satisfy {p.lower} <= low <= high <= {p.upper}, got [{lo}, {hi}]")
            if p.integer and (lo != int(lo) or hi != int(hi)):
                raise ConfigError(f"{where} counts {p.unit}: whole numbers, got [{lo}, {hi}]")
    ranges = trained_ranges(RandomizationCfg(enabled=True, terms=rcfg.terms))
    total = sum(int(ranges[t]["substeps"][1]) for t in DELAY_TERMS if t in ranges)
    if total > env.physics_substeps:
        raise ConfigError(
            f"randomization: {' + '.join(DELAY_TERMS)} may add up to {total} substeps, more than "
            f"env.physics_substeps ({env.physics_substeps})"
        )


class RandomizationManager:
    """Per-world values of the enabled terms, drawn on the device when worlds reset.

    ``values[term][param]`` is an (N,) float tensor, the nominal value for disabled terms (not
    stored). :meth:`set_severity` switches from sampling the trained ranges to the two-point
    values of :meth:`RandTermDef.at_severity` (the robustness suite)."""

    def __init__(self, rcfg: RandomizationCfg, num_envs: int, device: torch.device | str, seed: int) -> None:
        self.ranges = trained_ranges(rcfg)
        self.active = bool(self.ranges)
        self.nominal_share = float(rcfg.nominal_share)
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(int(seed) + 104_729)
        self.severity: float | None = None
        self._draw = self.ranges
        self.values: dict[str, dict[str, torch.Tensor]] = {
            name: {
                p: torch.full((num_envs,), RANDOMIZATION_TERMS[name].param(p).nominal, device=self.device) for p in r
            }
            for name, r in self.ranges.items()
        }

    def enabled(self, term: str) -> bool:
        return term in self.ranges

    def value(self, term: str, param: str) -> torch.Tensor:
        """(N,) values of ``term``'s ``param`` (enabled terms only)."""
        return self.values[term][param]

    def set_severity(self, s: float | None) -> None:
        """From the next reset on, every enabled term sits at severity ``s`` of its trained range
        (None: sample the trained ranges again)."""
        self.severity = None if s is None else float(s)
        if s is None:
            self._draw = self.ranges
        else:
            self._draw = {name: RANDOMIZATION_TERMS[name].at_severity(r, float(s)) for name, r in self.ranges.items()}

    def sample(self, mask: torch.Tensor) -> None:
        """New values for the worlds in ``mask`` (N,) bool; the others keep theirs. No host sync.
        While sampling the trained ranges, a share ``nominal_share`` of the new episodes gets every
        term at its nominal value (no perturbation); a fixed severity (the suite) applies to all."""
        if self.severity is None and self.nominal_share > 0.0:
            plain = torch.rand(self.num_envs, generator=self.gen, device=self.device) < self.nominal_share
            perturbed = mask & ~plain
        else:
            plain, perturbed = None, mask
        for name, params in self._draw.items():
            tdef = RANDOMIZATION_TERMS[name]
            for pname, (lo, hi) in params.items():
                u = torch.rand(self.num_envs, generator=self.gen, device=self.device)
                if self.severity is not None:
                    new = torch.where(u < 0.5, torch.full_like(u, lo), torch.full_like(u, hi))
                elif tdef.param(pname).integer:
                    new = torch.clamp(torch.floor(lo + u * (hi - lo + 1.0)), max=hi)
                else:
                    new = lo + u * (hi - lo)
                self.values[name][pname] = torch.where(perturbed, new, self.values[name][pname])
                if plain is not None:
                    nominal = torch.full_like(new, tdef.param(pname).nominal)
                    self.values[name][pname] = torch.where(mask & plain, nominal, self.values[name][pname])

    def randint(self, high: torch.Tensor) -> torch.Tensor:
        """(N,) integers uniform on 0..high (per world), from the manager's generator."""
        u = torch.rand(self.num_envs, generator=self.gen, device=self.device)
        return torch.minimum(torch.floor(u * (high + 1.0)), high)

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen, device=self.device)

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen, device=self.device)

    def log(self, worlds: torch.Tensor) -> dict[str, torch.Tensor]:
        """``Randomization/<term>/<param>``: the values drawn for ``worlds`` (indices), one per world
        as the episode entries of ``extras["log"]``; rsl_rl's logger reports their mean."""
        return {
            f"Randomization/{name}/{p}": v[worlds] for name, params in self.values.items() for p, v in params.items()
        }
