"""scripts/ship_bundle.py: a recipe's finished policy becomes its base's installed bundle, byte for
byte with its provenance, and nothing changes when a file is missing or altered."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from nav_policy.paths import installed_bundles
from support.paths import REPO

SCRIPT = REPO / "scripts" / "ship_bundle.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def policy_folder(tmp_path: Path) -> Path:
    """A copy of the policy folder that the installed Jackal bundle was shipped from."""
    prov = json.loads((installed_bundles()["jackal"] / "PROVENANCE.json").read_text())
    src = REPO / "policies" / prov["name"]
    dest = tmp_path / "policies" / prov["name"]
    dest.mkdir(parents=True)
    shutil.copytree(src / "bundle", dest / "bundle")
    shutil.copyfile(src / "PROVENANCE.json", dest / "PROVENANCE.json")
    return dest


def test_a_recipe_policy_replaces_its_bases_bundle(tmp_path: Path) -> None:
    policy = policy_folder(tmp_path)
    package = tmp_path / "nav_policy"
    (package / "jackal_bundle").mkdir(parents=True)
    (package / "jackal_bundle" / "stale.txt").write_text("from the bundle before")
    out = run(str(policy), "--package-dir", str(package))
    assert out.returncode == 0, out.stderr
    shipped = package / "jackal_bundle"
    prov = json.loads((policy / "PROVENANCE.json").read_text())
    assert sorted(p.name for p in shipped.iterdir()) == sorted([*prov["bundle"]["files"], "PROVENANCE.json"])
    for name in [*prov["bundle"]["files"]]:
        assert (shipped / name).read_bytes() == (policy / "bundle" / name).read_bytes()
    assert (shipped / "PROVENANCE.json").read_bytes() == (policy / "PROVENANCE.json").read_bytes()
    assert [p.name for p in package.iterdir()] == ["jackal_bundle"]  # no staging folder left


def test_an_altered_or_missing_file_changes_nothing(tmp_path: Path) -> None:
    policy = policy_folder(tmp_path)
    package = tmp_path / "nav_policy"
    (package / "jackal_bundle").mkdir(parents=True)
    (package / "jackal_bundle" / "kept.txt").write_text("as it was")
    contract = policy / "bundle" / "contract.json"
    original = contract.read_text()
    contract.write_text(original + " ")
    out = run(str(policy), "--package-dir", str(package))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "contract.json: sha256" in out.stderr
    contract.write_text(original)
    (policy / "bundle" / "policy.onnx").unlink()
    out = run(str(policy), "--package-dir", str(package))
    assert out.returncode == 2 and "policy.onnx: listed in" in out.stderr and "but missing" in out.stderr
    assert [p.name for p in (package / "jackal_bundle").iterdir()] == ["kept.txt"]
    contract.write_text(original + " ")
    out = run(str(policy), "--package-dir", str(tmp_path / "no_package"))  # the files are checked first
    assert out.returncode == 2 and "contract.json: sha256" in out.stderr
    contract.write_text(original)
    shutil.copyfile(REPO / "policies" / policy.name / "bundle" / "policy.onnx", policy / "bundle" / "policy.onnx")
    out = run(str(policy), "--package-dir", str(tmp_path / "no_package"))
    assert out.returncode == 2 and "no such package folder" in out.stderr
    out = run(str(tmp_path / "nowhere"), "--package-dir", str(package))
    assert out.returncode == 2 and "not a finished recipe's provenance" in out.stderr


def test_a_recipe_for_the_default_base_replaces_the_default_bundle(tmp_path: Path) -> None:
    """A recipe without a base (policies/holonomic_270, conf/nav.yaml) trains the default base: its
    bundle replaces ``default_bundle/``, which the node then loads and drives on."""
    import numpy as np

    from navcontract.scan import ScanInput
    from navdeploy.runtime import PolicyRuntime

    src = REPO / "policies" / "holonomic_270"
    prov = json.loads((src / "PROVENANCE.json").read_text())
    assert prov["config"]["base"] is None
    policy = tmp_path / "policies" / "holonomic_270"
    shutil.copytree(src / "bundle", policy / "bundle")
    shutil.copyfile(src / "PROVENANCE.json", policy / "PROVENANCE.json")
    package = tmp_path / "nav_policy"
    (package / "default_bundle").mkdir(parents=True)
    (package / "default_bundle" / "robustness.md").write_text("the bundle before's")
    (package / "jackal_bundle").mkdir()
    out = run(str(policy), "--package-dir", str(package))
    assert out.returncode == 0, out.stderr
    shipped = package / "default_bundle"
    assert sorted(p.name for p in shipped.iterdir()) == sorted([*prov["bundle"]["files"], "PROVENANCE.json"])
    assert sorted(p.name for p in package.iterdir()) == ["default_bundle", "jackal_bundle"]
    rt = PolicyRuntime.load(shipped)
    n = rt.contract.num_beams
    cmd = rt.step(ScanInput.training_beams(np.full(n, 3.0), n, 6.0), pose=(0, 0, 0), twist=(0, 0, 0), goal=(3.0, 0))
    assert cmd.shape == (3,) and np.all(np.isfinite(cmd)) and cmd[0] > 0.3
