"""conf/nav.yaml restates the defaults, value by value: the typed dataclasses of navsim.config (and,
for the observation terms, their registries) are the one place they live. The robot's fields come
from its base file: conf/nav.yaml names the base, and the default fields are that preset's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from navcontract.base import load_base
from navcontract.terms import DEFAULT_POLICY_TERMS_ENABLED, DEPLOYABLE_TERMS
from navsim.config import NavConfig, RobotCfg
from navsim.config_load import DEFAULT_CONFIG, to_dict
from navsim.contract_objects import robot_fields
from navsim.observations import SIM_ONLY_TERMS

STATED = yaml.safe_load(DEFAULT_CONFIG.read_text())
DEFAULTS = to_dict(NavConfig())
BASE_FIELDS = {("env", "robot", k) for k in to_dict(RobotCfg()) if k != "base"}
"""The robot fields the base file gives (conf/nav.yaml names the base only)."""


def leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (path, value) of plain data whose value is not a mapping (an empty mapping is a leaf)."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, (*path, str(key)))
    else:
        yield path, node


def observation_default(path: tuple[str, ...]) -> Any:
    """``observations.<group>.<term>.enabled`` or ``.params.<name>``: the term registries' default."""
    group, term, key = path[1], path[2], path[3]
    registry = DEPLOYABLE_TERMS if group == "policy" else SIM_ONLY_TERMS
    if key == "enabled":
        return DEFAULT_POLICY_TERMS_ENABLED[term] if group == "policy" else True
    return registry[term].default_params[path[4]]


def default_at(path: tuple[str, ...]) -> Any:
    if path[:1] == ("observations",) and len(path) > 3:
        return observation_default(path)
    node: Any = DEFAULTS
    for key in path:
        if not isinstance(node, dict) or key not in node:
            raise KeyError(".".join(path))
        node = node[key]
    return node


@pytest.mark.parametrize("path, value", list(leaves(STATED)), ids=lambda p: ".".join(p) if isinstance(p, tuple) else "")
def test_every_value_the_yaml_states_is_the_typed_default(path: tuple[str, ...], value: Any) -> None:
    default = default_at(path)
    assert value == default, f"conf/nav.yaml states {'.'.join(path)} = {value!r}, the default is {default!r}"
    assert isinstance(value, bool) == isinstance(default, bool), ".".join(path)


def test_the_yaml_states_every_default() -> None:
    """Every default but a term's ``enabled: true`` and a term's empty params."""
    stated = {p for p, _ in leaves(STATED)}
    unstated = [
        ".".join(p)
        for p, v in leaves(DEFAULTS)
        if p not in stated
        and p not in BASE_FIELDS
        and p[:1] != ("observations",)
        and not (p[-1] == "enabled" and v is True)
        and v != {}
    ]
    assert not unstated, f"conf/nav.yaml leaves out {unstated}"
    groups = STATED["observations"]
    assert list(groups["policy"]) == list(DEPLOYABLE_TERMS)
    assert list(groups["privileged"]) == list(SIM_ONLY_TERMS)


def test_the_default_robot_is_the_preset_the_yaml_names() -> None:
    """RobotCfg's defaults are the values of the base file conf/nav.yaml names, field by field."""
    name = STATED["env"]["robot"]["base"]
    assert name == RobotCfg().base
    assert {k: v for k, v in to_dict(RobotCfg()).items() if k != "base"} == robot_fields(load_base(name))
    assert {p for p, _ in leaves(STATED) if p[:2] == ("env", "robot")} == {("env", "robot", "base")}
