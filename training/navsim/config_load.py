"""Loading a :class:`~navsim.config.NavConfig`: YAML files, dotted overrides and stored configs.

Loading walks the plain data and refines the defaults (``NavConfig()``): every key the data names
replaces the default's value, a section refines the default section (a term of ``rewards`` that
states only its weight keeps its default params), and a key that no field declares is an error
naming the key and where it sits (``env.room.num_obstacle``). A mapping of free names (the
families' shares, the observation terms) is replaced as a whole; a mapping of named sections
(``presets``) is refined entry by entry. Dotted overrides (``algorithm.learning_rate=1e-4``) go
through the same checks, and every loaded config is validated (:func:`navsim.config_check.validate`).

Stored configs (a checkpoint's ``infos['nav_config']``, a bundle's ``source.nav_config``) are plain
data written by :func:`to_dict`; :func:`config_from_data` reads them with the rules of
:data:`REMOVED_KEYS`, :data:`MOVED_KEYS` and :data:`STORED_DEFAULTS`.

The robot base (:func:`fill_robot`): ``env.robot.base`` names a preset (``holonomic_disc``,
``turtlebot4``, ``jackal``: ``navcontract/bases``) or a base YAML file, which gives every
``env.robot`` field; the fields the config states refine it (``env.robot.base=jackal
env.robot.radius=0.4``: the Jackal preset with a larger footprint; its contract names the base
``jackal+overrides``). The file's robot section and the dotted overrides are one config, with one
exception: an override of ``env.robot.base`` replaces the file's whole ``env.robot`` section (its
base and the fields it states), so that ``env.robot.base=jackal`` on any config file is the Jackal
preset. For a holonomic base ``v_backward`` and ``v_lateral`` follow a stated ``v_max`` unless they
are stated too (its action has one speed limit). A stored config states every field and is read
without the base file.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from navcontract.base import DEFAULT_BASE, HOLONOMIC, BaseError, load_base
from navsim.config import ConfigError, NavConfig, RobotCfg
from navsim.config_check import validate
from navsim.contract_objects import robot_fields

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO_ROOT / "conf" / "nav.yaml"

ROBOT_PATH = ("env", "robot")
BASE_OVERRIDE = "env.robot.base"
"""The override that replaces a config file's robot section (see the module docstring)."""

REMOVED_KEYS = {
    ("env", "stuck_window"): "the stuck window is rewards.stuck.params.window",
}
"""Keys a stored config may carry that no field declares any more: dropped by
:func:`config_from_data`, an error in YAML and overrides."""

MOVED_KEYS = {
    ("cpu",): ("presets", "cpu"),
}
"""Sections a stored config may carry under another key: moved by :func:`config_from_data`
(where the new key is not stated already), an error in YAML and overrides."""

STORED_DEFAULTS = {
    ("env", "lidar", "rays_per_beam"): 1,
    ("randomization", "enabled"): False,
    ("randomization", "nominal_share"): 0.0,
    ("env", "guard", "enabled"): False,
    ("env", "guard", "slide"): False,
    ("env", "smoother", "enabled"): False,
    ("env", "worlds", "path_clearance"): 0.0,
}
"""Keys a stored config may lack, with the value a config without them stands for (one ray per
beam, at the sector centre; no randomisation; no collision guard; no command smoother before it;
paths as short as feasible):
filled in by :func:`config_from_data` (a missing section is created for them), so that a stored
config is evaluated or exported with the simulator it was trained in, never with the defaults."""


# --------------------------------------------------------------------------------------------
# Building dataclasses from plain data, strictly.


_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
_NO_BASE = object()


def _convert(tp: Any, value: Any, where: str, base: Any = _NO_BASE) -> Any:
    """``value`` as type ``tp``; ``base`` is the default it refines (a dataclass or a mapping of
    dataclasses), absent for plain values."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(base) or dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        if dataclasses.is_dataclass(base):
            return build(type(base), value, where, base)
        return build(tp, value, where)
    if origin is dict:
        return _convert_dict(args[1], value, where, base)
    if origin in (tuple, list):
        return _convert_sequence(tp, value, where)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, where)
    if tp is Any:
        return value
    return _convert_scalar(tp, value, where)


def _convert_dict(value_type: Any, value: Any, where: str, base: Any) -> dict[str, Any]:
    """A mapping; one of named sections (dataclass values) refines ``base`` entry by entry."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    sections = dataclasses.is_dataclass(value_type) and isinstance(base, dict)
    out = copy.deepcopy(base) if sections else {}
    for k, v in value.items():
        below = out.get(str(k), _NO_BASE) if sections else _NO_BASE
        out[str(k)] = _convert(value_type, v, f"{where}.{k}", below)
    return out


def _convert_sequence(tp: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{where}: expected a list, got {value!r}")
    if origin is tuple and args and args[-1] is not Ellipsis:
        if len(value) != len(args):
            raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
    return list(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))


def _convert_scalar(tp: Any, value: Any, where: str) -> Any:
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):
            return float(value)  # PyYAML (YAML 1.1) reads 1e-4 without a dot as a string
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def build(cls: type, data: dict[str, Any], where: str = "", base: Any = None) -> Any:
    """Dataclass ``cls`` from ``data``, refining ``base`` (an instance of ``cls``) where given,
    else its class defaults; unknown keys and missing required ones raise ConfigError naming them."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in names:
            path = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"unknown key '{path}' (known here: {', '.join(sorted(names))})")
    kwargs, missing = {}, []
    for f in dataclasses.fields(cls):
        path = f"{where}.{f.name}" if where else f.name
        below = getattr(base, f.name) if base is not None else _NO_BASE
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], path, below)
        elif base is not None:
            kwargs[f.name] = copy.deepcopy(below)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            missing.append(f.name)
    if missing:
        raise ConfigError(f"'{where or cls.__name__}' needs {', '.join(missing)}")
    return cls(**kwargs)


def to_dict(obj: Any) -> Any:
    """Plain-data view of a config (tuples become lists) for YAML / JSON."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def apply_override(data: dict[str, Any], dotted: str) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to plain config data, in place."""
    if "=" not in dotted:
        raise ConfigError(f"override '{dotted}' must look like key.path=value")
    path, raw = dotted.split("=", 1)
    keys = path.strip().split(".")
    node = data
    for k in keys[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {} if k not in node else node[k]
            if not isinstance(node[k], dict):
                raise ConfigError(f"override '{path}': '{k}' is not a section")
        node = node[k]
    try:
        node[keys[-1]] = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        where = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"override '{dotted}': the value is not valid YAML ({where})") from None


# --------------------------------------------------------------------------------------------
# Entry points.


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> NavConfig:
    """Load ``conf/nav.yaml`` (or ``path``), apply dotted overrides, validate everything."""
    path = Path(path) if path is not None else DEFAULT_CONFIG
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"{path}: not valid YAML{at}: {problem}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    overrides = list(overrides or [])
    if any(ov.partition("=")[0].strip() == BASE_OVERRIDE for ov in overrides):
        robot = _parent(data, (*ROBOT_PATH, "base"))
        if robot is not None:
            robot.clear()  # the overriding base replaces the file's robot section
    for ov in overrides:
        apply_override(data, ov)
    return _built(data, str(path))


def _parent(data: dict[str, Any], path: tuple[str, ...], create: bool = False) -> dict[str, Any] | None:
    """The mapping that holds ``path[-1]`` in plain config data (created with ``create``), or None."""
    node: Any = data
    for key in path[:-1]:
        if not isinstance(node, dict):
            return None
        node = node.setdefault(key, {}) if create else node.get(key)
    return node if isinstance(node, dict) else None


def config_from_data(data: dict[str, Any], where: str = "stored config") -> NavConfig:
    """A stored config (plain data, :func:`to_dict` of a config), validated: keys of
    :data:`REMOVED_KEYS` are dropped, :data:`MOVED_KEYS` moved, :data:`STORED_DEFAULTS` filled in;
    anything else unknown is an error."""
    data = copy.deepcopy(data)
    for path in REMOVED_KEYS:
        section = _parent(data, path)
        if section is not None:
            section.pop(path[-1], None)
    for old, new in MOVED_KEYS.items():
        section = _parent(data, old)
        if section is not None and old[-1] in section:
            value = section.pop(old[-1])
            target = _parent(data, new, create=True)
            if target is not None:
                target.setdefault(new[-1], value)
    for path, value in STORED_DEFAULTS.items():
        section = _parent(data, path, create=True)
        if section is not None:
            section.setdefault(path[-1], value)
    return _built(data, where)


def _built(data: dict[str, Any], where: str) -> NavConfig:
    """The validated NavConfig of plain data; a wrong key or value names ``where`` it came from.
    A reward term's ``weight: null`` stands for its default weight."""
    rewards = data.get("rewards")
    if isinstance(rewards, dict):
        for term in rewards.values():
            if isinstance(term, dict) and "weight" in term and term["weight"] is None:
                del term["weight"]
    try:
        fill_robot(data)
        cfg = build(NavConfig, data, base=NavConfig())
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    validate(cfg)
    return cfg


def fill_robot(data: dict[str, Any]) -> None:
    """Fill the ``env.robot`` fields plain config data does not state from its base file
    (``env.robot.base``, default ``holonomic_disc``), in place; a config stating every field is
    left as it is (the file is not read). ConfigError naming ``env.robot.base`` for an unknown or
    unusable base file."""
    env = data.get("env")
    robot = env.get("robot") if isinstance(env, dict) else None
    if not isinstance(robot, dict):
        return  # no robot section (the defaults, the holonomic disc) or not a mapping (build names it)
    fields = [f.name for f in dataclasses.fields(RobotCfg) if f.name != "base"]
    missing = [k for k in fields if k not in robot]
    if not missing:
        return
    name = robot.get("base", DEFAULT_BASE)
    if not isinstance(name, str):
        raise ConfigError(f"env.robot.base: expected a preset name or a base file path, got {name!r}")
    try:
        given = robot_fields(load_base(name))
    except BaseError as err:
        raise ConfigError(f"env.robot.base: {err}") from None
    drive = robot.get("drive", given["drive"])
    for key in missing:
        follows_v_max = key in ("v_backward", "v_lateral") and drive == HOLONOMIC and "v_max" in robot
        robot[key] = robot["v_max"] if follows_v_max else given[key]
