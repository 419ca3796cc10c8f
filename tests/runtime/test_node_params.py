"""The policy node's parameter table (navdeploy.node_params) and everything built from it.

The table is the one statement of the node's parameters: the committed ``config/policy.yaml`` and
the parameter table of docs/ros2.md must be its renderings, the typed ``NodeParams`` refuses what
the node refuses (one line naming the parameter), and the bag tools' ``NodeParams`` is the same
object with the same defaults (tests/bags/test_bag_node_params.py). That the node declares every parameter of the table is checked on
the running node (tests/ros/test_ros_launch.py: every parameter of the installed policy.yaml is
declared) and its one-line refusals in tests/ros/test_ros_fail_safe.py.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import pytest
import yaml

from navcontract.scan import ScanOptions
from navdeploy import node_params as npm
from navdeploy.node_params import PARAM, PARAMS, NodeParams
from support.paths import REPO

POLICY_YAML = REPO / "ros2_ws" / "src" / "nav_policy" / "config" / "policy.yaml"
ROS2_DOCS = REPO / "docs" / "ros2.md"
REGENERATE = "python -m navdeploy.node_params --yaml ros2_ws/src/nav_policy/config/policy.yaml --docs docs/ros2.md"


def test_committed_policy_yaml_is_the_tables_rendering() -> None:
    assert POLICY_YAML.read_text() == npm.render_yaml(), f"policy.yaml is out of date: run {REGENERATE}"


def test_policy_yaml_reads_back_as_the_defaults_with_their_types() -> None:
    values = yaml.safe_load(npm.render_yaml())["/**"]["ros__parameters"]
    assert list(values) == [p.name for p in PARAMS]
    for p in PARAMS:
        assert type(values[p.name]) is p.type and values[p.name] == p.default, p.name
    assert NodeParams(**values) == NodeParams()


def test_docs_parameter_table_is_the_tables_rendering() -> None:
    section = npm.docs_section(ROS2_DOCS.read_text())
    assert section == npm.render_markdown(), f"docs/ros2.md's parameter table is out of date: run {REGENERATE}"
    rows = [r for r in section.splitlines() if r.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == [p.name for p in PARAMS]


def test_with_docs_section_replaces_only_the_marked_part() -> None:
    text = f"before\n{npm.DOCS_BEGIN}\nold table\n{npm.DOCS_END}\nafter\n"
    out = npm.with_docs_section(text)
    assert out.startswith("before\n") and out.endswith("after\n") and "old table" not in out
    assert npm.docs_section(out) == npm.render_markdown()
    with pytest.raises(ValueError, match="node-params"):
        npm.with_docs_section("no markers here")


def test_every_entry_is_complete() -> None:
    assert len(PARAM) == len(PARAMS), "parameter names are unique"
    for p in PARAMS:
        assert p.type in (str, float, int, bool) and p.doc and "\n" not in p.doc, p.name
        assert type(p.default) is p.type, p.name
        if p.numeric:
            assert p.lo is not None and p.hi is not None and p.lo <= p.default <= p.hi, p.name
            assert p.check(p.default) == p.default
        else:
            assert p.lo is None and p.hi is None and not p.unit, p.name
        if p.choices:
            assert p.default in p.choices, p.name


def test_node_params_is_the_table() -> None:
    assert [(f.name, f.type, f.default) for f in fields(NodeParams)] == [(p.name, p.type, p.default) for p in PARAMS]
    assert NodeParams().changed() == {}
    assert NodeParams(v_max=1, scan_map=False).changed() == {"v_max": 1.0, "scan_map": False}


def test_scan_rules_default_to_the_contracts_defaults() -> None:
    rules = ScanOptions()
    for name in ("fill", "below_min", "min_valid_share", "min_coverage", "max_fill_gap"):
        assert getattr(NodeParams(), name) == getattr(rules, name), name


def test_values_are_typed_on_construction() -> None:
    p = NodeParams(v_max=1, max_fill_gap=3.0)
    assert type(p.v_max) is float and p.v_max == 1.0
    assert type(p.max_fill_gap) is int and p.max_fill_gap == 3
    assert replace(p, v_max=0.5).v_max == 0.5  # replace checks again


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"stale_timeout": math.nan}, "parameter 'stale_timeout' must be finite and in (0, 60], got nan"),
        ({"stale_timeout": 0.0}, "parameter 'stale_timeout' must be finite and in (0, 60], got 0.0"),
        ({"clock_timeout": -1.0}, "parameter 'clock_timeout' must be finite and in (0, 60], got -1.0"),
        ({"v_max": math.inf}, "parameter 'v_max' must be finite and in [0, 100], got inf"),
        ({"min_coverage": 2.0}, "parameter 'min_coverage' must be finite and in [0, 1], got 2.0"),
        ({"max_fill_gap": 1.5}, "parameter 'max_fill_gap' must be a whole number and in [0, 1000], got 1.5"),
        ({"max_accel_linear": -1.0}, "parameter 'max_accel_linear' must be finite and in [0, 10000], got -1.0"),
        ({"path_search_window": True}, "parameter 'path_search_window' must be a number, got True"),
        ({"velocity_smoother": 1}, "parameter 'velocity_smoother' must be true or false, got 1"),
        ({"guard": "yes"}, "parameter 'guard' must be true or false, got 'yes'"),
        ({"odom_frame": 3}, "parameter 'odom_frame' must be a string, got 3"),
    ],
)
def test_unusable_values_are_refused_in_one_line_naming_the_parameter(kw: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        NodeParams(**kw)
    assert str(err.value) == message
