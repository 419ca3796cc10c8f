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
        "scan_map_worker": False,
        "clock_timeout": 60.0,
    }
    given = BagParams(v_max=1.0, static_goal_frames="map 1 2 0", scan_map=False, fill="max_range")
    assert given.ros_params() == {
        "stale_timeout": 0.5,
        "odom_frame": "odom",
        "control_period": 0.0,
        "goal_tolerance": 0.0,
        "scan_map": False,
        "scan_map_worker": False,
        "v_max": 1.0,
        "clock_timeout": 60.0,
        "fill": "max_range",
        "static_goal_frames": "map 1 2 0",
    }
    contract = PolicyRuntime.load(FIXTURE_BUNDLE).contract
    assert (
        resolve_settings(contract, BagParams())[0]
        == resolve_settings(contract, NodeParams(scan_map_worker=False, clock_timeout=60.0))[0]
    )


def test_bag_tools_run_the_scan_map_inline() -> None:
    """The node under replay and recording plans on its scan map inline, as the offline reference
    does, so both give the same sub-goal at every tick; the node's own default is the worker."""
    assert PARAM["scan_map_worker"].default is True
    assert BagParams().scan_map_worker is False and BagParams().ros_params()["scan_map_worker"] is False
    contract = PolicyRuntime.load(FIXTURE_BUNDLE).contract
    assert not resolve_settings(contract, BagParams())[0].scan_map_worker
    assert resolve_settings(contract)[0].scan_map_worker


def test_bag_tools_keep_the_clock_watchdog_out_of_the_comparison() -> None:
    """A replay holds /clock while it waits for each command: the node's wall-time watchdog must not
    fire (its zero would restart the velocity smoother, which the reference cannot know)."""
    assert PARAM["clock_timeout"].default == 1.0 and BagParams().clock_timeout == PARAM["clock_timeout"].hi == 60.0
    assert BagParams().ros_params()["clock_timeout"] == 60.0
    assert BagParams(clock_timeout=0.02).ros_params()["clock_timeout"] == 0.02
