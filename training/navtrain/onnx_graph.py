"""Writing a deployment bundle: the normalised actor MLP as one ONNX graph, plus ``contract.json``.

The training side's half of the bundle format (it needs the ``onnx`` package); the robot side only
reads bundles (:mod:`navcontract.bundle`, onnxruntime). The graph is raw observation -> normaliser
(``(obs - mean) / (std + eps)``, as the training normaliser computes it) -> MLP -> raw mean action,
with the contract in the model metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from navcontract.bundle import (
    ACTIVATIONS,
    CONTRACT_FILE,
    FINGERPRINT_KEY,
    INPUT_NAME,
    IR_VERSION,
    METADATA_KEY,
    ONNX_FILE,
    OPSET,
    OUTPUT_NAME,
    BundleError,
    parse_contract,
)


@dataclass(frozen=True)
class MlpWeights:
    """A normalised MLP as plain arrays: ``layers`` are (weight (out, in), bias (out,)) pairs."""

    mean: np.ndarray
    std: np.ndarray
    eps: float
    layers: list[tuple[np.ndarray, np.ndarray]]
    activation: str


def build_onnx(weights: MlpWeights, contract: dict[str, Any]) -> Any:
    """The ONNX ModelProto of the normalised MLP, with the contract in its metadata."""
    act = weights.activation.lower()
    if act not in ACTIVATIONS:
        raise BundleError(f"activation '{weights.activation}' has no ONNX mapping (known: {sorted(ACTIVATIONS)})")
    op, attrs = ACTIVATIONS[act]
    in_dim = int(weights.mean.reshape(-1).shape[0])
    out_dim = int(weights.layers[-1][1].shape[0])
    f32 = np.float32
    inits = [
        numpy_helper.from_array(weights.mean.reshape(1, -1).astype(f32), "norm_mean"),
        # std + eps exactly as torch computes it in float32 at run time.
        numpy_helper.from_array(
            (weights.std.reshape(1, -1).astype(f32) + f32(weights.eps)).astype(f32), "norm_denominator"
        ),
    ]
    nodes = [
        helper.make_node("Sub", [INPUT_NAME, "norm_mean"], ["obs_centred"], name="normalizer_sub"),
        helper.make_node("Div", ["obs_centred", "norm_denominator"], ["h0"], name="normalizer_div"),
    ]
    x = "h0"
    for i, (w, b) in enumerate(weights.layers):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(w, dtype=f32), f"w{i}"))
        inits.append(numpy_helper.from_array(np.ascontiguousarray(b, dtype=f32), f"b{i}"))
        last = i == len(weights.layers) - 1
        y = OUTPUT_NAME if last else f"z{i + 1}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [y], name=f"linear{i}", transB=1))
        if not last:
            nodes.append(helper.make_node(op, [y], [f"h{i + 1}"], name=f"act{i}", **attrs))
            x = f"h{i + 1}"
    graph = helper.make_graph(
        nodes,
        "nav_policy_actor",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", in_dim])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", out_dim])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        producer_name="nav_policy",
        opset_imports=[helper.make_opsetid("", OPSET)],
        doc_string="nav_policy actor: raw obs -> normaliser -> MLP -> raw mean action (before clip/scaling)",
    )
    model.ir_version = IR_VERSION
    helper.set_model_props(
        model, {METADATA_KEY: json.dumps(contract, sort_keys=True), FINGERPRINT_KEY: contract["fingerprint"]}
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def write_bundle(out_dir: str | Path, weights: MlpWeights, contract: dict[str, Any]) -> Path:
    """Write ``policy.onnx`` (self-contained) and ``contract.json``; return the ONNX path."""
    parse_contract(contract)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = build_onnx(weights, contract)
    path = out / ONNX_FILE
    onnx.save_model(model, str(path), save_as_external_data=False)
    onnx.checker.check_model(str(path), full_check=True)
    (out / CONTRACT_FILE).write_text(json.dumps(contract, indent=2, sort_keys=True) + "\n")
    return path
