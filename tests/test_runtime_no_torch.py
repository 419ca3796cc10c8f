"""Issue 4, part 2: the deploy runtime runs on numpy + onnxruntime alone.

In a fresh interpreter that can only see ``deploy/``, import the runtime, load the freshly
exported bundle, build observations and step the policy; ``torch`` (and the training package)
must never appear in ``sys.modules``. A control run that imports torch on purpose proves that the
probe would notice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from test_export import exported_bundle

REPO = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent(
    """
    import json, math, sys
    sys.path[:] = [p for p in sys.path if not p.endswith(("training", "tests"))]
    sys.path.insert(0, {deploy!r})
    if {import_torch}:
        import torch  # noqa: F401  (control run)
    import numpy as np
    from navdeploy.runtime import PolicyRuntime, ScanInput, ScanUnusable
    rt = PolicyRuntime.load({bundle!r})
    rng = np.random.default_rng(0)
    cmds = []
    for k in range(50):
        n = int(rng.integers(200, 1000))
        scan = ScanInput(rng.uniform(0.1, 12.0, n), 0.0, -2 * math.pi / n, 0.05, 12.0)
        cmds.append(rt.step(scan, (0.1 * k, 0.0, 0.2), (0.3, 0.0, 0.1), (3.0, 1.0)).tolist())
    try:
        rt.step(ScanInput([], 0.0, 0.1, 0.0, 1.0), (0, 0, 0), (0, 0, 0), (1, 1))
    except ScanUnusable:
        pass
    print(json.dumps({{
        "torch": "torch" in sys.modules,
        "navsim": any(m == "navsim" or m.startswith("navsim.") for m in sys.modules),
        "cmds": cmds,
    }}))
    """
)


def run_probe(import_torch: bool) -> dict:
    code = PROBE.format(deploy=str(REPO / "deploy"), bundle=str(exported_bundle()), import_torch=import_torch)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO / "deploy", env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_runtime_imports_and_runs_without_torch() -> None:
    result = run_probe(import_torch=False)
    assert result["torch"] is False
    assert result["navsim"] is False
    assert len(result["cmds"]) == 50
    for vx, vy, wz in result["cmds"]:
        assert (vx * vx + vy * vy) ** 0.5 <= 1.5 + 1e-6 and abs(wz) <= 2.0 + 1e-6


def test_probe_notices_torch_when_it_is_imported() -> None:
    assert run_probe(import_torch=True)["torch"] is True
