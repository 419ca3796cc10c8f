"""Paths of the repository and of the committed fixtures (no third-party imports)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
FIXTURE_BUNDLE = FIXTURES / "bundle"
"""The committed trained bundle (policy.onnx + contract.json) that the fixture bags were recorded with."""
FIXTURE_BAGS = FIXTURES / "bags"
