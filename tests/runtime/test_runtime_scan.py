"""Scan resampling rules, the beam layout, and the runtime's contract checks (numpy side only).

Bundles here are written from random numpy weights by navcontract.bundle, so these tests need no
simulator and no torch; the real exported bundle is covered by test_export / test_parity, the
committed one by the fixture tests at the end.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from navcontract.action import ActionScaling, action_to_command
from navcontract.bundle import CONTRACT_FILE, BundleError, make_contract, parse_contract
from navcontract.scan import BeamLayout, ScanOptions, beam_angles, resample_scan
from navcontract.spec import build_policy_obs, make_policy_spec, policy_spec_from_terms
from navcontract.terms import ObsContext, SensorDims
from navdeploy.runtime import ContractError, PolicyRuntime, ScanInput, ScanUnusable
from navtrain.onnx_graph import MlpWeights, write_bundle

B = 72
R = 6.0
DIMS = SensorDims(num_beams=B, max_range=R, v_max=1.5, omega_max=2.0)
SCALING = ActionScaling(v_max=1.5, omega_max=2.0, limit_planar_speed=True)
SECTOR = 2 * math.pi / B
REPO = Path(__file__).resolve().parents[2]
DEFAULT_TERMS = {"lidar": {}, "goal_polar": {}, "vel_body": {}, "omega": {}}


def training_scan(ranges: np.ndarray, **kw: float) -> ScanInput:
    return ScanInput(ranges, -math.pi, 2 * math.pi / B, kw.get("range_min", 0.0), kw.get("range_max", R))


def sector_aligned(per_sector: int, rng: np.random.Generator, lo: float = 0.3, hi: float = 5.5) -> ScanInput:
    """per_sector * 72 readings, each reading's arc fully inside one training sector."""
    inc = SECTOR / per_sector
    n = B * per_sector
    return ScanInput(rng.uniform(lo, hi, n), -math.pi - SECTOR / 2 + inc / 2, inc, 0.05, 12.0)


# ---------------------------------------------------------------------------------------------
# Resampling rules


def test_training_beams_pass_through_unchanged_except_the_clip() -> None:
    rng = np.random.default_rng(0)
    ranges = rng.uniform(0.0, 7.0, B).astype(np.float32)  # some beyond max_range
    want = np.clip(ranges.astype(np.float64), 0.0, R)
    out = resample_scan(training_scan(ranges, range_max=10.0), B, R)
    assert np.array_equal(out, want)
    # Also with the float32 angles a real LaserScan message carries.
    scan32 = ScanInput(ranges, float(np.float32(-math.pi)), float(np.float32(2 * math.pi / B)), 0.0, 10.0)
    assert np.array_equal(resample_scan(scan32, B, R), want)


def test_any_order_and_start_angle_give_the_same_beams() -> None:
    rng = np.random.default_rng(1)
    ranges = rng.uniform(0.2, 5.9, B)
    ref = resample_scan(training_scan(ranges), B, R)
    inc = 2 * math.pi / B
    # Reversed: negative increment starting at the last training beam.
    rev = ScanInput(ranges[::-1].copy(), -math.pi + (B - 1) * inc, -inc, 0.0, R)
    assert np.array_equal(resample_scan(rev, B, R), ref)
    # Starting at 0 (forward) and running to 2 pi, as many drivers do.
    start0 = ScanInput(np.roll(ranges, -B // 2), 0.0, inc, 0.0, R)
    assert np.array_equal(resample_scan(start0, B, R), ref)
    # Starting at 0 and running clockwise.
    cw = ScanInput(np.roll(ranges, -B // 2)[np.r_[0, B - 1 : 0 : -1]], 0.0, -inc, 0.0, R)
    assert np.array_equal(resample_scan(cw, B, R), ref)


def test_dense_scan_takes_the_minimum_of_each_sector() -> None:
    rng = np.random.default_rng(2)
    scan = sector_aligned(10, rng)  # 720 beams, 0.5 degrees
    out = resample_scan(scan, B, R)
    assert np.allclose(out, scan.ranges.reshape(B, 10).min(axis=1), atol=0, rtol=0)
    # A near obstacle seen by one reading of sector 17 wins the sector.
    ranges = scan.ranges.copy()
    ranges[17 * 10 + 4] = 0.21
    out = resample_scan(ScanInput(ranges, scan.angle_min, scan.angle_increment, 0.05, 12.0), B, R)
    assert out[17] == 0.21


def test_sparse_scan_spreads_each_reading_over_the_sectors_its_arc_covers() -> None:
    rng = np.random.default_rng(3)
    r36 = rng.uniform(0.3, 5.5, 36)
    out = resample_scan(ScanInput(r36, -math.pi, 2 * math.pi / 36, 0.0, R), B, R)
    # Reading m is centred on sector 2m and covers half of sectors 2m-1 and 2m+1.
    assert np.array_equal(out[0::2], r36)
    assert np.array_equal(out[1::2], np.minimum(r36, np.roll(r36, -1)))


def _sector_minimum_by_loops(scan: ScanInput) -> np.ndarray:
    """The sector rule one reading at a time: a reading's arc (its centre +- half its increment)
    overlaps sector j (spanning [j, j + 1) sector widths from the layout's start) where they share
    more than the rule's tolerance; each sector keeps the least valid reading overlapping it."""
    out = np.full(B, np.inf)
    inc = scan.angle_increment
    for i, r in enumerate(np.asarray(scan.ranges, dtype=np.float64)):
        centre = (scan.angle_min + i * inc + math.pi) / SECTOR + 0.5
        half = 0.5 * abs(inc) / SECTOR
        lo = math.floor(centre - half + 1e-3)
        hi = max(math.ceil(centre + half - 1e-3) - 1, lo)
        valid = math.isfinite(r) and r >= scan.range_min
        for j in range(lo, lo + min(hi - lo + 1, B)):
            if valid:
                out[j % B] = min(out[j % B], r)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_any_lidars_readings_fall_on_the_sectors_their_arcs_overlap(seed: int) -> None:
    """Random lidars (reading counts from sparse to dense, either direction, any start, NaN and
    short readings): every sector a reading reaches holds the least of them, as a loop over the
    readings finds; a lidar's layout kept from one scan serves the next scan with its angles."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.choice([20, 36, 71, 100, 270, 541, 720, 1081]))
    fov = float(rng.uniform(0.6, 1.0)) * 2 * math.pi
    inc = fov / n * (1 if seed % 2 == 0 else -1)
    a0 = float(rng.uniform(-math.pi, math.pi))
    for _ in range(2):
        ranges = rng.uniform(0.2, 5.5, n)
        ranges[rng.random(n) < 0.05] = np.nan
        scan = ScanInput(ranges, a0, inc, 0.1, 12.0)
        report = resample_scan(scan, B, R, options=ScanOptions(min_coverage=0.0, max_fill_gap=B), return_report=True)
        want = _sector_minimum_by_loops(scan)
        seen = np.isfinite(want)
        assert np.array_equal(report.ranges[seen], want[seen])
        assert np.array_equal(report.filled, ~seen)


def test_inf_means_no_return_and_too_far_readings_are_max_range() -> None:
    ranges = np.full(B, 2.0)
    ranges[5] = np.inf
    ranges[6] = 11.0  # beyond the sensor's range_max 10 m: no return
    ranges[7] = 8.0  # a real return beyond the training max range: clipped
    ranges[8] = -np.inf  # too close to measure (REP-117)
    out = resample_scan(training_scan(ranges, range_min=0.12, range_max=10.0), B, R)
    assert out[5] == R and out[6] == R and out[7] == R
    assert out[8] == pytest.approx(0.12)
    assert np.all(np.delete(out, [5, 6, 7, 8]) == 2.0)


def test_nan_readings_are_dropped_and_the_sector_keeps_its_valid_ones() -> None:
    rng = np.random.default_rng(4)
    scan = sector_aligned(10, rng)
    ranges = scan.ranges.copy()
    ranges[30 * 10 + 2] = np.nan
    ranges[30 * 10 + 3] = 0.01  # also a minimum if it counted
    ranges[40 * 10 : 41 * 10] = np.nan  # the whole of sector 40
    out, filled = resample_scan(
        ScanInput(ranges, scan.angle_min, scan.angle_increment, 0.05, 12.0),
        B,
        R,
        below_min="invalid",
        return_filled=True,
    )
    others = np.delete(ranges[300:310], [2, 3])
    assert out[30] == others.min()
    assert filled[40] and filled.sum() == 1
    assert out[40] == min(out[39], out[41])  # nearest-sector fill, ties take the smaller value


def test_below_range_min_is_an_obstacle_by_default_or_invalid_on_request() -> None:
    ranges = np.full(B, 3.0)
    ranges[36] = 0.0  # straight ahead: a box closer than range_min, reported as 0 (or "no measurement")
    ranges[10] = 0.05  # under range_min
    scan = training_scan(ranges, range_min=0.1)
    out, filled = resample_scan(scan, B, R, return_filled=True)
    assert not filled.any()
    assert out[36] == pytest.approx(0.1) and out[10] == pytest.approx(0.1)  # never free space
    assert ScanOptions().below_min == "obstacle"
    out, filled = resample_scan(scan, B, R, below_min="invalid", return_filled=True)
    assert filled[10] and filled[36] and out[10] == 3.0 and out[36] == 3.0


def test_narrow_field_of_view_fills_missing_sectors_by_the_configured_policy() -> None:
    # A 270-degree lidar: 540 readings of 0.5 degrees from -135 to +135 degrees.
    inc = math.radians(0.5)
    n = 540
    rng = np.random.default_rng(5)
    ranges = rng.uniform(0.5, 5.0, n)
    scan = ScanInput(ranges, -math.radians(135) + inc / 2, inc, 0.05, 10.0)
    centres = -math.pi + np.arange(B) * SECTOR
    blind = np.abs(centres) > math.radians(135) + SECTOR / 2 - 1e-9
    out, filled = resample_scan(scan, B, R, fill="max_range", return_filled=True)
    assert np.array_equal(filled, blind) and blind.sum() == 17
    assert np.all(out[blind] == R)
    out = resample_scan(scan, B, R, fill="constant", fill_value=1.25)
    assert np.all(out[blind] == 1.25)
    out = resample_scan(scan, B, R, fill="nearest")
    idx = np.flatnonzero(blind)  # sectors 0..8 and 64..71 in a ring
    seen = np.flatnonzero(~blind)
    for j in idx:
        d = np.minimum(np.abs(seen - j), B - np.abs(seen - j))
        assert out[j] == out[seen[d == d.min()]].min()
    assert np.all(out[~blind] == resample_scan(scan, B, R, fill="max_range")[~blind])
    with pytest.raises(ValueError, match="fill_value"):
        ScanOptions(fill="constant")
    with pytest.raises(ValueError, match="fill must be"):
        ScanOptions(fill="zero")


@pytest.mark.parametrize(
    "scan, why",
    [
        (ScanInput(np.zeros(0), -math.pi, 0.1, 0.0, R), "no readings"),
        (ScanInput(np.full(B, np.nan), -math.pi, SECTOR, 0.0, R), "none of the 72 readings"),
        (ScanInput(np.ones(B), -math.pi, 0.0, 0.0, R), "angle_increment is 0"),
        (ScanInput(np.ones(B), float("nan"), SECTOR, 0.0, R), "non-finite"),
        (ScanInput(np.ones(B), -math.pi, SECTOR, 5.0, 1.0), "range_max 1.0 is not above range_min"),
    ],
)
def test_unusable_scans_raise_scan_unusable(scan: ScanInput, why: str) -> None:
    with pytest.raises(ScanUnusable, match=why):
        resample_scan(scan, B, R)


def test_open_field_with_no_return_anywhere_is_usable() -> None:
    assert np.all(resample_scan(training_scan(np.full(B, np.inf)), B, R) == R)


def test_scan_from_a_laserscan_like_message() -> None:
    class Msg:
        ranges = [1.0] * B
        angle_min = -math.pi
        angle_increment = 2 * math.pi / B
        range_min = 0.1
        range_max = 12.0

    assert np.all(resample_scan(ScanInput.from_msg(Msg()), B, R) == 1.0)


# ---------------------------------------------------------------------------------------------
# Runtime with a synthetic bundle


def random_weights(obs_dim: int, seed: int = 0) -> MlpWeights:
    rng = np.random.default_rng(seed)
    dims = [obs_dim, 32, 32, 3]
    layers = [
        (rng.normal(0, 1 / math.sqrt(a), (b, a)).astype(np.float32), rng.normal(0, 0.3, b).astype(np.float32))
        for a, b in zip(dims[:-1], dims[1:], strict=True)
    ]
    mean = rng.normal(0, 0.3, obs_dim).astype(np.float32)
    std = rng.uniform(0.2, 2.0, obs_dim).astype(np.float32)
    return MlpWeights(mean, std, 0.01, layers, "elu")


def numpy_forward(w: MlpWeights, x: np.ndarray) -> np.ndarray:
    h = (x.astype(np.float64) - w.mean) / (w.std.astype(np.float64) + w.eps)
    for i, (W, b) in enumerate(w.layers):
        h = h @ W.T.astype(np.float64) + b
        if i < len(w.layers) - 1:
            h = np.where(h > 0, h, np.expm1(np.minimum(h, 0)))
    return h


def synthetic_bundle(path: Path, terms: dict | None = None, seed: int = 0) -> tuple[Path, MlpWeights]:
    spec = make_policy_spec(terms or DEFAULT_TERMS, DIMS)
    w = random_weights(spec.obs_dim, seed)
    write_bundle(path, w, make_contract(spec, SCALING, 0.1, 0.3, w.eps))
    return path, w


def robot_inputs(rng: np.random.Generator) -> tuple[ScanInput, tuple, tuple, tuple]:
    scan = training_scan(rng.uniform(0.3, 6.0, B).astype(np.float32))
    pose = (rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(-math.pi, math.pi))
    twist = (rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-2, 2))
    goal = (rng.uniform(-3, 3), rng.uniform(-3, 3))
    return scan, pose, twist, goal


def test_runtime_builds_obs_with_the_shared_builder_and_runs_the_bundle(tmp_path: Path) -> None:
    bdir, w = synthetic_bundle(tmp_path)
    rt = PolicyRuntime.load(bdir)
    rng = np.random.default_rng(6)
    for _ in range(20):
        scan, pose, twist, goal = robot_inputs(rng)
        obs = rt.observation(scan, pose, twist, goal)
        ctx = ObsContext(
            scan=np.asarray(scan.ranges, np.float64)[None],
            pose=np.array([pose]),
            twist=np.array([twist]),
            goal=np.array([goal]),
            prev_action=np.zeros((1, 3)),
            dims=DIMS,
        )
        assert obs.shape == (78,) and obs.dtype == np.float32
        assert np.array_equal(obs, build_policy_obs(ctx, rt.spec)[0])
        raw = numpy_forward(w, obs[None])[0]
        assert np.abs(rt.act(obs) - raw).max() < 1e-5
        cmd = rt.step(scan, pose, twist, goal)
        want = action_to_command(raw[None], SCALING)[0]
        assert cmd.shape == (3,) and np.abs(cmd - want).max() < 1e-5
        assert np.abs(rt.prev_action - np.clip(raw, -1, 1)).max() < 1e-5


def test_previous_action_term_follows_steps_and_reset(tmp_path: Path) -> None:
    bdir, w = synthetic_bundle(tmp_path, {**DEFAULT_TERMS, "action_prev": {}}, seed=1)
    rt = PolicyRuntime.load(bdir)
    assert rt.contract.obs_dim == 81
    rng = np.random.default_rng(7)
    inputs = robot_inputs(rng)
    assert np.all(rt.observation(*inputs)[78:] == 0.0)
    obs = rt.observation(*inputs)
    rt.step(*inputs)
    raw = numpy_forward(w, obs[None])[0]
    assert np.abs(rt.observation(*inputs)[78:] - np.clip(raw, -1, 1)).max() < 1e-5
    # An unusable scan raises and leaves the previous action alone.
    before = rt.prev_action
    with pytest.raises(ScanUnusable):
        rt.step(training_scan(np.full(B, np.nan)), *inputs[1:])
    assert np.array_equal(rt.prev_action, before)
    rt.reset()
    assert np.all(rt.observation(*inputs)[78:] == 0.0)


def test_runtime_spec_mismatch_names_the_differing_term(tmp_path: Path) -> None:
    bdir, _ = synthetic_bundle(tmp_path)
    mine = make_policy_spec({**DEFAULT_TERMS, "goal_polar": {"distance_scale": 4.0}}, DIMS)
    with pytest.raises(ContractError, match=r"term 'goal_polar' params"):
        PolicyRuntime.load(bdir, spec=mine)
    other_range = make_policy_spec(DEFAULT_TERMS, SensorDims(B, 8.0, 1.5, 2.0))
    with pytest.raises(ContractError, match="max_range: bundle 6.0 vs runtime 8.0"):
        PolicyRuntime.load(bdir, spec=other_range)
    with_prev = make_policy_spec({**DEFAULT_TERMS, "action_prev": {}}, DIMS)
    with pytest.raises(ContractError, match="action_prev"):
        PolicyRuntime.load(bdir, spec=with_prev)
    assert PolicyRuntime.load(bdir, spec=make_policy_spec(DEFAULT_TERMS, DIMS)).contract.obs_dim == 78


def _rewrite_contract(bdir: Path, edit) -> None:
    """Re-write a bundle whose contract is edited consistently (fingerprint recomputed)."""
    from navcontract.spec import spec_from_dict

    contract = json.loads((bdir / CONTRACT_FILE).read_text())
    edit(contract)
    contract["fingerprint"] = spec_from_dict(contract["observation"]["spec"]).fingerprint()
    spec = spec_from_dict(contract["observation"]["spec"])
    w = random_weights(spec.obs_dim)
    write_bundle(bdir, w, contract)


def test_bundle_from_another_term_version_is_refused_naming_it(tmp_path: Path) -> None:
    bdir, _ = synthetic_bundle(tmp_path)

    def bump(c: dict) -> None:
        c["observation"]["spec"]["terms"][3]["version"] = 2  # omega changed meaning since
        c["observation"]["terms"][3]["version"] = 2

    _rewrite_contract(bdir, bump)
    with pytest.raises(ContractError, match=r"term 'omega' version: bundle 2 vs runtime 1"):
        PolicyRuntime.load(bdir)


def test_bundle_with_an_unknown_term_is_refused_naming_it(tmp_path: Path) -> None:
    bdir, _ = synthetic_bundle(tmp_path)

    def add(c: dict) -> None:
        t = {"name": "wheel_odometry", "width": 2, "params": {}, "version": 1}
        c["observation"]["spec"]["terms"].append(t)
        c["observation"]["spec"]["obs_dim"] = 80
        c["observation"]["terms"].append({**t, "slice": [78, 80]})
        c["observation"]["dim"] = 80

    _rewrite_contract(bdir, add)
    with pytest.raises(ContractError, match="wheel_odometry"):
        PolicyRuntime.load(bdir)


def test_edited_or_inconsistent_contract_is_refused(tmp_path: Path) -> None:
    bdir, _ = synthetic_bundle(tmp_path)
    cfile = bdir / CONTRACT_FILE
    original = cfile.read_text()
    c = json.loads(original)
    c["control_period"] = 0.05
    cfile.write_text(json.dumps(c))
    with pytest.raises(
        BundleError, match=r"differs from the contract inside policy.onnx \(keys: \['control_period'\]\)"
    ):
        PolicyRuntime.load(bdir)
    cfile.unlink()  # the ONNX file alone is a complete bundle
    assert PolicyRuntime.load(bdir).contract.control_period == 0.1

    c = json.loads(original)
    c["observation"]["spec"]["terms"][1]["params"]["distance_scale"] = 3.0  # fingerprint left stale
    with pytest.raises(BundleError, match="does not match its own observation spec"):
        write_bundle(tmp_path / "stale", random_weights(78), c)


def test_a_given_spec_must_match_the_bundle(tmp_path: Path) -> None:
    bdir, _ = synthetic_bundle(tmp_path)
    spec = policy_spec_from_terms({"action_prev": {"enabled": False}}, DIMS)
    assert PolicyRuntime.load(bdir, spec=spec).contract.fingerprint == spec.fingerprint()
    wide = policy_spec_from_terms({}, SensorDims(num_beams=360, max_range=R, v_max=1.5, omega_max=2.0))
    with pytest.raises(ContractError, match="num_beams: bundle 72 vs runtime 360"):
        PolicyRuntime.load(bdir, spec=wide)


def test_goal_reached_uses_the_contract_tolerance(tmp_path: Path) -> None:
    bdir, _ = synthetic_bundle(tmp_path)
    rt = PolicyRuntime.load(bdir)
    assert rt.goal_reached((1.0, 1.0, 0.3), (1.2, 1.1))
    assert not rt.goal_reached((1.0, 1.0, 0.3), (1.3, 1.1))


# ---------------------------------------------------------------------------------------------
# The beam layout and the committed bundle


def test_beam_layout_is_the_laser_scan_of_the_training_lidar() -> None:
    layout = BeamLayout(B)
    assert layout.angle_min == -math.pi and layout.angle_increment == pytest.approx(SECTOR)
    assert layout.angle_max == pytest.approx(math.pi - SECTOR) and layout.fov == pytest.approx(2 * math.pi)
    angles = beam_angles(B)
    assert angles.dtype == np.float64 and angles.shape == (B,)
    assert np.array_equal(angles, layout.angles())
    assert angles[36] == 0.0 and angles[18] == pytest.approx(-math.pi / 2)  # 36 ahead, 18 right
    scan = ScanInput.training_beams(np.ones(B), B, R)
    assert (scan.angle_min, scan.angle_increment) == (layout.angle_min, layout.angle_increment)
    with pytest.raises(ValueError, match="num_beams"):
        BeamLayout(0)


def test_contract_states_the_beam_layout_and_refuses_another(tmp_path: Path) -> None:
    bdir, _ = synthetic_bundle(tmp_path / "ok")
    contract = PolicyRuntime.load(bdir).contract
    assert contract.beams == BeamLayout(B)
    assert (contract.angle_min, contract.angle_increment, contract.fov) == (-math.pi, SECTOR, 2 * math.pi)
    lidar = json.loads((bdir / CONTRACT_FILE).read_text())["lidar"]
    assert lidar["angle_min"] == -math.pi and lidar["angle_increment"] == SECTOR and lidar["fov_deg"] == 360.0
    edited = json.loads((bdir / CONTRACT_FILE).read_text())
    edited["lidar"]["angle_min"] = 0.0
    with pytest.raises(BundleError, match="lidar.angle_min = 0.0 is not the training beam layout"):
        parse_contract(edited)
    with pytest.raises(BundleError, match="lidar.angle_min"):  # nor can such a bundle be written
        write_bundle(tmp_path / "bad", random_weights(78), edited)


def test_contract_carries_the_robot_radius_when_exported_with_it(tmp_path: Path) -> None:
    spec = make_policy_spec(DEFAULT_TERMS, DIMS)
    w = random_weights(spec.obs_dim)
    write_bundle(tmp_path, w, make_contract(spec, SCALING, 0.1, 0.3, w.eps, robot_radius=0.25))
    rt = PolicyRuntime.load(tmp_path)
    assert rt.contract.robot_radius == 0.25 and rt.contract.raw["robot"]["radius"] == 0.25


def test_committed_bundle_loads_with_its_fingerprint() -> None:
    """tests/fixtures/bundle: the fixture bags depend on its fingerprint; it records the robot radius,
    the trained field of view and how the simulator rendered the scan."""
    bdir = REPO / "tests" / "fixtures" / "bundle"
    rt = PolicyRuntime.load(bdir)
    c = rt.contract
    assert c.fingerprint == "23cb46e4de12b7e0" == rt.spec.fingerprint()
    assert c.robot_radius == 0.2 and c.beams == BeamLayout(72) and c.trained_fov == pytest.approx(2 * math.pi)
    assert c.raw["lidar"]["simulator"]["rays_per_beam"] == 21
    assert c.scaling == SCALING


def test_a_bundle_from_before_the_robot_and_field_of_view_fields_still_loads(tmp_path: Path) -> None:
    """Bundles exported before the contract carried ``robot`` and ``lidar.trained_fov`` load with no
    radius and a full-circle field of view."""
    spec = make_policy_spec(DEFAULT_TERMS, DIMS)
    w = random_weights(spec.obs_dim)
    contract = make_contract(spec, SCALING, 0.1, 0.3, w.eps, robot_radius=0.2)
    contract.pop("robot", None)
    contract["lidar"].pop("trained_fov")
    write_bundle(tmp_path, w, contract)
    c = PolicyRuntime.load(tmp_path).contract
    assert c.robot_radius is None and c.trained_fov == pytest.approx(2 * math.pi)


def test_trained_field_of_view_travels_in_the_contract_and_gates_scans(tmp_path: Path) -> None:
    spec = make_policy_spec(DEFAULT_TERMS, DIMS)
    w = random_weights(spec.obs_dim)
    sim = {"rule": "sector minimum", "rays_per_beam": 21}
    write_bundle(tmp_path, w, make_contract(spec, SCALING, 0.1, 0.3, w.eps, trained_fov=1.5 * math.pi, sim_lidar=sim))
    rt = PolicyRuntime.load(tmp_path)
    assert rt.contract.trained_fov == pytest.approx(1.5 * math.pi)
    assert rt.contract.raw["lidar"]["simulator"] == sim
    pose, twist, goal = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (2.0, 0.0)
    # A 270-degree scanner (1081 beams, Hokuyo style) covers what the policy was trained with ...
    hokuyo = ScanInput(np.full(1081, 3.0), -0.75 * math.pi, 1.5 * math.pi / 1080, 0.05, 30.0)
    assert np.all(np.isfinite(rt.step(hokuyo, pose, twist, goal)))
    # ... a 180-degree one does not: refused, never filled in as free space.
    narrow = ScanInput(np.full(721, 3.0), -0.5 * math.pi, math.pi / 720, 0.05, 30.0)
    with pytest.raises(ScanUnusable):
        rt.step(narrow, pose, twist, goal)


def test_a_scan_read_again_is_not_resampled_again_but_a_new_scan_or_new_options_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command gate reads a tick's scan before the driver's step reads it again: one resample."""
    import navdeploy.runtime as runtime_module

    bdir, _ = synthetic_bundle(tmp_path)
    rt = PolicyRuntime.load(bdir)
    calls = []
    real = runtime_module.resample_scan
    monkeypatch.setattr(runtime_module, "resample_scan", lambda *a, **k: calls.append(1) or real(*a, **k))
    scan = training_scan(np.full(B, 2.0))
    first = rt.resample(scan)
    assert rt.resample(scan) is first and len(calls) == 1  # the same scan: the same beams, not read again
    same_values = training_scan(np.full(B, 2.0))
    rt.resample(same_values)
    assert len(calls) == 2  # another message (even with the same values) is read
    rt.configure_scan(ScanOptions(below_min="invalid"))
    rt.resample(same_values)
    assert len(calls) == 3  # new options: read again
    with pytest.raises(ScanUnusable):
        rt.resample(training_scan(np.full(B, np.nan)))
    rt.resample(same_values)
    assert len(calls) == 5  # after a refused scan nothing is taken for read
