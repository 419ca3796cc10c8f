"""The trained default bundle shipped with the nav_policy package, and its provenance file.

``ros2_ws/src/nav_policy/nav_policy/default_bundle/`` is package data: the node loads it when no
bundle is named (``bundle_path`` empty, ``$NAV_POLICY_BUNDLE`` unset), in an editable install, a
wheel and a colcon install alike; setup.py also installs a copy to share/nav_policy/default_bundle
(the launch files' default, tests/test_ros_launch.py). ``PROVENANCE.json`` says where the policy
came from and lists every file beside it with its SHA-256, so replacing the bundle means rewriting
that file too (these tests say which hash changed).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import support.ros as h
from nav_policy.paths import BUNDLE_ENV, DEFAULT_BASE, default_bundle_dir, installed_bundles, resolve_bundle
from navcontract.bundle import read_contract
from navcontract.scan import ScanInput
from navdeploy.runtime import PolicyRuntime

PROVENANCE = "PROVENANCE.json"
REQUIRED = (
    "format",
    "format_version",
    "summary",
    "files",
    "fingerprint",
    "randomization",
    "source_run",
    "git_commit",
    "seed",
    "config",
    "training_command",
    "date",
    "evaluation_files",
)
BUNDLE_FILES = {"policy.onnx", "contract.json"}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def provenance() -> dict:
    return json.loads((default_bundle_dir() / PROVENANCE).read_text())


def test_the_default_bundle_loads_and_drives() -> None:
    rt = PolicyRuntime.load(default_bundle_dir())
    n = rt.contract.num_beams
    cmd = rt.step(ScanInput.training_beams(np.full(n, 3.0), n, 6.0), pose=(0, 0, 0), twist=(0, 0, 0), goal=(3.0, 0))
    assert cmd.shape == (3,) and np.all(np.isfinite(cmd)) and cmd[0] > 0.5


def test_provenance_names_every_file_with_its_hash(provenance: dict) -> None:
    missing = [k for k in REQUIRED if k not in provenance]
    assert not missing, f"{PROVENANCE} lacks {missing}"
    assert provenance["format"] == "nav_policy.provenance" and provenance["format_version"] == 1
    folder = default_bundle_dir()
    listed = set(provenance["files"]) | set(provenance["evaluation_files"])
    present = {p.name for p in folder.iterdir()} - {PROVENANCE}
    assert BUNDLE_FILES <= set(provenance["files"])
    assert present == listed, f"files beside the bundle but not in {PROVENANCE}: {sorted(present - listed)}; " + (
        f"listed but absent: {sorted(listed - present)}"
    )
    for name, entry in provenance["files"].items():
        got = sha256(folder / name)
        assert entry["sha256"] == got, f"{PROVENANCE}: files.{name}.sha256 is {entry['sha256']}, the file's is {got}"


def test_provenance_agrees_with_the_contract(provenance: dict) -> None:
    contract = read_contract(default_bundle_dir())
    assert provenance["fingerprint"] == contract.fingerprint
    trained = contract.response is not None and contract.response.randomized
    assert provenance["randomization"] is trained
    source = contract.raw.get("source") or {}
    assert provenance["source_run"]["checkpoint_sha256"] == source["checkpoint_sha256"]
    assert provenance["seed"] == source["nav_config"]["env"]["seed"]
    copy_of = provenance.get("copy_of")
    if copy_of:  # a copy of a bundle in this repository: byte for byte
        for name in provenance["files"]:
            assert (h.REPO / copy_of / name).read_bytes() == (default_bundle_dir() / name).read_bytes(), name


def test_bundle_path_then_environment_then_installed_default() -> None:
    assert resolve_bundle("/a/b", {BUNDLE_ENV: "/env"}) == (Path("/a/b"), "parameter bundle_path")
    assert resolve_bundle("", {BUNDLE_ENV: "/env"}) == (Path("/env"), f"${BUNDLE_ENV}")
    default = (default_bundle_dir(), "the installed default bundle")
    assert resolve_bundle("", {BUNDLE_ENV: ""}) == default and resolve_bundle("", {}) == default
    assert resolve_bundle("~/x", {})[0] == Path.home() / "x"


def test_a_base_preset_with_an_installed_bundle_selects_it() -> None:
    """``robot_base`` alone picks the bundle shipped for that preset; a bundle or $NAV_POLICY_BUNDLE
    still wins; a preset without one gets the default (which the node then refuses, saying so)."""
    installed = installed_bundles()
    assert installed[DEFAULT_BASE] == default_bundle_dir() and "jackal" in installed
    jackal = installed["jackal"]
    assert resolve_bundle("", {}, robot_base="jackal") == (jackal, "the installed bundle of base jackal")
    assert resolve_bundle("", {}, robot_base=DEFAULT_BASE) == (default_bundle_dir(), "the installed default bundle")
    assert resolve_bundle("/a/b", {}, robot_base="jackal")[0] == Path("/a/b")
    assert resolve_bundle("", {BUNDLE_ENV: "/env"}, robot_base="jackal")[0] == Path("/env")
    path, why = resolve_bundle("", {}, robot_base="turtlebot4")
    assert path == default_bundle_dir() and "none is installed for base turtlebot4" in why and "jackal" in why
    assert resolve_bundle("", {}, robot_base="/robots/mine.yaml") == (
        default_bundle_dir(),
        "the installed default bundle",
    )


@pytest.mark.parametrize("base", sorted(set(installed_bundles()) - {DEFAULT_BASE}))
def test_each_base_bundle_is_its_recipes_policy_for_that_base(base: str) -> None:
    """A base's installed bundle drives, its contract's base is the preset, and it is the bundle a
    recipe wrote (policies/<recipe>/bundle), byte for byte, with that recipe's provenance beside it."""
    folder = installed_bundles()[base]
    contract = read_contract(folder)
    assert contract.base is not None and contract.base.name == base
    prov = json.loads((folder / PROVENANCE).read_text())
    assert prov["format"] == "nav_policy.recipe_provenance" and prov["config"]["base"] == base
    for name, digest in prov["bundle"]["files"].items():
        assert sha256(folder / name) == digest, name
        assert (h.REPO / "policies" / prov["name"] / "bundle" / name).read_bytes() == (folder / name).read_bytes()
    assert {p.name for p in folder.iterdir()} == {*prov["bundle"]["files"], PROVENANCE}
    assert contract.fingerprint == prov["bundle"]["fingerprint"]
    rt = PolicyRuntime.load(folder)
    n = rt.contract.num_beams
    cmd = rt.step(ScanInput.training_beams(np.full(n, 3.0), n, 6.0), pose=(0, 0, 0), twist=(0, 0, 0), goal=(3.0, 0))
    assert cmd.shape == (3,) and np.all(np.isfinite(cmd)) and cmd[1] == 0.0  # a diff drive: no lateral command


def test_a_wheel_carries_the_bundle_as_package_data_and_in_share(tmp_path: Path) -> None:
    """A regular install (pip wheel; colcon runs the same setup.py) has the bundle beside the module,
    where the node looks, and in share/nav_policy/default_bundle, where the launch files look."""
    src = tmp_path / "src"
    shutil.copytree(h.PKG_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), src],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("nav_policy-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for folder in installed_bundles().values():
            for f in folder.iterdir():
                assert f"nav_policy/{folder.name}/{f.name}" in names
                share = next(n for n in names if n.endswith(f".data/data/share/nav_policy/{folder.name}/{f.name}"))
                assert z.read(share) == f.read_bytes()
        z.extractall(site, [n for n in names if n.startswith("nav_policy/")])
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from nav_policy.paths import resolve_bundle\n"
        "from navdeploy.runtime import PolicyRuntime\n"
        "for base in ('', 'jackal'):\n"
        "    path, source = resolve_bundle('', {}, robot_base=base)\n"
        "    assert str(path).startswith(sys.argv[1]), path\n"
        "    print(source, PolicyRuntime.load(path).contract.fingerprint)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe, str(site)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    fingerprint = read_contract(default_bundle_dir()).fingerprint
    jackal = read_contract(installed_bundles()["jackal"]).fingerprint
    assert run.stdout.split("\n")[:2] == [
        f"the installed default bundle {fingerprint}",
        f"the installed bundle of base jackal {jackal}",
    ]
