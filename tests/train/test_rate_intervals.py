"""Every evaluated rate carries its 95 % Wilson score interval; the tables print it."""

from __future__ import annotations

import math

import pytest
from scipy.stats import binomtest

from navtrain.evaluation import format_metric, wilson_interval


@pytest.mark.parametrize(("hits", "n"), [(470, 500), (489, 500), (1, 500), (0, 500), (500, 500), (3, 7), (0, 1)])
def test_the_interval_is_scipy_s_wilson_score_interval(hits: int, n: int) -> None:
    ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson_interval(hits, n)
    # scipy takes the exact normal quantile (1.95996...), ours 1.96: the bounds agree to 1e-4
    assert low == pytest.approx(ci.low, abs=1e-4) and high == pytest.approx(ci.high, abs=1e-4)
    assert 0.0 <= low <= hits / n <= high <= 1.0


def test_the_report_row_s_numbers() -> None:
    """470 of 500 (94.0 %): the interval reaches past 95 %; 489 of 500 (97.8 %) does not reach down to it."""
    low, high = wilson_interval(470, 500)
    assert round(100 * low, 1) == 91.6 and round(100 * high, 1) == 95.8
    assert wilson_interval(489, 500)[0] > 0.95


def test_no_trial_says_nothing_and_impossible_counts_are_refused() -> None:
    assert wilson_interval(0, 0) == [0.0, 1.0]
    with pytest.raises(ValueError, match="6 hits in 5 trials"):
        wilson_interval(6, 5)
    with pytest.raises(ValueError, match="-1 hits"):
        wilson_interval(-1, 5)


def test_a_table_cell_formats_a_rate_an_interval_or_nothing() -> None:
    assert format_metric(0.94, "{:.1f} %", 100.0) == "94.0 %"
    assert format_metric([0.9156, 0.9577], "{:.1f}–{:.1f} %", 100.0) == "91.6–95.8 %"
    assert format_metric([], "{:.1f}–{:.1f} %", 100.0) == "—"  # results written before intervals existed
    assert format_metric(None, "{:.1f} %", 100.0) == "—"
    assert format_metric(math.nan, "{:.1f} s", 1.0) == "—"
