"""How the robot's base must answer a command for the policy to behave as trained: the contract's
``robot_response`` section. The training side fills it in from its randomisation
(``navsim.contract_objects.robot_response``) through :meth:`RobotResponse.checked`.

Training may randomise how the simulated base responds (``randomization.terms``): a first-order
actuator lag (``actuator_lag.params.tau`` [s]), acceleration limits (``accel_limit.params.linear``
[m/s^2], ``.angular`` [rad/s^2]), and delays in whole physics substeps (``command_latency``,
``observation_latency``, ``control_jitter``: ``params.substeps``). Each is a range ``[lo, hi]``
drawn per episode; a policy trained on it tolerates any base inside it. The section states:

- ``accel_limit``: the acceleration the node's velocity smoother enforces by default, the most
  restrictive trained value (the low end of each ``accel_limit`` range); null when not trained;
- ``latency_budget`` [s]: the largest total delay the policy saw, (command + observation + jitter
  substeps at their high ends) x the physics substep; 0 when none was trained;
- ``actuator_tau`` [s]: the trained actuator time constant range, null when not trained;
- ``randomized``: whether training randomised the base at all;
- ``terms``: the randomisation terms that were on, sorted by name.

The section is not part of the observation fingerprint: it does not change the 78 numbers the
policy reads, it describes the base they came from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

SECTION = "robot_response"
"""The contract key of this section."""

Range = tuple[float, float]
StepRange = tuple[int, int]
T = TypeVar("T")


class ResponseError(ValueError):
    """The values of a robot_response section (from training or from a contract) are unusable."""


def _range(where: str, value: Any, *, positive: bool = False) -> Range:
    """``[lo, hi]`` (or one number for both) as finite floats with 0 <= lo <= hi (0 < lo if positive)."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    if len(items) == 1:
        items = items * 2
    if len(items) != 2 or any(isinstance(v, bool) or not isinstance(v, int | float) for v in items):
        raise ResponseError(f"{where} must be a number or [lo, hi], got {value!r}")
    lo, hi = (float(v) for v in items)
    low_ok = lo > 0 if positive else lo >= 0
    if not (math.isfinite(lo) and math.isfinite(hi) and low_ok and lo <= hi):
        bound = "0 < lo" if positive else "0 <= lo"
        raise ResponseError(f"{where} must be finite with {bound} <= hi, got {value!r}")
    return lo, hi


def _steps(where: str, value: Any) -> StepRange:
    lo, hi = _range(where, value)
    if lo != int(lo) or hi != int(hi):
        raise ResponseError(f"{where} must be whole substeps, got {value!r}")
    return int(lo), int(hi)


def _optional(value: Any, parse: Callable[[str, Any], T], where: str) -> T | None:
    """``parse(where, value)``, or None for a null value (a term that was not trained)."""
    return None if value is None else parse(where, value)


@dataclass(frozen=True)
class RobotResponse:
    """The parsed section. Ranges are (lo, hi); None where the term was not trained."""

    randomized: bool
    physics_substep: float  # [s] the physics timestep of training (control period / substeps)
    terms: tuple[str, ...] = ()  # the randomisation terms that were on, sorted by name
    accel_linear: Range | None = None  # [m/s^2] trained range, per linear axis
    accel_angular: Range | None = None  # [rad/s^2] trained range
    actuator_tau: Range | None = None  # [s]
    command_latency: StepRange | None = None  # [substeps]
    observation_latency: StepRange | None = None
    control_jitter: StepRange | None = None

    # ------------------------------------------------------------------ derived numbers
    @property
    def accel_limit_linear(self) -> float | None:
        """[m/s^2] the smoother's default: the most restrictive trained limit (None: not trained)."""
        return None if self.accel_linear is None else self.accel_linear[0]

    @property
    def accel_limit_angular(self) -> float | None:
        """[rad/s^2] likewise for the yaw rate."""
        return None if self.accel_angular is None else self.accel_angular[0]

    @property
    def latency_budget(self) -> float:
        """[s] the largest total delay seen in training: the high ends of the three delay terms."""
        steps = sum(r[1] for r in (self.command_latency, self.observation_latency, self.control_jitter) if r)
        return steps * self.physics_substep

    # ------------------------------------------------------------------ construction
    @classmethod
    def checked(
        cls,
        randomized: Any,
        physics_substep: tuple[Any, str],
        terms: Iterable[str] = (),
        ranges: Mapping[str, tuple[Any, str]] | None = None,
    ) -> RobotResponse:
        """A RobotResponse from unchecked values, each paired with the ``where`` that errors name:
        ``randomized`` true or false; ``physics_substep`` one finite number > 0; ``ranges`` maps a
        range field (:data:`RANGE_FIELDS`) to ``(value, where)``, value None (not trained), one
        number or ``[lo, hi]`` with finite ``0 <= lo <= hi`` (``0 < lo`` for the accelerations,
        whole numbers for the substeps); a field left out is None. ResponseError if unusable."""
        ranges = dict(ranges or {})
        unknown = sorted(set(ranges) - set(RANGE_FIELDS))
        if unknown:
            raise ResponseError(f"unknown range field(s) {', '.join(unknown)} (known: {', '.join(RANGE_FIELDS)})")
        substep, substep_where = physics_substep
        parsed = {
            name: _optional(ranges[name][0], RANGE_FIELDS[name], ranges[name][1])
            for name in RANGE_FIELDS
            if name in ranges
        }
        return cls(
            randomized=_bool(f"{SECTION}.randomized", randomized),
            physics_substep=_number(substep_where, substep),
            terms=tuple(str(t) for t in terms),
            **parsed,
        )

    def to_dict(self) -> dict[str, Any]:
        """The contract section as plain JSON data."""

        def rng(r: tuple[float, float] | None) -> list[float] | None:
            return None if r is None else [r[0], r[1]]

        return {
            "randomized": self.randomized,
            "terms": list(self.terms),
            "physics_substep": self.physics_substep,
            "accel_limit": {"linear": self.accel_limit_linear, "angular": self.accel_limit_angular},
            "accel_limit_trained": {"linear": rng(self.accel_linear), "angular": rng(self.accel_angular)},
            "actuator_tau": rng(self.actuator_tau),
            "latency_budget": self.latency_budget,
            "latency_substeps": {
                "command": rng(self.command_latency),
                "observation": rng(self.observation_latency),
                "jitter": rng(self.control_jitter),
            },
            "units": "accel_limit m/s^2 (linear, per axis) and rad/s^2 (angular); actuator_tau, latency_budget, "
            "physics_substep s; latency_substeps in physics substeps",
            "smoother": "navdeploy.smoother: per axis |v - v_prev| <= accel_limit * dt from the last sent "
            "command; never applied to a stop",
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RobotResponse:
        """Parse and check a contract section: every number finite and in range, and the derived
        numbers (``accel_limit``, ``latency_budget``) equal to what the ranges give."""
        if not isinstance(data, Mapping):
            raise ResponseError(f"{SECTION} must be a mapping, got {type(data).__name__}")
        try:
            trained = data["accel_limit_trained"]
            latency = data["latency_substeps"]
            resp = cls.checked(
                data["randomized"],
                (data["physics_substep"], f"{SECTION}.physics_substep"),
                data["terms"],
                {
                    "accel_linear": (trained["linear"], f"{SECTION}.accel_limit_trained.linear"),
                    "accel_angular": (trained["angular"], f"{SECTION}.accel_limit_trained.angular"),
                    "actuator_tau": (data["actuator_tau"], f"{SECTION}.actuator_tau"),
                    "command_latency": (latency["command"], f"{SECTION}.latency_substeps.command"),
                    "observation_latency": (latency["observation"], f"{SECTION}.latency_substeps.observation"),
                    "control_jitter": (latency["jitter"], f"{SECTION}.latency_substeps.jitter"),
                },
            )
            stated = data["accel_limit"]
            pairs = (
                ("accel_limit.linear", stated["linear"], resp.accel_limit_linear),
                ("accel_limit.angular", stated["angular"], resp.accel_limit_angular),
                ("latency_budget", data["latency_budget"], resp.latency_budget),
            )
        except (KeyError, TypeError) as exc:
            raise ResponseError(f"malformed {SECTION}: {type(exc).__name__}: {exc}") from None
        for name, given, want in pairs:
            same = (given is None and want is None) or (
                given is not None
                and want is not None
                and not isinstance(given, bool)
                and isinstance(given, int | float)
                and math.isclose(float(given), want, rel_tol=1e-9, abs_tol=1e-12)
            )
            if not same:
                raise ResponseError(f"contract {SECTION}.{name} = {given!r} disagrees with its own ranges ({want!r})")
        return resp

    def describe(self) -> str:
        """One line for logs."""
        if not self.randomized:
            return "trained without randomisation of the base's response (no acceleration limit, no latency)"

        def rng(r: tuple[float, float] | None, unit: str) -> str:
            return "not trained" if r is None else f"{r[0]:g}-{r[1]:g} {unit}"

        return (
            f"trained with accel {rng(self.accel_linear, 'm/s^2')} linear, {rng(self.accel_angular, 'rad/s^2')} "
            f"angular, actuator tau {rng(self.actuator_tau, 's')}, latency budget {self.latency_budget:g} s"
        )


def _pos_range(where: str, value: Any) -> Range:
    return _range(where, value, positive=True)


def _number(where: str, value: Any) -> float:
    """A single finite number > 0."""
    if isinstance(value, list | tuple):
        raise ResponseError(f"{where} must be one number, got {value!r}")
    return _range(where, value, positive=True)[0]


def _bool(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ResponseError(f"{where} must be true or false, got {value!r}")
    return value


RANGE_FIELDS: dict[str, Callable[[str, Any], Any]] = {
    "accel_linear": _pos_range,
    "accel_angular": _pos_range,
    "actuator_tau": _range,
    "command_latency": _steps,
    "observation_latency": _steps,
    "control_jitter": _steps,
}
"""The range fields of :class:`RobotResponse` and the parser that checks each."""
