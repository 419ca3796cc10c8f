"""Checkpoint -> self-contained ONNX + contract, with the exporter's self-check.

A tiny policy is trained once per test session and exported through the ``nav-export`` command,
exactly as a user would (the ``trained_checkpoint`` and ``exported_bundle`` fixtures of conftest).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from navcontract.bundle import (
    CONTRACT_FILE,
    FINGERPRINT_KEY,
    METADATA_KEY,
    ONNX_FILE,
    BundleError,
    contract_fingerprint,
    make_contract,
)
from navcontract.subgoal import LookaheadRule, TrainedPathFollowing
from navdeploy.gate import CommandGate
from navdeploy.node_params import NodeParams
from navdeploy.runtime import PolicyRuntime
from navdeploy.settings import resolve_settings
from navsim.config_load import config_from_data, load_config
from navsim.contract_objects import (
    action_scaling,
    base_spec,
    guard_rule,
    path_following,
    policy_spec,
    robot_response,
)
from navtrain.checkpoint import CheckpointError, build_actor, config_from_checkpoint
from navtrain.export import (
    ExportCheckError,
    ExportError,
    actor_mean,
    actor_weights,
    check_onnx,
    export_bundle,
)
from navtrain.onnx_graph import write_bundle
from support.contract_copies import onnx_metadata, write_contract_copies
from support.paths import REPO
from support.simenv import TRAIN_OVERRIDES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundle(exported_bundle: Path) -> Path:
    return exported_bundle


@pytest.fixture(scope="module")
def ckpt(trained_checkpoint: Path) -> dict:
    return torch.load(trained_checkpoint, map_location="cpu", weights_only=True)


def test_cli_writes_one_self_contained_onnx_and_contract(bundle: Path) -> None:
    names = sorted(p.name for p in bundle.iterdir())
    assert names == sorted([ONNX_FILE, CONTRACT_FILE, "export_check.json"])
    model = onnx.load(str(bundle / ONNX_FILE), load_external_data=False)
    onnx.checker.check_model(model, full_check=True)
    assert all(not onnx.external_data_helper.uses_external_data(t) for t in model.graph.initializer)
    (inp,) = model.graph.input
    (out,) = model.graph.output
    assert inp.name == "obs" and [d.dim_value for d in inp.type.tensor_type.shape.dim][1] == 78
    assert out.name == "action" and [d.dim_value for d in out.type.tensor_type.shape.dim][1] == 3
    ops = [n.op_type for n in model.graph.node]
    assert ops[:2] == ["Sub", "Div"], "the training normaliser must be the first thing in the graph"
    assert "Clip" not in ops and "Tanh" not in ops and "Mul" not in ops, "no clip or scaling inside the ONNX model"


def test_contract_in_metadata_equals_contract_file_and_says_everything(bundle: Path, ckpt: dict) -> None:
    meta = onnx_metadata(bundle)
    embedded = json.loads(meta[METADATA_KEY])
    beside = json.loads((bundle / CONTRACT_FILE).read_text())
    assert embedded == beside
    cfg = load_config(overrides=TRAIN_OVERRIDES)
    spec = policy_spec(cfg)
    # A new bundle states its base; the fingerprint covers the observation spec and that section.
    assert beside["base"] == base_spec(cfg).to_dict() and beside["base"]["name"] == "holonomic_disc"
    assert beside["fingerprint"] == meta[FINGERPRINT_KEY] == contract_fingerprint(spec, base_spec(cfg))
    assert beside["fingerprint"] != spec.fingerprint()
    terms = beside["observation"]["terms"]
    assert [(t["name"], t["width"], t["slice"]) for t in terms] == [
        ("lidar", 72, [0, 72]),
        ("goal_polar", 3, [72, 75]),
        ("vel_body", 2, [75, 77]),
        ("omega", 1, [77, 78]),
    ]
    assert terms[1]["params"] == {"distance_scale": 5.0, "distance_clip": 2.0}
    lidar = beside["lidar"]
    assert lidar["num_beams"] == 72 and lidar["max_range"] == 6.0
    assert lidar["fov"] == pytest.approx(2 * math.pi) and lidar["angle_min"] == pytest.approx(-math.pi)
    assert lidar["angle_increment"] == pytest.approx(2 * math.pi / 72)
    assert beside["v_max"] == 1.5 and beside["omega_max"] == 2.0
    assert beside["action"]["order"] == ["linear.x", "linear.y", "angular.z"]
    assert beside["action"]["limit_planar_speed"] is True and beside["action"]["clip"] == [-1.0, 1.0]
    assert "BEFORE clip and scaling" in beside["action"]["onnx_output"]
    assert beside["control_period"] == 0.1 and beside["goal_tolerance"] == 0.3
    assert beside["onnx"]["normalizer_eps"] == 0.01
    assert beside["robot"]["radius"] == 0.2
    assert beside["source"]["iteration"] == ckpt["iter"]
    # How the base responded in training, from the config's randomization section (format 2).
    assert beside["format_version"] == 2
    assert beside["robot_response"] == robot_response(cfg).to_dict()
    assert beside["robot_response"] == robot_response(config_from_data(beside["source"]["nav_config"])).to_dict()
    # The path-following rule it was trained with, from the config's env.worlds (format 2 still).
    assert beside["path_following"] == path_following(cfg).to_dict()
    assert beside["path_following"]["lookahead"] == cfg.env.worlds.lookahead
    assert beside["path_following"]["trained_share"] == cfg.env.worlds.path_following
    # The collision guard it drove through, from the config's env.guard (on by default).
    assert beside["guard"] == guard_rule(cfg).to_dict() and beside["guard"]["radius"] == 0.2


def test_self_check_ran_on_recorded_observations_within_tolerance(bundle: Path) -> None:
    check = json.loads((bundle / "export_check.json").read_text())
    assert check["num_obs"] >= 1000
    assert check["max_abs_diff"] <= 1e-5
    assert check["tol"] == 1e-5


def test_onnx_is_normaliser_plus_mlp_and_outputs_the_raw_mean(bundle: Path, ckpt: dict) -> None:
    """An independent numpy forward pass of the checkpoint equals onnxruntime; outputs are unclipped."""
    sd = {k: v.numpy().astype(np.float64) for k, v in ckpt["actor_state_dict"].items()}
    rng = np.random.default_rng(0)
    mean, std = sd["obs_normalizer._mean"], sd["obs_normalizer._std"]
    x = (mean + std * rng.normal(size=(2000, 78)) * 30.0).astype(np.float32)

    def elu(z: np.ndarray) -> np.ndarray:
        return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))

    h = (x.astype(np.float64) - mean) / (std + 0.01)
    h = elu(h @ sd["mlp.0.weight"].T + sd["mlp.0.bias"])
    h = elu(h @ sd["mlp.2.weight"].T + sd["mlp.2.bias"])
    want = h @ sd["mlp.4.weight"].T + sd["mlp.4.bias"]
    sess = ort.InferenceSession(str(bundle / ONNX_FILE), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"obs": x})[0]
    assert np.abs(got - want).max() < 1e-4
    assert np.abs(got).max() > 1.0, "extreme inputs must show the raw, unclipped action"
    without_normaliser = elu(elu(x @ sd["mlp.0.weight"].T + sd["mlp.0.bias"]) @ sd["mlp.2.weight"].T + sd["mlp.2.bias"])
    without_normaliser = without_normaliser @ sd["mlp.4.weight"].T + sd["mlp.4.bias"]
    assert np.abs(got - without_normaliser).max() > 1e-2, "the normaliser must change the output"


def test_fresh_export_round_trips_through_the_runtime(bundle: Path, ckpt: dict) -> None:
    cfg = load_config(overrides=TRAIN_OVERRIDES)
    actor = build_actor(ckpt, cfg)
    rt = PolicyRuntime.load(bundle)
    assert rt.contract.spec_fingerprint == policy_spec(cfg).fingerprint()
    assert rt.contract.base == base_spec(cfg)
    assert (rt.contract.num_beams, rt.contract.max_range, rt.contract.control_period) == (72, 6.0, 0.1)
    assert rt.contract.robot_radius == cfg.env.robot.radius
    assert rt.contract.scaling == action_scaling(cfg)
    obs = torch.as_tensor(np.random.default_rng(1).uniform(0, 1, size=(64, 78)), dtype=torch.float32)
    raw = rt.act(obs.numpy())
    assert np.abs(raw - actor_mean(actor, obs).numpy()).max() <= 1e-5
    for o in obs.numpy()[:8]:
        cmd = rt.command(rt.act(o))
        assert cmd.shape == (3,) and np.hypot(cmd[0], cmd[1]) <= 1.5 + 1e-6 and abs(cmd[2]) <= 2.0 + 1e-6


def test_check_fails_with_the_numbers_when_onnx_drifts(ckpt: dict, tmp_path: Path) -> None:
    cfg = load_config(overrides=TRAIN_OVERRIDES)
    actor = build_actor(ckpt, cfg)
    w = actor_weights(actor, "elu")
    w_last, b_last = w.layers[-1]
    drifted = type(w)(w.mean, w.std, w.eps, [*w.layers[:-1], (w_last, b_last + 1e-3)], w.activation)
    contract = make_contract(policy_spec(cfg), action_scaling(cfg), 0.1, 0.3, w.eps)
    path = write_bundle(tmp_path, drifted, contract)
    obs = torch.rand(1000, 78)
    with pytest.raises(ExportCheckError) as info:
        check_onnx(path, actor, obs)
    msg = str(info.value)
    assert "1000 observations" in msg and "tol 1.0e-05" in msg
    assert re.search(r"max \|delta\| (9\.99\de-04|1\.00\de-03)", msg), msg
    # The same file passes with the honest weights.
    path = write_bundle(tmp_path / "ok", w, contract)
    assert check_onnx(path, actor, obs)["max_abs_diff"] <= 1e-5


def test_checkpoint_without_config_needs_the_fallback(ckpt: dict, trained_checkpoint: Path, tmp_path: Path) -> None:
    bare = {k: v for k, v in ckpt.items() if k != "infos"}
    path = tmp_path / "bare.pt"
    torch.save(bare, path)
    with pytest.raises(ExportError, match="--config"):
        export_bundle(path, tmp_path / "b0")
    mean = ckpt["actor_state_dict"]["obs_normalizer._mean"]
    std = ckpt["actor_state_dict"]["obs_normalizer._std"]
    obs = mean + std * torch.randn(1024, 78, generator=torch.Generator().manual_seed(0))
    cfg_yaml = tmp_path / "nav.yaml"
    import yaml

    data = yaml.safe_load((REPO / "conf" / "nav.yaml").read_text())
    cfg_yaml.write_text(yaml.safe_dump(data))
    onnx_path = export_bundle(path, tmp_path / "b1", config=cfg_yaml, observations=obs)
    assert PolicyRuntime.load(onnx_path.parent).contract.spec_fingerprint == policy_spec(load_config()).fingerprint()
    # A fallback config that disagrees with the checkpoint's own is refused, naming the term.
    data["observations"]["policy"]["goal_polar"]["params"]["distance_scale"] = 4.0
    cfg_yaml.write_text(yaml.safe_dump(data))
    with pytest.raises(ExportError, match="goal_polar"):
        export_bundle(trained_checkpoint, tmp_path / "b2", config=cfg_yaml, observations=obs)


def _export_with_stored_config(ckpt: dict, tmp_path: Path, edit) -> Path:
    """Export ``ckpt`` with its stored config edited by ``edit`` (plain data), checked on
    observations drawn around its normaliser (no rollout); returns the bundle folder."""
    stored = json.loads(json.dumps(ckpt["infos"]["nav_config"]))
    edit(stored)
    path = tmp_path / "edited.pt"
    torch.save({**ckpt, "infos": {**ckpt["infos"], "nav_config": stored}}, path)
    mean = ckpt["actor_state_dict"]["obs_normalizer._mean"]
    std = ckpt["actor_state_dict"]["obs_normalizer._std"]
    obs = mean + std * torch.randn(1024, 78, generator=torch.Generator().manual_seed(0))
    return export_bundle(path, tmp_path / "bundle", observations=obs).parent


def test_the_contract_carries_the_trained_path_rule_and_the_controller_follows_it(ckpt: dict, tmp_path: Path) -> None:
    def edit(stored: dict) -> None:
        stored["env"]["worlds"].update(lookahead=0.7, path_following=0.5)

    out = _export_with_stored_config(ckpt, tmp_path, edit)
    contract = json.loads((out / CONTRACT_FILE).read_text())
    assert contract["format_version"] == 2
    section = contract["path_following"]
    assert (section["lookahead"], section["search_window"], section["trained_share"]) == (0.7, 2.0, 0.5)
    rt = PolicyRuntime.load(out)
    assert rt.contract.path_following == TrainedPathFollowing(LookaheadRule(0.7, 2.0), 0.5)
    assert rt.contract.spec_fingerprint == policy_spec(load_config(overrides=TRAIN_OVERRIDES)).fingerprint()
    # The node's parameters: 0 (the default) takes the bundle's rule, a positive value replaces it.
    settings, _ = resolve_settings(rt.contract)
    assert settings.path_rule == LookaheadRule(0.7, 2.0)
    assert "path_lookahead 0.7 m (bundle contract" in settings.path_source
    controller = CommandGate.from_settings(rt, settings)
    assert controller.path_rule.lookahead == 0.7
    settings, warnings = resolve_settings(rt.contract, NodeParams(path_lookahead=1.3, path_search_window=2.0))
    assert settings.path_rule == LookaheadRule(1.3, 2.0)
    assert CommandGate.from_settings(rt, settings).path_rule.lookahead == 1.3
    assert warnings == ["path_lookahead=1.3 m differs from the 0.7 m the policy was trained to follow paths with"]


def test_a_corrupt_path_following_section_is_refused_in_one_line(ckpt: dict, tmp_path: Path) -> None:
    """Edited in both copies alike (so they still agree): the section's own check refuses it."""
    out = _export_with_stored_config(ckpt, tmp_path, lambda stored: None)
    data = json.loads(onnx_metadata(out)[METADATA_KEY])
    data["path_following"]["search_window"] = -2.0
    write_contract_copies(out, data)
    with pytest.raises(BundleError) as info:
        PolicyRuntime.load(out)
    assert str(info.value) == "contract path_following.search_window = -2.0 must be finite and > 0"


def test_untrained_normaliser_is_refused(ckpt: dict, tmp_path: Path) -> None:
    sd = dict(ckpt["actor_state_dict"])
    sd["obs_normalizer._mean"] = torch.zeros(1, 78)
    sd["obs_normalizer._var"] = torch.ones(1, 78)
    sd["obs_normalizer._std"] = torch.ones(1, 78)
    sd["obs_normalizer.count"] = torch.tensor(0)
    path = tmp_path / "untrained.pt"
    torch.save({**ckpt, "actor_state_dict": sd}, path)
    with pytest.raises(ExportError, match="normaliser is untouched"):
        export_bundle(path, tmp_path / "b", observations=torch.zeros(1024, 78))


def test_wrong_observation_width_is_refused(ckpt: dict, tmp_path: Path) -> None:
    cfg = load_config(overrides=["observations.policy.action_prev.enabled=true"])
    with pytest.raises(CheckpointError, match="81-dim"):
        build_actor(ckpt, cfg)
    # The exporter says the same, naming the file.
    bad = {**ckpt, "infos": {**ckpt["infos"], "nav_config": {**ckpt["infos"]["nav_config"]}}}
    bad["infos"]["nav_config"]["observations"] = {
        **bad["infos"]["nav_config"]["observations"],
        "policy": {**bad["infos"]["nav_config"]["observations"]["policy"], "action_prev": {"enabled": True}},
    }
    path = tmp_path / "wide.pt"
    torch.save(bad, path)
    with pytest.raises(ExportError, match=r"wide\.pt: .*81-dim"):
        export_bundle(path, tmp_path / "b", observations=torch.zeros(1024, 81))


def test_stored_config_of_an_older_version_still_loads(ckpt: dict) -> None:
    """Checkpoints written before env.stuck_window was removed carry it: it is dropped on load; a
    key nobody ever had is still an error."""
    stored = json.loads(json.dumps(ckpt["infos"]["nav_config"]))
    stored["env"]["stuck_window"] = 25
    cfg = config_from_checkpoint({"infos": {"nav_config": stored}})
    assert policy_spec(cfg).fingerprint() == policy_spec(load_config(overrides=TRAIN_OVERRIDES)).fingerprint()
    stored["env"]["stuck_windw"] = 25
    with pytest.raises(CheckpointError, match="env.stuck_windw"):
        config_from_checkpoint({"infos": {"nav_config": stored}})


def test_export_module_and_console_script_agree_on_usage() -> None:
    """``python -m navtrain.export_cli`` is the console script's module, and training/export.py wraps it."""
    for cmd in (
        [sys.executable, "-m", "navtrain.export_cli", "--help"],
        [sys.executable, "training/export.py", "--help"],
    ):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "--checkpoint" in proc.stdout and "--out" in proc.stdout


def _digests(folder: Path) -> dict[str, str]:
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _bundle_copy(fixture_bundle: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the fixture bundle in ``tmp_path / "bundle"``, and its files' digests."""
    out = tmp_path / "bundle"
    shutil.copytree(fixture_bundle, out)
    return out, _digests(out)


def _export(checkpoint: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """``nav-export`` run in this process (its ``main``; the console script itself runs in the
    ``exported_bundle`` fixture): the exit code and what it printed."""
    from navtrain.export_cli import main

    argv = ["--checkpoint", str(checkpoint), "--out", str(out), "--device", "cpu", *extra]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def test_failed_self_check_leaves_the_previous_bundle_byte_identical(
    fixture_bundle: Path, trained_checkpoint: Path, tmp_path: Path
) -> None:
    """Over a different bundle, even with --force: the check fails, the old bundle stays as it was."""
    out, before = _bundle_copy(fixture_bundle, tmp_path)
    proc = _export(trained_checkpoint, out, "--tol", "1e-12", "--force")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert _digests(out) == before
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("nav-export:")]
    assert "self-check failed" in line and "left as it was" in line and "tol 1.0e-12" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"], "a staging folder was left behind"
    # The bundle that stays is the verified one: its export_check.json matches its ONNX.
    if (out / "export_check.json").is_file():  # the committed fixture may predate export_check.json
        check = json.loads((out / "export_check.json").read_text())
        assert check["onnx_sha256"] == _digests(out)[ONNX_FILE]
    PolicyRuntime.load(out)


def test_export_replaces_the_same_checkpoint_silently_and_a_different_bundle_only_with_force(
    trained_checkpoint: Path, fixture_bundle: Path, tmp_path: Path
) -> None:
    out, fixture = _bundle_copy(fixture_bundle, tmp_path)
    proc = _export(trained_checkpoint, out)
    assert proc.returncode == 2 and "--force" in proc.stderr and _digests(out) == fixture
    proc = _export(trained_checkpoint, out, "--force")
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = _digests(out)
    assert first[ONNX_FILE] != fixture[ONNX_FILE]
    contract = json.loads((out / CONTRACT_FILE).read_text())
    assert contract["source"]["checkpoint"] == trained_checkpoint.name
    # The same checkpoint again: no --force needed, the bundle is the same network.
    proc = _export(trained_checkpoint, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _digests(out)[ONNX_FILE] == first[ONNX_FILE]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]
    PolicyRuntime.load(out)


def test_the_self_check_is_absolute_inside_the_clip_and_relative_beyond() -> None:
    """A saturated raw action (-31.9) differs in float32 by more than 1e-5 absolute; the robot
    clips it to -1 either way, so the check scales the difference beyond |action| 1."""
    import numpy as np

    from navtrain.export import ExportCheckError, compare_actions

    want = np.array([[-31.89458, 0.5, 0.99]], dtype=np.float32)
    got = np.array([[-31.89456, 0.500004, 0.99]], dtype=np.float32)
    result = compare_actions(got, want, 1e-5)
    assert result["max_abs_diff"] > 1e-5 and result["max_scaled_diff"] <= 1e-5
    with pytest.raises(ExportCheckError, match="action 1"):  # inside the clip: absolute
        compare_actions(np.array([[-31.89458, 0.50002, 0.99]], dtype=np.float32), want, 1e-5)
    with pytest.raises(ExportCheckError):  # a real difference on a large action still fails
        compare_actions(np.array([[-31.8, 0.5, 0.99]], dtype=np.float32), want, 1e-5)


def test_the_recording_rollout_plans_a_small_pool_of_the_same_worlds() -> None:
    """The export's recording rollout keeps the config's families, shares, curriculum and every other
    key, with a pool of RECORD_POOL planned worlds per family and level instead of the training pool's
    (which takes minutes to plan on a CPU); a config whose pool is no larger is used as it is."""
    from navsim.config_load import to_dict
    from navtrain.export import RECORD_POOL, recording_config

    cfg = load_config(REPO / "conf" / "jackal.yaml")
    assert cfg.env.worlds.pool_size > RECORD_POOL and len(cfg.env.worlds.families) > 1
    small = recording_config(cfg)
    assert small.env.worlds.pool_size == RECORD_POOL
    assert small.env.worlds.refresh_size == min(cfg.env.worlds.refresh_size, RECORD_POOL)
    a, b = to_dict(cfg), to_dict(small)
    for d in (a, b):
        del d["env"]["worlds"]["pool_size"], d["env"]["worlds"]["refresh_size"]
    assert a == b
    assert to_dict(cfg)["env"]["worlds"]["pool_size"] == cfg.env.worlds.pool_size  # the original untouched
    tiny = load_config(REPO / "conf" / "jackal.yaml", ["env.worlds.pool_size=4", "env.worlds.refresh_size=2"])
    assert recording_config(tiny) is tiny
