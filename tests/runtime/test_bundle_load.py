"""What the robot checks when it loads a bundle (issue 11, finding 6): the ONNX graph's inputs and
outputs, and every number of the contract, before the first step, not at the first step.

Bundles here are the committed fixture with one thing changed, written with the ``onnx`` package
(both copies of the contract edited alike, so only the new checks can catch them).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import support.ros as h
from navcontract.bundle import CONTRACT_FILE, METADATA_KEY, ONNX_FILE, BundleError
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime
from navdeploy.settings import resolve_settings


def copy_fixture(tmp: Path) -> Path:
    out = tmp / "bundle"
    shutil.copytree(h.fixture_bundle(), out, ignore=shutil.ignore_patterns("export_check.json"))
    return out


def edit_contract(bdir: Path, edit) -> None:
    """Edit the contract in both copies (the ONNX metadata and contract.json) alike."""
    model = onnx.load(str(bdir / ONNX_FILE))
    prop = next(p for p in model.metadata_props if p.key == METADATA_KEY)
    data = json.loads(prop.value)
    edit(data)
    prop.value = json.dumps(data, sort_keys=True)
    onnx.save_model(model, str(bdir / ONNX_FILE))
    (bdir / CONTRACT_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def edit_graph(bdir: Path, edit) -> None:
    model = onnx.load(str(bdir / ONNX_FILE))
    edit(model.graph)
    onnx.save_model(model, str(bdir / ONNX_FILE))


def test_fixture_bundle_still_loads_unchanged() -> None:
    rt = PolicyRuntime.load(h.fixture_bundle())
    assert rt.contract.fingerprint == "23cb46e4de12b7e0" and rt.contract.v_max == 1.5


def test_onnx_with_two_outputs_is_refused_at_load(tmp_path: Path) -> None:
    bdir = copy_fixture(tmp_path)

    def second_output(g) -> None:
        g.node.append(helper.make_node("Identity", ["action"], ["action_copy"]))
        g.output.append(helper.make_tensor_value_info("action_copy", TensorProto.FLOAT, ["batch", 3]))

    edit_graph(bdir, second_output)
    with pytest.raises(BundleError, match=r"2 output\(s\)"):
        PolicyRuntime.load(bdir)


def test_action_v_max_above_the_trained_limit_is_refused_at_load(tmp_path: Path) -> None:
    """action.v_max 5.0 (both copies) loaded and the runtime returned 5 m/s while the log said 1.5."""
    bdir = copy_fixture(tmp_path)

    def fast(c: dict) -> None:
        c["action"]["v_max"] = 5.0

    edit_contract(bdir, fast)
    with pytest.raises(BundleError, match=r"limits disagree: v_max = 1.5, action.v_max = 5.0"):
        PolicyRuntime.load(bdir)


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda c: c["lidar"].update(num_beams=36), "lidar"),
        (lambda c: c["lidar"].update(max_range=8.0), "max_range"),
        (lambda c: c["lidar"].update(max_range=float("nan")), "max_range"),
        (lambda c: c.update(control_period=0.0), "control_period"),
        (lambda c: c.update(goal_tolerance=-0.3), "goal_tolerance"),
        (lambda c: c.update(omega_max=3.0), "omega_max"),
        (lambda c: c["lidar"].update(trained_fov=7.0), "trained_fov"),
    ],
)
def test_contract_numbers_inconsistent_with_the_spec_are_refused(tmp_path: Path, edit, needle: str) -> None:
    bdir = copy_fixture(tmp_path)
    edit_contract(bdir, edit)
    with pytest.raises(BundleError, match=needle):
        PolicyRuntime.load(bdir)


def test_trained_fov_in_the_contract_sets_the_coverage_reference(tmp_path: Path) -> None:
    bdir = copy_fixture(tmp_path)
    edit_contract(bdir, lambda c: c["lidar"].update(trained_fov=math.radians(270)))
    rt = PolicyRuntime.load(bdir)
    assert rt.contract.trained_fov == pytest.approx(math.radians(270))


def test_smaller_limit_wins_and_the_log_line_says_which() -> None:
    c = PolicyRuntime.load(h.fixture_bundle()).contract
    s, warn = resolve_settings(c, NodeParams(v_max=1.0, omega_max=3.0))
    assert (s.limits.v_max, s.limits.omega_max) == (1.0, 2.0)
    assert "v_max 1 m/s (node parameter, below the bundle's 1.5)" in s.limit_sources
    assert "omega_max 2 rad/s (bundle contract, below node parameter 3)" in s.limit_sources
    assert any("omega_max=3 exceeds" in w for w in warn)
    s, _ = resolve_settings(c)
    assert s.limit_sources[0].startswith("v_max 1.5 m/s (bundle contract")


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"stale_timeout": float("nan")}, "stale_timeout"),
        ({"stale_timeout": float("inf")}, "stale_timeout"),
        ({"clock_timeout": 0.0}, "clock_timeout"),
        ({"v_max": float("inf")}, "v_max"),
        ({"control_period": float("nan")}, "control_period"),
        ({"min_valid_share": 1.5}, "min_valid_share"),
        ({"min_coverage": float("nan")}, "min_coverage"),
        ({"max_fill_gap": 2.5}, "max_fill_gap"),
        ({"fill": "constant", "fill_value": float("inf")}, "fill_value"),
        ({"below_min": "ignore"}, "below_min"),
    ],
)
def test_every_setting_is_finite_and_in_range(kw: dict, needle: str) -> None:
    c = PolicyRuntime.load(h.fixture_bundle()).contract
    with pytest.raises(ValueError, match=needle):
        resolve_settings(c, NodeParams(**kw))
