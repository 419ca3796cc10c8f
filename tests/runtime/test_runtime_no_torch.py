"""The robot runtime runs on numpy + onnxruntime alone, without the training side.

A fresh interpreter installs a meta-path finder that refuses to import torch, mujoco, warp, the
simulator (navsim) or the trainer (navtrain), and any name under them, then imports the runtime,
loads the committed trained bundle, builds observations and steps the policy. An import of a
refused package anywhere on the way would fail the probe with the name. Control runs prove that
the finder is live: with it, importing torch or navsim fails; without it, the same environment
imports them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

BLOCKED = ("torch", "mujoco", "mujoco_warp", "warp", "navsim", "navtrain")

PROBE = textwrap.dedent(
    """
    import importlib.abc, json, math, sys

    BLOCKED = {blocked!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"refused import of {{name}} (the robot runtime must not need it)")
            return None

    if {block}:
        sys.meta_path.insert(0, Refuse())
    for name in {extra_imports!r}:
        __import__(name)

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
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(BLOCKED))
    print(json.dumps({{"loaded": loaded, "cmds": cmds}}))
    """
)


def run_probe(bundle, block: bool = True, extra_imports: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    code = PROBE.format(blocked=BLOCKED, block=block, extra_imports=list(extra_imports), bundle=str(bundle))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def _result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_runtime_loads_and_steps_without_the_training_side(fixture_bundle) -> None:
    result = _result(run_probe(fixture_bundle))
    assert result["loaded"] == []
    assert len(result["cmds"]) == 50
    for vx, vy, wz in result["cmds"]:
        assert (vx * vx + vy * vy) ** 0.5 <= 1.5 + 1e-6 and abs(wz) <= 2.0 + 1e-6
    assert max(abs(v) for cmd in result["cmds"] for v in cmd) > 0.05  # the policy does drive


@pytest.mark.parametrize("name", ["torch", "navsim.config"])
def test_probe_refuses_the_training_side(fixture_bundle, name: str) -> None:
    proc = run_probe(fixture_bundle, extra_imports=(name,))
    assert proc.returncode != 0
    assert f"refused import of {name.split('.')[0]}" in proc.stderr


def test_without_the_finder_the_same_interpreter_imports_them(fixture_bundle) -> None:
    """Control: the refusal above is the finder's doing, not a missing package."""
    result = _result(run_probe(fixture_bundle, block=False, extra_imports=("torch", "navsim.config")))
    assert {"torch", "navsim"} <= set(result["loaded"])
