"""The observation spec of the policy group and its fingerprint.

A spec is the ordered list of enabled DEPLOYABLE terms with their params and widths, plus the
sensor constants they scale by. The same :func:`build_policy_obs` turns an ObsContext into the
policy observation in training (torch) and on the robot (numpy). The fingerprint is a hash of the
spec's canonical JSON: an exported bundle carries it, and the runtime refuses a bundle whose spec
differs from its own, naming the term that differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from navcontract.terms import DEFAULT_POLICY_TERMS_ENABLED, DEPLOYABLE_TERMS, ObsContext, SensorDims
from navcontract.xp import ops_for


class SpecError(ValueError):
    """An observation spec or an observation does not match what was declared."""


@dataclass(frozen=True)
class TermSpec:
    name: str
    width: int
    params: dict[str, Any]
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "width": self.width, "params": self.params, "version": self.version}


@dataclass(frozen=True)
class PolicySpec:
    terms: tuple[TermSpec, ...]
    dims: SensorDims

    @property
    def obs_dim(self) -> int:
        return sum(t.width for t in self.terms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "terms": [t.to_dict() for t in self.terms],
            "obs_dim": self.obs_dim,
            "num_beams": self.dims.num_beams,
            "max_range": self.dims.max_range,
            "v_max": self.dims.v_max,
            "omega_max": self.dims.omega_max,
        }

    def fingerprint(self) -> str:
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def slices(self) -> dict[str, slice]:
        out, start = {}, 0
        for t in self.terms:
            out[t.name] = slice(start, start + t.width)
            start += t.width
        return out


def make_policy_spec(terms: dict[str, dict[str, Any]], dims: SensorDims) -> PolicySpec:
    """Spec from ``{name: params}`` of the enabled terms (missing params take the defaults).

    The order is always the registry's, whatever order ``terms`` lists them in.
    """
    unknown = [n for n in terms if n not in DEPLOYABLE_TERMS]
    if unknown:
        raise SpecError(f"unknown policy observation term(s): {', '.join(unknown)}")
    out = []
    for name, tdef in DEPLOYABLE_TERMS.items():
        if name not in terms:
            continue
        given = dict(terms[name] or {})
        extra = [k for k in given if k not in tdef.default_params]
        if extra:
            raise SpecError(f"term '{name}': unknown param(s) {', '.join(extra)}")
        params = {**tdef.default_params, **given}
        out.append(TermSpec(name, int(tdef.width(params, dims)), params, tdef.version))
    return PolicySpec(tuple(out), dims)


def policy_spec_from_terms(policy: Mapping[str, Any] | None, dims: SensorDims) -> PolicySpec:
    """The spec that a table of policy terms declares: ``{name: {"enabled": bool, "params": {...}}}``.

    Terms in registry order; a term the table does not name takes its registry default
    (:data:`~navcontract.terms.DEFAULT_POLICY_TERMS_ENABLED`, default params); a named term is on
    unless ``enabled: false``, with its ``params`` over the defaults.
    """
    policy = policy or {}
    enabled = {}
    for name in DEPLOYABLE_TERMS:
        term = policy.get(name)
        if term is None:
            on, params = DEFAULT_POLICY_TERMS_ENABLED[name], {}
        else:
            on, params = bool(term.get("enabled", True)), dict(term.get("params") or {})
        if on:
            enabled[name] = params
    unknown = [n for n in policy if n not in DEPLOYABLE_TERMS]
    if unknown:
        raise SpecError(f"unknown policy observation term(s): {', '.join(unknown)}")
    return make_policy_spec(enabled, dims)


def spec_from_dict(data: dict[str, Any]) -> PolicySpec:
    dims = SensorDims(
        num_beams=int(data["num_beams"]),
        max_range=float(data["max_range"]),
        v_max=float(data["v_max"]),
        omega_max=float(data["omega_max"]),
    )
    return PolicySpec(
        tuple(TermSpec(t["name"], int(t["width"]), dict(t["params"]), int(t["version"])) for t in data["terms"]),
        dims,
    )


def compare_specs(expected: PolicySpec, actual: PolicySpec) -> list[str]:
    """Human-readable differences between two specs (empty when they match)."""
    diffs = []
    for key in ("num_beams", "max_range", "v_max", "omega_max"):
        a, b = getattr(expected.dims, key), getattr(actual.dims, key)
        if a != b:
            diffs.append(f"{key}: bundle {a} vs runtime {b}")
    e_names = [t.name for t in expected.terms]
    a_names = [t.name for t in actual.terms]
    if e_names != a_names:
        diffs.append(f"term order/names: bundle {e_names} vs runtime {a_names}")
    for te, ta in zip(expected.terms, actual.terms, strict=False):
        if te.name != ta.name:
            continue
        for key in ("width", "params", "version"):
            if getattr(te, key) != getattr(ta, key):
                diffs.append(f"term '{te.name}' {key}: bundle {getattr(te, key)} vs runtime {getattr(ta, key)}")
    return diffs


def build_policy_obs(ctx: ObsContext, spec: PolicySpec) -> Any:
    """Concatenate the spec's terms in order; every term's width is checked."""
    xp = ops_for(ctx.pose)
    parts = []
    n = ctx.pose.shape[0]
    for t in spec.terms:
        value = DEPLOYABLE_TERMS[t.name].fn(ctx, t.params)
        if tuple(value.shape) != (n, t.width):
            raise SpecError(f"term '{t.name}' returned shape {tuple(value.shape)}, declared ({n}, {t.width})")
        parts.append(xp.as_float(value))
    if not parts:
        return xp.zeros((n, 0), like=ctx.pose)
    return xp.concat(parts, axis=-1)
