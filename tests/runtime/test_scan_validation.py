"""Scan validation (issues 10 and 11): every scan the policy cannot trust is refused with a named
reason, never filled into free space; what the policy sees is reported (coverage, filled sectors).

Each case here is a scan a real robot publishes: a mostly blind scan, a box under ``range_min``
reported as 0, metadata left unset (``range_max`` 0), angles in degrees, a small arc. Numpy only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from navcontract.scan import SCAN_FAULTS, ScanInput, ScanOptions, ScanUnusable, resample_scan
from navdeploy.runtime import PolicyRuntime

B = 72
R = 6.0
SECTOR = 2 * math.pi / B
FRONT = B // 2  # training beam 36 points straight ahead


def laser(ranges, angle_min=-math.pi, inc=None, range_min=0.05, range_max=12.0) -> ScanInput:
    r = np.asarray(ranges, dtype=np.float64)
    inc = 2 * math.pi / r.size if inc is None else inc
    return ScanInput(r, angle_min, inc, range_min, range_max)


def refused(scan: ScanInput, **kw) -> ScanUnusable:
    with pytest.raises(ScanUnusable) as info:
        resample_scan(scan, B, R, **kw)
    assert info.value.code in SCAN_FAULTS
    return info.value


@pytest.mark.parametrize("n", [72, 360])
def test_mostly_blind_scan_is_refused_not_read_as_free_space(n: int) -> None:
    """71 NaN + one +inf (or 359 + 1): the nearest fill would copy "no return" all around."""
    r = np.full(n, np.nan)
    r[n // 2] = np.inf
    exc = refused(laser(r))
    assert exc.code == "too_few_valid" and "1 of" in str(exc)
    assert exc.report is not None and exc.report.valid_share == pytest.approx(1 / n)


def test_min_valid_share_threshold_is_the_parameter() -> None:
    r = np.full(72, 3.0)
    r[::3] = np.nan  # a third invalid (the fault bag's partial-NaN scan): still drives by default
    rep = resample_scan(laser(r), B, R, return_report=True)
    assert rep.valid_share == pytest.approx(2 / 3) and rep.filled_sectors == 24
    assert refused(laser(r), options=ScanOptions(min_valid_share=0.7)).code == "too_few_valid"


@pytest.mark.parametrize("reading", [0.0, 0.2])
def test_box_closer_than_range_min_is_an_obstacle_by_default(reading: float) -> None:
    """A box 0.30 m ahead reported as 0.0 or under range_min (0.35) must not become free space."""
    r = np.full(720, np.inf)
    ahead = np.abs(-math.pi + (np.arange(720) + 0.5) * 2 * math.pi / 720) < math.radians(4)
    r[ahead] = reading
    scan = laser(r, range_min=0.35, range_max=12.0)
    out = resample_scan(scan, B, R)
    assert out[FRONT] == pytest.approx(0.35)
    free = resample_scan(scan, B, R, below_min="invalid")  # the old rule: the box vanishes
    assert free[FRONT] == R


@pytest.mark.parametrize("rmax", [0.0, -1.0, float("nan"), 0.05])
def test_range_max_not_above_range_min_or_not_positive_is_refused(rmax: float) -> None:
    """range_max 0 (unset metadata) made every return "no return": all 72 beams read 6 m."""
    exc = refused(laser(np.full(72, 2.0), range_min=0.05 if rmax != 0.05 else 0.05, range_max=rmax))
    assert exc.code == "range_limits"


def test_negative_or_nan_range_min_is_refused() -> None:
    assert refused(laser(np.full(72, 2.0), range_min=-0.1)).code == "range_limits"
    assert refused(laser(np.full(72, 2.0), range_min=float("nan"))).code == "range_limits"


def test_angles_in_degrees_are_refused() -> None:
    exc = refused(laser(np.full(72, 2.0), angle_min=-180.0, inc=5.0))
    assert exc.code == "angular_span" and "degrees" in str(exc)


def test_full_turn_with_inclusive_end_angle_is_accepted() -> None:
    """Drivers that set angle_increment = (angle_max - angle_min) / (n - 1) over [-pi, pi] span 2pi exactly."""
    n = 360
    scan = laser(np.full(n, 2.0), angle_min=-math.pi, inc=np.float32(2 * math.pi / (n - 1)))
    rep = resample_scan(scan, B, R, return_report=True)
    assert rep.coverage == 1.0 and rep.filled_sectors == 0


@pytest.mark.parametrize(
    "angle_min, n, inc",
    [
        (math.pi - math.radians(10), 20, math.radians(1)),  # 20 degrees behind the robot
        (0.0, 1, 0.0),  # one reading straight ahead
        (0.0, 1, math.radians(1)),
    ],
)
def test_small_arc_is_refused_for_coverage(angle_min: float, n: int, inc: float) -> None:
    exc = refused(laser(np.full(n, 4.0), angle_min=angle_min, inc=inc))
    assert exc.code == "low_coverage" and exc.report.coverage < 0.1


def test_coverage_is_compared_with_the_trained_field_of_view() -> None:
    n = 1081  # Hokuyo UTM: 270 degrees
    scan = laser(np.full(n, 3.0), angle_min=-math.radians(135), inc=math.radians(270) / (n - 1))
    rep = resample_scan(scan, B, R, return_report=True)
    assert 270 <= rep.coverage_deg <= 280 and rep.filled_sectors == 17
    assert refused(scan, options=ScanOptions(min_coverage=0.9)).code == "low_coverage"
    # a policy trained on 270 degrees takes it with a strict threshold
    assert resample_scan(scan, B, R, options=ScanOptions(min_coverage=0.99), trained_fov=math.radians(270)) is not None
    n = 683  # Hokuyo URG: 240 degrees, below the default 75 % of 360
    urg = laser(np.full(n, 3.0), angle_min=-math.radians(120), inc=math.radians(240) / (n - 1))
    assert refused(urg).code == "low_coverage"
    assert resample_scan(urg, B, R, options=ScanOptions(min_coverage=0.6)) is not None


def test_blind_arc_in_front_is_refused_behind_is_filled() -> None:
    n = 1081
    inc = math.radians(270) / (n - 1)
    backwards = laser(np.full(n, 3.0), angle_min=math.radians(45), inc=inc)  # blind arc straight ahead
    exc = refused(backwards)
    assert exc.code == "blind_front" and "bearing 0" in str(exc)
    r = np.full(720, 3.0)
    bearings = -math.pi + (np.arange(720) + 0.5) * 2 * math.pi / 720
    r[np.abs(bearings - math.radians(30)) < math.radians(10)] = np.nan  # a 20 degree glass pane ahead-left
    assert refused(laser(r)).code == "blind_front"
    assert resample_scan(laser(r), B, R, options=ScanOptions(max_fill_gap=5)) is not None
    r = np.full(720, 3.0)
    r[np.abs(np.abs(bearings) - math.pi) < math.radians(10)] = np.nan  # the same gap straight behind
    assert resample_scan(laser(r), B, R, return_report=True).filled_sectors >= 3


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"min_valid_share": float("nan")}, "min_valid_share"),
        ({"min_valid_share": 1.5}, "min_valid_share"),
        ({"min_coverage": -0.1}, "min_coverage"),
        ({"max_fill_gap": -1}, "max_fill_gap"),
        ({"fill": "constant", "fill_value": float("inf")}, "fill_value"),
        ({"below_min": "ignore"}, "below_min"),
    ],
)
def test_scan_options_refuse_out_of_range_values(kw: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        ScanOptions(**kw)


def test_runtime_reports_what_the_policy_saw_and_uses_the_contract_fov(tmp_path) -> None:
    from support.ros import fixture_bundle

    rt = PolicyRuntime.load(fixture_bundle())
    assert rt.contract.trained_fov == pytest.approx(2 * math.pi)  # missing field: 360 degrees
    r = np.full(72, 2.0)
    r[::3] = np.nan
    rt.resample(laser(r))
    rep = rt.last_scan_report
    assert rep.filled_sectors == 24 and rep.coverage_deg == pytest.approx(360.0)
    assert rep.to_status() == {"coverage_deg": 360.0, "filled_sectors": 24, "valid_share": pytest.approx(0.6667)}
    r = np.full(72, np.nan)
    r[0] = np.inf
    with pytest.raises(ScanUnusable):
        rt.step(laser(r), (0, 0, 0), (0, 0, 0), (3, 0))
    assert rt.last_scan_report.valid_share == pytest.approx(1 / 72)
    rt.configure_scan(ScanOptions(min_valid_share=0.0, max_fill_gap=B))
    assert rt.step(laser(r), (0, 0, 0), (0, 0, 0), (3, 0)).shape == (3,)  # the old behaviour, on request
