"""The robot base a policy drives: drive kind, footprint and limits (the contract's ``base`` section).

A base is a file: ``navcontract/bases/<name>.yaml`` for the presets the project ships (the holonomic
disc, a TurtleBot-class and a Jackal-class differential drive), or any YAML file of the same keys a
user writes for their own base. Every key is required and no other is accepted:

- ``drive``: ``holonomic`` (commands ``[vx, vy, wz]``) or ``diff_drive`` (commands ``[v, 0, wz]``:
  no sideways motion; the policy's action is ``(v, w)``);
- ``radius`` [m]: the disc about ``base_link`` that covers the footprint (guard, planner, rewards,
  world generation);
- ``v_forward``, ``v_backward``, ``v_lateral`` [m/s]: speed limits, each ``>= 0`` (``v_forward > 0``);
  ``v_lateral`` is 0 for a diff-drive base;
- ``limit_planar_speed``: holonomic only, also scale ``(vx, vy)`` down so that ``|v| <= v_forward``;
- ``omega_max`` [rad/s]: yaw-rate limit;
- ``accel_linear`` [m/s^2], ``accel_angular`` [rad/s^2]: what the base can do.

Training records the base in the bundle's contract; the fingerprint covers it, and the robot side
maps the action, publishes commands and checks its own declared base by it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

SECTION = "base"
"""The contract key of this section."""

HOLONOMIC = "holonomic"
DIFF_DRIVE = "diff_drive"
DRIVES = (HOLONOMIC, DIFF_DRIVE)

PRESET_DIR = Path(__file__).with_name("bases")
"""The presets the project ships, one YAML file per base."""

DEFAULT_BASE = "holonomic_disc"


class BaseError(ValueError):
    """A base description (a preset file, a config, a contract section) is unusable; the message says
    which key and why."""


@dataclass(frozen=True)
class BaseSpec:
    """One robot base; see the module docstring for the keys. Build with :meth:`checked`."""

    name: str
    drive: str
    radius: float
    v_forward: float
    v_backward: float
    v_lateral: float
    limit_planar_speed: bool
    omega_max: float
    accel_linear: float
    accel_angular: float

    @property
    def holonomic(self) -> bool:
        return self.drive == HOLONOMIC

    @property
    def action_dim(self) -> int:
        """Numbers the policy outputs: 3 (``vx, vy, wz``) holonomic, 2 (``v, wz``) diff drive."""
        return 3 if self.holonomic else 2

    @property
    def v_max(self) -> float:
        """The largest speed along any body axis (what observations of velocity are scaled by)."""
        return max(self.v_forward, self.v_backward, self.v_lateral)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The keys of a base file (``name`` comes from the file name, or is given)."""
        return tuple(f.name for f in fields(cls) if f.name != "name")

    @classmethod
    def checked(cls, data: Mapping[str, Any], name: str, where: str = "base") -> BaseSpec:
        """``data`` (the keys of :meth:`keys`, optionally ``name``) as a BaseSpec; :class:`BaseError`
        naming ``where.key`` for an unknown, missing or unusable value."""
        if not isinstance(data, Mapping):
            raise BaseError(f"{where} must be a mapping of {', '.join(cls.keys())}, got {type(data).__name__}")
        values = dict(data)
        name = str(values.pop("name", name))
        unknown = sorted(set(values) - set(cls.keys()))
        if unknown:
            raise BaseError(f"{where}: unknown key {unknown[0]!r} (a base has {', '.join(cls.keys())})")
        missing = [k for k in cls.keys() if k not in values]
        if missing:
            raise BaseError(f"{where}: missing key {missing[0]!r}")
        if values["drive"] not in DRIVES:
            raise BaseError(f"{where}.drive must be one of {', '.join(DRIVES)}, got {values['drive']!r}")
        if not isinstance(values["limit_planar_speed"], bool):
            raise BaseError(f"{where}.limit_planar_speed must be true or false, got {values['limit_planar_speed']!r}")
        numbers = {
            k: _number(f"{where}.{k}", values[k]) for k in cls.keys() if k not in ("drive", "limit_planar_speed")
        }
        for k in ("radius", "v_forward", "omega_max", "accel_linear", "accel_angular"):
            if numbers[k] <= 0:
                raise BaseError(f"{where}.{k} must be > 0, got {values[k]!r}")
        for k in ("v_backward", "v_lateral"):
            if numbers[k] < 0:
                raise BaseError(f"{where}.{k} must be >= 0, got {values[k]!r}")
        if values["drive"] == DIFF_DRIVE and (numbers["v_lateral"] != 0 or values["limit_planar_speed"]):
            raise BaseError(f"{where}: a diff_drive base has v_lateral 0 and limit_planar_speed false")
        return cls(name=name, drive=values["drive"], limit_planar_speed=values["limit_planar_speed"], **numbers)


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BaseError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def preset_names() -> list[str]:
    """The names of the shipped presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_base(name_or_path: str | Path) -> BaseSpec:
    """A shipped preset by name (``jackal``) or a base file by path (``my_robot.yaml``)."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith((".yaml", ".yml")) or path.is_file()):
        path = PRESET_DIR / f"{text}.yaml"
        if not path.is_file():
            raise BaseError(f"no base named {text!r} (presets: {', '.join(preset_names())}; or give a .yaml path)")
    if not path.is_file():
        raise BaseError(f"base file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise BaseError(f"base file {path}: not YAML ({err})") from None
    return BaseSpec.checked(data, name=path.stem, where=str(path))
