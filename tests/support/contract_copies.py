"""A bundle's two copies of its contract, read and written by hand: the ONNX model's metadata
(``navcontract.bundle.METADATA_KEY`` and ``FINGERPRINT_KEY``) and contract.json beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx

from navcontract.bundle import CONTRACT_FILE, FINGERPRINT_KEY, METADATA_KEY, ONNX_FILE


def onnx_metadata(bdir: Path) -> dict[str, str]:
    """The metadata properties of the bundle's ONNX model, key -> value."""
    model = onnx.load(str(bdir / ONNX_FILE))
    return {p.key: p.value for p in model.metadata_props}


def write_contract_copies(bdir: Path, data: dict[str, Any], *, onnx_copy: bool = True, beside: bool = True) -> None:
    """``data`` as the bundle's contract: in the ONNX metadata (contract and fingerprint, the other
    properties kept) and/or contract.json."""
    if onnx_copy:
        model = onnx.load(str(bdir / ONNX_FILE))
        props = {p.key: p.value for p in model.metadata_props}
        props.update({METADATA_KEY: json.dumps(data, sort_keys=True), FINGERPRINT_KEY: data["fingerprint"]})
        onnx.helper.set_model_props(model, props)
        onnx.save_model(model, str(bdir / ONNX_FILE))
    if beside:
        (bdir / CONTRACT_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
