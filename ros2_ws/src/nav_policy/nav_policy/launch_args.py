"""The launch files' arguments, read and checked before any node starts.

Both launch files read their arguments in an ``OpaqueFunction`` (``context.launch_configurations``)
through these readers and build the nodes from the checked values. A wrong value raises
:class:`LaunchArgumentError`, whose one-line message names the argument, the value given and what
the argument accepts; ``ros2 launch`` prints it as ``[ERROR] [launch]: Caught exception in launch
(see debug for traceback): launch argument num_episodes:=abc ...`` and exits 1, before any node runs.

Booleans read as launch reads a bool ``ParameterValue`` (``launch.utilities.type_utils
.coerce_to_type``, Iron and later): ``1`` / ``0``, else YAML's booleans (``true``, ``False``,
``TRUE``, ``yes``, ``off``, ...). Light on purpose: the standard library and yaml only (the launch
process imports this), the driver names from the node's parameter table when asked for.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

_TOPIC_TOKEN = re.compile(r"^[A-Za-z_~{][A-Za-z0-9_{}]*$")

POLICY_ARGUMENTS = {
    "bundle": (
        "",
        "policy bundle folder (policy.onnx + contract.json); default: the params file's bundle_path, "
        "else $NAV_POLICY_BUNDLE, else the bundle installed with nav_policy for robot_base (jackal), "
        "else the installed default",
    ),
    "controller": ("policy", "policy | dwa (dynamic-window baseline)"),
}
"""The policy node's launch arguments both launch files declare alike: name -> (default, description)."""


class LaunchArgumentError(ValueError):
    """A launch argument with a value its launch file does not accept (one line)."""


def _refuse(name: str, text: str, accepts: str) -> LaunchArgumentError:
    return LaunchArgumentError(f"launch argument {name}:={text!r} is not accepted: {name} takes {accepts}")


def as_bool(name: str, text: str) -> bool:
    """``1`` / ``0`` or a YAML boolean, as launch coerces a bool parameter value."""
    value = {"1": "true", "0": "false"}.get(text.strip(), text)
    try:
        out = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError:
        out = None
    if isinstance(out, bool):
        return out
    raise _refuse(name, text, "true or false (also 1 / 0)")


def as_int(name: str, text: str, lo: int = 0, meaning: str = "") -> int:
    """A whole number >= ``lo``."""
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or value < lo:
        raise _refuse(name, text, f"a whole number >= {lo}{meaning}")
    return value


def as_float(name: str, text: str, lo: float, hi: float, *, lo_open: bool = False, meaning: str = "") -> float:
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    below = value <= lo if lo_open else value < lo
    if not math.isfinite(value) or below or value > hi:
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
        raise _refuse(name, text, f"a number in {rng}{meaning}")
    return value


def as_choice(name: str, text: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise _refuse(name, text, "one of " + " | ".join(choices))
    return text


def controller(text: str, name: str = "controller") -> str:
    """The driver behind the command gate: the choices of the node's ``controller`` parameter."""
    from navdeploy.node_params import PARAM

    return as_choice(name, text, PARAM["controller"].choices)


def robot_base(text: str, name: str = "robot_base") -> str:
    """The base the robot is (the node's ``robot_base`` parameter): ``""`` (the bundle's, unchecked), a
    preset name or a base YAML file that reads as a base (``navcontract.base.load_base``). ``~`` is
    expanded in a path. Whether the bundle's base matches is the node's check at startup."""
    if not text:
        return ""
    from navcontract.base import BaseError, load_base, preset_names

    value = os.path.expanduser(text) if text.endswith((".yaml", ".yml")) else text
    try:
        load_base(value)
    except BaseError as exc:
        raise _refuse(name, text, f"a preset ({' | '.join(preset_names())}) or a base YAML file ({exc})") from None
    return value


def bundle(text: str, name: str = "bundle") -> str:
    """A bundle folder (policy.onnx inside); ``""``: none given (the node takes $NAV_POLICY_BUNDLE,
    else the installed default bundle). ``~`` is expanded."""
    if not text:
        return ""
    path = Path(os.path.expanduser(text))
    if not path.is_dir():
        why = "no such folder" if not path.exists() else "not a folder"
        raise LaunchArgumentError(
            f"launch argument {name}:={text!r} is not accepted: {why}; {name} takes a policy bundle folder "
            "(policy.onnx + contract.json), or leave it out for $NAV_POLICY_BUNDLE, else the installed default"
        )
    if not (path / "policy.onnx").is_file():
        raise LaunchArgumentError(
            f"launch argument {name}:={text!r} is not accepted: the folder holds no policy.onnx; {name} takes a "
            "policy bundle folder (policy.onnx + contract.json)"
        )
    return str(path)


def params_file(name: str, text: str) -> str:
    """An existing ROS 2 parameters YAML file."""
    path = Path(os.path.expanduser(text))
    if not path.is_file():
        why = "no such file" if not path.exists() else "not a file"
        raise LaunchArgumentError(
            f"launch argument {name}:={text!r} is not accepted: {why}; {name} takes a ROS 2 parameters YAML file"
        )
    return str(path)


def topic(name: str, text: str) -> str:
    """A ROS topic name (as rcl validates it: tokens of letters, digits and _ separated by /, none
    starting with a digit, no empty token, not ending in /; ``~`` and ``{sub}`` allowed)."""
    body = text[1:] if text.startswith("/") else text
    tokens = body.split("/")
    if not text or text.endswith("/") or not all(_TOPIC_TOKEN.match(t) for t in tokens):
        raise _refuse(
            name,
            text,
            "a ROS topic name such as /scan (letters, digits and _ between /, no part starting with a digit)",
        )
    return text


def declarations(declare: Callable[..., object], arguments: Mapping[str, tuple[str, str | None]]) -> list[object]:
    """A launch file's arguments declared in table order: ``arguments`` maps name -> (default,
    description); ``declare`` is launch's ``DeclareLaunchArgument``. A description of None declares
    the argument without one."""
    return [
        declare(name, default_value=default) if text is None else declare(name, default_value=default, description=text)
        for name, (default, text) in arguments.items()
    ]


def stamped(a: Mapping[str, str]) -> dict[str, bool]:
    """``enable_stamped_cmd_vel`` as a node parameter when the argument is given; ``{}`` (the node's
    params file's) when it is empty."""
    text = a["enable_stamped_cmd_vel"]
    return {"enable_stamped_cmd_vel": as_bool("enable_stamped_cmd_vel", text)} if text else {}


def policy_params(a: Mapping[str, str], parameter_value: Callable[..., object]) -> dict[str, object]:
    """The policy node's parameters from the launch arguments ``a`` (:data:`POLICY_ARGUMENTS`,
    ``use_sim_time``, ``robot_base`` and ``enable_stamped_cmd_vel``): ``controller``,
    ``use_sim_time`` and, each when its argument is given, ``bundle_path``, ``robot_base`` and
    ``enable_stamped_cmd_vel``. ``parameter_value`` is launch_ros's ``ParameterValue``: the text
    values go as strings, never YAML-parsed."""
    params = {
        "controller": parameter_value(controller(a["controller"]), value_type=str),
        "use_sim_time": as_bool("use_sim_time", a["use_sim_time"]),
    }
    path = bundle(a["bundle"])
    if path:
        params["bundle_path"] = parameter_value(path, value_type=str)
    if a["robot_base"]:
        params["robot_base"] = parameter_value(robot_base(a["robot_base"]), value_type=str)
    return {**params, **stamped(a)}


def configurations(context) -> Mapping[str, str]:
    """The launch arguments' values of a launch ``context`` (declared defaults filled in)."""
    return context.launch_configurations
