"""The bag tools set the policy node's parameters from the node's own table (navdeploy.node_params):
the same names and defaults, the same resolved settings, and a fixed command line for recordings."""

from __future__ import annotations

from navbags.reference import NodeParams as BagParams
from navdeploy.node_params import PARAM, NodeParams
from navdeploy.runtime import PolicyRuntime
from navdeploy.settings import resolve_settings
from support.paths import FIXTURE_BUNDLE


def test_bag_tools_set_the_same_parameters_with_the_same_defaults() -> None:
    assert issubclass(BagParams, NodeParams) and BagParams.stale_timeout == PARAM["stale_timeout"].default
    assert BagParams().ros_params() == {
        "stale_timeout": 0.5,
        "odom_frame": "odom",
        "control_period": 0.0,
        "goal_tolerance": 0.0,
        "scan_map": True,
    }
    given = BagParams(v_max=1.0, static_goal_frames="map 1 2 0", scan_map=False, fill="max_range")
    assert given.ros_params() == {
        "stale_timeout": 0.5,
        "odom_frame": "odom",
        "control_period": 0.0,
        "goal_tolerance": 0.0,
        "scan_map": False,
        "v_max": 1.0,
        "fill": "max_range",
        "static_goal_frames": "map 1 2 0",
    }
    contract = PolicyRuntime.load(FIXTURE_BUNDLE).contract
    assert resolve_settings(contract, BagParams())[0] == resolve_settings(contract)[0]
