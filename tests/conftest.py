"""Fixtures every test folder may use; nothing here imports torch, so the robot-side folders
(``contract``, ``runtime``, ``ros`` and ``bags`` without training) run in the robot-only venv.

The folders mirror the installs: ``contract`` (navcontract), ``runtime`` (navdeploy), ``sim``
(navsim), ``train`` (navtrain), ``ros`` (the ROS 2 packages), ``bags`` (navbags). The simulator and
training fixtures live in :mod:`support.simenv` and are registered by the conftests of the folders
that need them; ROS helpers in :mod:`support.ros`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import FIXTURE_BUNDLE


@pytest.fixture(scope="session")
def fixture_bundle() -> Path:
    """The committed trained bundle (policy.onnx + contract.json); fails loudly when absent."""
    ok = (FIXTURE_BUNDLE / "policy.onnx").is_file() and (FIXTURE_BUNDLE / "contract.json").is_file()
    assert ok, f"trained bundle fixture missing: {FIXTURE_BUNDLE} needs policy.onnx + contract.json"
    return FIXTURE_BUNDLE


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests first, each group in collection order: with one worker per core (pytest-xdist)
    the long tests start at once and the short ones fill in around them, so the run does not end
    with one long test running alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
